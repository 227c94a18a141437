// Errors as values: Status (ok or an error message naming where it happened) and Expected<T>
// (a value or a Status), with the DTC_RETURN_IF_ERROR / DTC_ASSIGN_OR_RETURN macros.
// Messages follow DESIGN.md section 9: "<where>: <what>"; tools print them as "error: ...".
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dtc {

/// Outcome of an operation: ok, or an error with a message of the form "<where>: <what>".
class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  /// An error whose message is exactly `message`.
  static Status error(std::string message) { return Status(std::move(message)); }
  /// An error "<where>: <what>"; `where` names the file, node, op type or rank.
  static Status error(const std::string &where, const std::string &what) {
    return Status(where.empty() ? what : where + ": " + what);
  }

  bool isOk() const { return !message_.has_value(); }
  explicit operator bool() const { return isOk(); }
  /// The error message; empty for ok.
  const std::string &message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }
  /// Returns this error with `where: ` put in front of the message (ok stays ok).
  Status withContext(const std::string &where) const {
    if (isOk() || where.empty())
      return *this;
    return Status(where + ": " + *message_);
  }

private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

/// A value of type T, or the error that prevented computing it.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : storage_(std::move(value)) {}
  Expected(Status status) : storage_(std::move(status)) {
    if (std::get<Status>(storage_).isOk()) {
      std::fprintf(stderr, "internal error: Expected constructed from an ok Status\n");
      std::abort();
    }
  }

  bool hasValue() const { return std::holds_alternative<T>(storage_); }
  explicit operator bool() const { return hasValue(); }
  T &value() { return std::get<T>(storage_); }
  const T &value() const { return std::get<T>(storage_); }
  T &operator*() { return value(); }
  const T &operator*() const { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  /// The error; ok when a value is held.
  Status status() const { return hasValue() ? Status::ok() : std::get<Status>(storage_); }
  T takeValue() { return std::move(std::get<T>(storage_)); }

private:
  std::variant<T, Status> storage_;
};

[[noreturn]] void internalError(const char *file, int line, const char *condition,
                                const std::string &message);

} // namespace dtc

#define DTC_CONCAT_INNER(a, b) a##b
#define DTC_CONCAT(a, b) DTC_CONCAT_INNER(a, b)

/// Returns the Status of `expr` from the enclosing function when it is an error.
#define DTC_RETURN_IF_ERROR(expr)                                                                  \
  do {                                                                                             \
    ::dtc::Status dtc_status_ = (expr);                                                            \
    if (!dtc_status_.isOk())                                                                       \
      return dtc_status_;                                                                          \
  } while (0)

#define DTC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                  \
  auto tmp = (expr);                                                                               \
  if (!tmp.hasValue())                                                                             \
    return tmp.status();                                                                           \
  lhs = tmp.takeValue()

/// `DTC_ASSIGN_OR_RETURN(auto x, makeX());` binds the value or returns the error.
#define DTC_ASSIGN_OR_RETURN(lhs, expr)                                                            \
  DTC_ASSIGN_OR_RETURN_IMPL(DTC_CONCAT(dtc_expected_, __LINE__), lhs, expr)

/// Internal invariant (a bug in dtc if it fails, never a user error): prints and aborts.
#define DTC_CHECK(cond, msg)                                                                       \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::dtc::internalError(__FILE__, __LINE__, #cond, (msg));                                      \
  } while (0)
