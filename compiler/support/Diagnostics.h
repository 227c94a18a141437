// Non-fatal diagnostics (warnings, notes) collected while compiling; errors travel as Status.
// Tools print them to stderr as "warning: <where>: <what>", control characters escaped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtc {

enum class Severity { kNote, kWarning };

struct Diagnostic {
  Severity severity;
  std::string message; ///< "<where>: <what>"
};

/// Collects warnings and notes in the order they are reported.
class Diagnostics {
public:
  void warning(const std::string &where, const std::string &what) {
    items_.push_back({Severity::kWarning, where.empty() ? what : where + ": " + what});
  }
  void note(const std::string &where, const std::string &what) {
    items_.push_back({Severity::kNote, where.empty() ? what : where + ": " + what});
  }
  const std::vector<Diagnostic> &items() const { return items_; }
  /// Prints every diagnostic to stderr ("warning: ..." / "note: ...") and clears the list.
  void flush();

private:
  std::vector<Diagnostic> items_;
};

/// `s` with control characters (newline, carriage return, tab, escape, DEL) written as C escapes
/// ("\n", "\r", "\t", "\x1b"), so that a name from a file cannot start a new line of output or
/// forge an "error:" line. Every other byte (including UTF-8) is kept.
std::string escapeControl(std::string_view s);

} // namespace dtc
