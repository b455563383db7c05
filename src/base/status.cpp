#include "base/status.hpp"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace cairn {

const char* code_text(int code) {
  switch (code) {
#define CAIRN_X_TEXT(name, value, text) \
  case value:                           \
    return text;
    CAIRN_ERROR_LIST(CAIRN_X_TEXT)
#undef CAIRN_X_TEXT
  }
  return "unknown error code";
}

const char* code_name(int code) {
  switch (code) {
#define CAIRN_X_NAME(name, value, text) \
  case value:                           \
    return #name;
    CAIRN_ERROR_LIST(CAIRN_X_NAME)
#undef CAIRN_X_NAME
  }
  return nullptr;
}

std::optional<Code> code_by_name(std::string_view name) {
#define CAIRN_X_BY_NAME(n, value, text) \
  if (name == #n) return Code::n;
  CAIRN_ERROR_LIST(CAIRN_X_BY_NAME)
#undef CAIRN_X_BY_NAME
  return std::nullopt;
}

Status make_error(Code code, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return Status(code, buf);
}

Status posix_error(const char* call, const std::string& path, int err) {
  Code code = (err == ENOSPC || err == EDQUOT) ? Code::ERR_NO_SPACE
              : err == ENOMEM                  ? Code::ERR_NO_MEMORY
                                               : Code::ERR_IO;
  return make_error(code, "%s %s: %s (errno %d)", call, path.c_str(), strerror(err), err);
}

}  // namespace cairn
