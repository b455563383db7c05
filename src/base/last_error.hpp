// The per-thread detailed message behind cairn_last_error().
#pragma once

#include <string>

namespace cairn {
void set_last_error(const std::string& message);
void clear_last_error();
const char* last_error();
}  // namespace cairn
