#include "base/last_error.hpp"

namespace cairn {
namespace {
thread_local std::string t_last_error;
}
void set_last_error(const std::string& message) { t_last_error = message; }
void clear_last_error() { t_last_error.clear(); }
const char* last_error() { return t_last_error.c_str(); }
}  // namespace cairn
