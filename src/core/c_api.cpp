// The C API edge: the only place C error codes are made from Status values.
#include "cairn/cairn.h"
#include "core/last_error.hpp"
#include "core/status.hpp"

using namespace cairn;

extern "C" {
const char* cairn_strerror(int code) { return code_text(code); }
const char* cairn_last_error(void) { return cairn::last_error(); }
}
