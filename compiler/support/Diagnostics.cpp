// Printing of collected diagnostics.
#include "compiler/support/Diagnostics.h"

#include <cstdio>

namespace dtc {

void Diagnostics::flush() {
  for (const Diagnostic &d : items_)
    std::fprintf(stderr, "%s: %s\n", d.severity == Severity::kWarning ? "warning" : "note",
                 escapeControl(d.message).c_str());
  items_.clear();
}

std::string escapeControl(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else
      out += c;
  }
  return out;
}

} // namespace dtc
