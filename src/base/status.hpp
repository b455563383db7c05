// Status and Result: how errors travel inside cairn. C codes are made only at the C API edge.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "cairn/cairn_errors.h"

namespace cairn {

enum class Code : int {
#define CAIRN_X_CODE(name, value, text) name = value,
  CAIRN_ERROR_LIST(CAIRN_X_CODE)
#undef CAIRN_X_CODE
};

// Short description of a code, the text of cairn_strerror().
const char* code_text(int code);
// The symbolic name of a code ("ERR_IO"), or nullptr for an unknown code; and back.
const char* code_name(int code);
std::optional<Code> code_by_name(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == Code::SUCCESS; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  int c_code() const { return static_cast<int>(code_); }
  const std::string& message() const { return message_; }
  // The message with more context in front: "restart: <message>".
  Status prefixed(const std::string& context) const {
    return is_ok() ? *this : Status(code_, context + ": " + message_);
  }
  void ignore() const {}

 private:
  Code code_ = Code::SUCCESS;
  std::string message_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) {}
  bool is_ok() const { return status_.is_ok(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

// Build a Status with a printf-style message.
Status make_error(Code code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A Status for a failed POSIX call: "<call> <path>: <strerror(errno)>", ERR_NO_SPACE for ENOSPC/EDQUOT.
Status posix_error(const char* call, const std::string& path, int err);

#define CAIRN_TRY(expr)                              \
  do {                                               \
    ::cairn::Status cairn_try_status_ = (expr);      \
    if (!cairn_try_status_.is_ok()) return cairn_try_status_; \
  } while (0)

#define CAIRN_ASSIGN_OR_RETURN(lhs, expr)             \
  auto lhs##_result_ = (expr);                       \
  if (!lhs##_result_.is_ok()) return lhs##_result_.status(); \
  auto lhs = std::move(lhs##_result_).value()

}  // namespace cairn
