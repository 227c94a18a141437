// Out-of-line parts of Status: the internal-error reporter used by DTC_CHECK.
#include "compiler/support/Status.h"

namespace dtc {

void internalError(const char *file, int line, const char *condition, const std::string &message) {
  std::fprintf(stderr, "internal error: %s:%d: check '%s' failed: %s\n", file, line, condition,
               message.c_str());
  std::abort();
}

} // namespace dtc
