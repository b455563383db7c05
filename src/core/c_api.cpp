// The C API edge: the only place C error codes are made from Status values, and where the per-thread
// detailed message is set.
#include "cairn/cairn.h"
#include "cairn/cairn_device.h"
#include "base/last_error.hpp"
#include "core/runtime.hpp"
#include "base/status.hpp"

using cairn::Runtime;
using cairn::Status;

namespace {

int finish(const char* call, const Status& st) {
  if (st.is_ok()) return CAIRN_SUCCESS;
  Runtime* rt = Runtime::instance();
  std::string where = rt ? " [rank " + std::to_string(rt->rank()) + "]" : "";
  cairn::set_last_error(std::string(call) + where + ": " + st.message());
  return st.c_code();
}

template <class F>
int call(const char* name, F&& f) {
  cairn::clear_last_error();
  Runtime* rt = Runtime::instance();
  if (!rt)
    return finish(name, cairn::make_error(cairn::Code::ERR_NOT_INITIALIZED, "call cairn_init before %s", name));
  try {
    return finish(name, f(*rt));
  } catch (const std::bad_alloc&) {
    return finish(name, Status(cairn::Code::ERR_NO_MEMORY, "out of memory"));
  } catch (const std::exception& e) {
    return finish(name, Status(cairn::Code::ERR_INTERNAL, e.what()));
  }
}

}  // namespace

extern "C" {

int cairn_init(MPI_Comm comm, const char* config_path) {
  cairn::clear_last_error();
  try {
    return finish("cairn_init", Runtime::create(comm, config_path));
  } catch (const std::exception& e) {
    return finish("cairn_init", Status(cairn::Code::ERR_INTERNAL, e.what()));
  }
}

int cairn_finalize(void) {
  cairn::clear_last_error();
  if (!Runtime::instance())
    return finish("cairn_finalize", cairn::make_error(cairn::Code::ERR_NOT_INITIALIZED, "call cairn_init before cairn_finalize"));
  return finish("cairn_finalize", Runtime::destroy());
}

int cairn_protect(const char* name, void* ptr, size_t count, cairn_type type) {
  return call("cairn_protect", [&](Runtime& rt) { return rt.protect(name, ptr, count, type); });
}
int cairn_protect_distributed(const char* name, void* ptr, size_t count, cairn_type type, const cairn_distribution* dist) {
  return call("cairn_protect_distributed", [&](Runtime& rt) { return rt.protect_distributed(name, ptr, count, type, dist); });
}
int cairn_local_count(const cairn_distribution* dist, size_t* count) {
  return call("cairn_local_count", [&](Runtime& rt) { return rt.local_count(dist, count); });
}
int cairn_set_resize(const char* name, cairn_resize_fn fn, void* user_data) {
  return call("cairn_set_resize", [&](Runtime& rt) { return rt.set_resize(name, fn, user_data); });
}
int cairn_redistribute(MPI_Comm new_comm) {
  bool left = false;
  int rc = call("cairn_redistribute", [&](Runtime& rt) { return rt.redistribute(new_comm, &left); });
  if (rc == CAIRN_SUCCESS && left) Runtime::abandon();
  return rc;
}
int cairn_unprotect(const char* name) {
  return call("cairn_unprotect", [&](Runtime& rt) { return rt.unprotect(name); });
}
int cairn_device_stream(void* stream) {
  return call("cairn_device_stream", [&](Runtime& rt) { return rt.device_stream(stream); });
}
int cairn_device_wait_copied(void* stream) {
  return call("cairn_device_wait_copied", [&](Runtime& rt) { return rt.device_wait_copied(stream); });
}
int cairn_device_copied_event(void** event) {
  return call("cairn_device_copied_event", [&](Runtime& rt) { return rt.device_copied_event(event); });
}
int cairn_checkpoint(void) {
  return call("cairn_checkpoint", [&](Runtime& rt) { return rt.checkpoint(); });
}
int cairn_wait(void) {
  return call("cairn_wait", [&](Runtime& rt) { return rt.wait_all(); });
}
int cairn_restart_available(int* available, int* version) {
  return call("cairn_restart_available", [&](Runtime& rt) { return rt.restart_available(available, version); });
}
int cairn_restart(void) {
  return call("cairn_restart", [&](Runtime& rt) { return rt.restart(); });
}
int cairn_restart_level(int* version, int* level) {
  return call("cairn_restart_level", [&](Runtime& rt) {
    rt.restart_level(version, level);
    return Status::ok();
  });
}
int cairn_route_file(const char* name, char* path_out, size_t len) {
  return call("cairn_route_file", [&](Runtime& rt) { return rt.route_file(name, path_out, len); });
}
int cairn_start_output(const char* label, int flags) {
  return call("cairn_start_output", [&](Runtime& rt) { return rt.start_output(label, flags); });
}
int cairn_complete_output(int valid) {
  return call("cairn_complete_output", [&](Runtime& rt) { return rt.complete_output(valid); });
}
int cairn_have_restart(int* available, char* label_out, size_t len) {
  return call("cairn_have_restart", [&](Runtime& rt) { return rt.have_restart(available, label_out, len); });
}
int cairn_start_restart(char* label_out, size_t len) {
  return call("cairn_start_restart", [&](Runtime& rt) { return rt.start_restart(label_out, len); });
}
int cairn_complete_restart(int valid) {
  return call("cairn_complete_restart", [&](Runtime& rt) { return rt.complete_restart(valid); });
}
int cairn_delete_versions(const char* label, int flags) {
  return call("cairn_delete_versions", [&](Runtime& rt) { return rt.delete_versions(label, flags); });
}
int cairn_local_dir(char* path_out, size_t len) {
  return call("cairn_local_dir", [&](Runtime& rt) { return rt.local_dir(path_out, len); });
}
int cairn_need_checkpoint(int* flag) {
  return call("cairn_need_checkpoint", [&](Runtime& rt) { return rt.need_checkpoint(flag); });
}
int cairn_probe_agents(int* changed) {
  return call("cairn_probe_agents", [&](Runtime& rt) { return rt.probe_agents(changed); });
}
int cairn_should_exit(int* flag) {
  return call("cairn_should_exit", [&](Runtime& rt) { return rt.should_exit(flag); });
}
const char* cairn_strerror(int code) { return cairn::code_text(code); }
const char* cairn_last_error(void) { return cairn::last_error(); }

}  // extern "C"
