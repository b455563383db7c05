// SCR's Fortran interface (SCR_INIT(IERROR), SCR_ROUTE_FILE(NAME, FILE, IERROR), ...): the link names
// gfortran, Intel's and most compilers use (lower case, one trailing underscore), the character
// lengths passed after the last argument (size_t since GCC 8), blank-padded results as SCR's scrf.c.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "include/scr.h"
#include "scr_params.hpp"

namespace {

using flen = size_t;

// A Fortran string without its trailing blanks; false if it does not fit SCR_MAX_FILENAME.
bool from_fortran(const char* s, flen len, std::string* out) {
  if (!s) return false;
  while (len > 0 && s[len - 1] == ' ') --len;
  if (len >= SCR_MAX_FILENAME) return false;
  out->assign(s, len);
  return true;
}

// `s` into a Fortran string, blank-padded; false if it had to be cut.
bool to_fortran(const char* s, char* out, flen len) {
  if (!s || !out) return false;
  size_t n = strlen(s);
  size_t k = n < len ? n : len;
  memcpy(out, s, k);
  memset(out + k, ' ', len - k);
  return n <= len;
}

}  // namespace

#define SCR_FORTRAN(name) __attribute__((visibility("default"))) void name##_

extern "C" {

SCR_FORTRAN(scr_init)(int* ierror) { *ierror = SCR_Init(); }
SCR_FORTRAN(scr_finalize)(int* ierror) { *ierror = SCR_Finalize(); }
SCR_FORTRAN(scr_should_exit)(int* flag, int* ierror) { *ierror = SCR_Should_exit(flag); }
SCR_FORTRAN(scr_need_checkpoint)(int* flag, int* ierror) { *ierror = SCR_Need_checkpoint(flag); }
SCR_FORTRAN(scr_start_checkpoint)(int* ierror) { *ierror = SCR_Start_checkpoint(); }
SCR_FORTRAN(scr_complete_checkpoint)(int* valid, int* ierror) { *ierror = SCR_Complete_checkpoint(*valid); }
SCR_FORTRAN(scr_complete_output)(int* valid, int* ierror) { *ierror = SCR_Complete_output(*valid); }
SCR_FORTRAN(scr_complete_restart)(int* valid, int* ierror) { *ierror = SCR_Complete_restart(*valid); }

SCR_FORTRAN(scr_get_version)(char* version, int* ierror, flen version_len) {
  *ierror = to_fortran(SCR_Get_version(), version, version_len) ? SCR_SUCCESS : SCR_FAILURE;
}

// SCR_CONFIG(CONFIG, VAL, IERROR): a query returns the value in VAL (blank when unset).
SCR_FORTRAN(scr_config)(const char* config, char* val, int* ierror, flen config_len, flen val_len) {
  std::string c;
  if (!from_fortran(config, config_len, &c)) {
    *ierror = SCR_FAILURE;
    return;
  }
  const char* v = SCR_Config(c.c_str());
  *ierror = SCR_SUCCESS;
  std::string error;
  auto request = cairn::scr::parse_config_request(c, &error);
  bool is_query = request && request->op == cairn::scr::ConfigRequest::Op::query;
  if (is_query) {
    if (val && !to_fortran(v ? v : "", val, val_len)) *ierror = SCR_FAILURE;
    free(const_cast<char*>(v));
  }
}

SCR_FORTRAN(scr_have_restart)(int* flag, char* name, int* ierror, flen name_len) {
  char n[SCR_MAX_FILENAME];
  *ierror = SCR_Have_restart(flag, n);
  if (*ierror == SCR_SUCCESS && *flag && !to_fortran(n, name, name_len)) *ierror = SCR_FAILURE;
}

SCR_FORTRAN(scr_start_restart)(char* name, int* ierror, flen name_len) {
  char n[SCR_MAX_FILENAME];
  *ierror = SCR_Start_restart(n);
  if (*ierror == SCR_SUCCESS && !to_fortran(n, name, name_len)) *ierror = SCR_FAILURE;
}

SCR_FORTRAN(scr_start_output)(const char* name, int* flags, int* ierror, flen name_len) {
  std::string n;
  *ierror = from_fortran(name, name_len, &n) ? SCR_Start_output(n.empty() ? nullptr : n.c_str(), *flags) : SCR_FAILURE;
}

SCR_FORTRAN(scr_route_file)(const char* name, char* file, int* ierror, flen name_len, flen file_len) {
  std::string n;
  char f[SCR_MAX_FILENAME];
  if (!from_fortran(name, name_len, &n)) {
    *ierror = SCR_FAILURE;
    return;
  }
  *ierror = SCR_Route_file(n.c_str(), f);
  if (*ierror == SCR_SUCCESS && !to_fortran(f, file, file_len)) *ierror = SCR_FAILURE;
}

SCR_FORTRAN(scr_current)(const char* name, int* ierror, flen name_len) {
  std::string n;
  *ierror = from_fortran(name, name_len, &n) ? SCR_Current(n.c_str()) : SCR_FAILURE;
}
SCR_FORTRAN(scr_drop)(const char* name, int* ierror, flen name_len) {
  std::string n;
  *ierror = from_fortran(name, name_len, &n) ? SCR_Drop(n.c_str()) : SCR_FAILURE;
}
SCR_FORTRAN(scr_delete)(const char* name, int* ierror, flen name_len) {
  std::string n;
  *ierror = from_fortran(name, name_len, &n) ? SCR_Delete(n.c_str()) : SCR_FAILURE;
}

}  // extern "C"
