// Printing of collected diagnostics.
#include "compiler/support/Diagnostics.h"

#include <cstdio>

namespace dtc {

void Diagnostics::flush() {
  for (const Diagnostic &d : items_)
    std::fprintf(stderr, "%s: %s\n", d.severity == Severity::kWarning ? "warning" : "note",
                 d.message.c_str());
  items_.clear();
}

} // namespace dtc
