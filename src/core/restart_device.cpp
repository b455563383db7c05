// Device (GPU) regions in the runtime: telling them from host memory at cairn_protect, the calls that
// order the application's stream with cairn's copies, and the restart into device memory.
//
// A restart never writes a device region before its version is verified. Every restart path (L1, L2,
// L3, another rank count) reads into host memory; for a device region that is a staging buffer that
// stands in for the region while the restart runs (its resize callback, when the rank count changes,
// gets the application's new device buffer and hands the restart a staging buffer of the same size).
// Only once the restart succeeded on every rank are the staging buffers copied into the device
// buffers; after a failure the device buffers are untouched. docs/gpu.md.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "base/stream_reader.hpp"
#include "core/runtime.hpp"
#include "mpi/mpi_util.hpp"

namespace cairn {

struct Runtime::DeviceStage {
  std::string name;
  void* device_ptr = nullptr;  // the region's device buffer before the restart
  cairn_resize_fn app_resize = nullptr;
  void* app_user = nullptr;
  uint32_t elem = 1;
  void* new_device = nullptr;  // from the application's resize callback, when the count changed
  MappedFile staging;
  const device::Driver* driver = nullptr;
  void* context = nullptr;
  Status error;  // what went wrong inside the resize callback
};

namespace {
// The resize callback a staged device region carries during a restart.
void* staged_resize(const char* name, size_t count, void* user) {
  auto* s = static_cast<Runtime::DeviceStage*>(user);
  void* dev = s->app_resize(name, count, s->app_user);
  if (!dev && count > 0) return nullptr;
  const uint64_t bytes = static_cast<uint64_t>(count) * s->elem;
  if (count > 0) {
    auto info = device::classify(*s->driver, dev, bytes);
    if (!info.is_ok() || !info->device || info->context != s->context) {
      s->error = make_error(Code::ERR_INVALID_ARG, "region '%s': the resize callback returned %p, which is not device "
                            "memory of the region's device (%s)", name, dev,
                            info.is_ok() ? "host memory or another device" : info.status().message().c_str());
      return nullptr;
    }
  }
  auto staging = MappedFile::anonymous(bytes);
  if (!staging.is_ok()) {
    s->error = staging.status();
    return nullptr;
  }
  s->new_device = dev;
  s->staging = std::move(staging).value();
  return s->staging.data();
}
}  // namespace

Status Runtime::classify_region(const char* name, void* ptr, uint64_t bytes, bool* device, void** context) {
  *device = false;
  *context = nullptr;
  if (!ptr || bytes == 0) return Status::ok();
  auto driver = device::process_driver(cfg_.cuda_driver);
  if (driver.is_ok()) {
    auto info = device::classify(**driver, ptr, bytes);
    if (!info.is_ok()) return info.status().prefixed(std::string("cairn_protect('") + name + "')");
    if (info->device) {
      *device = true;
      *context = info->context;
      driver_ = *driver;
      device_snapshot_->set_driver(driver_);
      return Status::ok();
    }
  }
  if (device::host_readable(ptr, bytes)) return Status::ok();
  // Neither host memory nor device memory the driver knows: say what could not be told.
  if (!driver.is_ok())
    return make_error(Code::ERR_NOT_SUPPORTED, "cairn_protect('%s'): %llu bytes at %p are not host memory, and no CUDA driver "
                      "could tell whether they are device memory: %s", name, static_cast<unsigned long long>(bytes), ptr,
                      driver.status().message().c_str());
  if ((*driver)->devices() == 0)
    return make_error(Code::ERR_NOT_SUPPORTED, "cairn_protect('%s'): %llu bytes at %p are not host memory, and the CUDA driver "
                      "'%s' sees no GPU on this machine", name, static_cast<unsigned long long>(bytes), ptr,
                      (*driver)->path().c_str());
  return make_error(Code::ERR_INVALID_ARG, "cairn_protect('%s'): %llu bytes at %p are neither host memory nor device "
                    "memory the CUDA driver knows (freed device memory?)", name, static_cast<unsigned long long>(bytes), ptr);
}

Status Runtime::device_stream(void* stream) {
  return device_snapshot_->set_app_stream(static_cast<CUstream>(stream));
}

Status Runtime::device_copied_event(void** event) {
  if (!event) return make_error(Code::ERR_INVALID_ARG, "cairn_device_copied_event: event is NULL");
  *event = device_snapshot_->copied_event();
  return Status::ok();
}

Status Runtime::device_wait_copied(void* stream) {
  return device_snapshot_->wait_copied_on(static_cast<CUstream>(stream));
}

Status Runtime::stage_device_regions(std::vector<std::unique_ptr<DeviceStage>>* stages) {
  Status st = Status::ok();
  for (auto& [name, r] : regions_.table()) {
    auto dev = regions_.on_device().find(name);
    if (dev == regions_.on_device().end()) continue;
    auto s = std::make_unique<DeviceStage>();
    s->name = name;
    s->device_ptr = r.ptr;
    s->app_resize = r.resize;
    s->app_user = r.resize_user;
    s->elem = r.elem_size;
    s->driver = driver_;
    s->context = dev->second;
    auto staging = MappedFile::anonymous(r.bytes());
    if (!staging.is_ok()) {
      st = staging.status().prefixed("staging device region '" + name + "' for the restart");
      break;
    }
    s->staging = std::move(staging).value();
    r.ptr = s->staging.data();
    if (r.resize) {
      r.resize = &staged_resize;
      r.resize_user = s.get();
    }
    stages->push_back(std::move(s));
  }
  Status all = agree(app_comm_, st);
  if (!all.is_ok()) (void)unstage_device_regions(stages, all);
  return all;
}

Status Runtime::unstage_device_regions(std::vector<std::unique_ptr<DeviceStage>>* stages, const Status& restarted) {
  Status st = Status::ok();
  for (auto& s : *stages) {
    auto it = regions_.table().find(s->name);
    if (it == regions_.table().end()) continue;
    Region& r = it->second;
    void* dev = s->new_device ? s->new_device : s->device_ptr;
    // Read from the slot straight into the device already (read_slot_into_device), verified: the same
    // version's bytes, whichever path restored the others.
    const bool direct = device_direct_version_ != 0 && device_direct_version_ == restored_version_ && !s->new_device;
    if (restarted.is_ok() && st.is_ok() && r.bytes() > 0 && !direct) {
      // The version is verified on every rank: now its bytes go into the device.
      st = device_snapshot_->copy_to_device(s->context, dev, r.ptr, r.bytes())
               .prefixed("restoring device region '" + s->name + "'");
    }
    r.ptr = dev;
    r.resize = s->app_resize;
    r.resize_user = s->app_user;
    if (!s->error.is_ok() && restarted.is_ok() && st.is_ok()) st = s->error;
  }
  stages->clear();
  if (!restarted.is_ok()) return restarted;  // the device buffers are untouched
  return agree(app_comm_, st);
}

Status Runtime::restart_all_regions() {
  std::vector<std::unique_ptr<DeviceStage>> stages;
  int local = regions_.on_device().empty() ? 0 : 1, global = 0;
  CAIRN_MPI(MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, app_comm_));
  if (!global) return restart_regions();
  CAIRN_TRY(stage_device_regions(&stages));
  device_direct_version_ = 0;
  staged_ = &stages;
  Status st = restart_regions();
  staged_ = nullptr;
  if (!st.is_ok())
    for (auto& s : stages)
      if (!s->error.is_ok()) st = s->error.prefixed(st.message());
  return unstage_device_regions(&stages, st);
}

}  // namespace cairn

namespace cairn {

Status Runtime::read_slot_into_device(const L1Record& rec, double* seconds) {
  const Manifest& m = rec.manifest;
  const double t0 = now_seconds();
  std::string path = cache_.slot_path(static_cast<int>(rec.slot));
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return posix_error("stat", path, errno);
  if (static_cast<uint64_t>(sb.st_size) < m.total_size)
    return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", path.c_str());
  // The cache's own mapping: pinned when this process's checkpoints copied into it.
  CAIRN_ASSIGN_OR_RETURN(slot, cache_.slot(static_cast<int>(rec.slot), m.total_size));
  std::vector<StreamExtent> host;
  std::vector<device::DeviceSnapshotter::DeviceExtent> dev;
  void* ctx = nullptr;
  for (const auto& e : m.regions) {
    const Region& r = regions_.table().at(e.name);
    const DeviceStage* s = nullptr;
    for (const auto& st : *staged_)
      if (st->name == e.name) s = st.get();
    if (s && e.size) {
      dev.push_back({e.offset, e.size, s->device_ptr});
      ctx = s->context;
    } else if (e.size) {
      host.push_back({e.offset, e.size, static_cast<uint8_t*>(r.ptr)});
    }
  }
  std::sort(host.begin(), host.end(), [](const StreamExtent& x, const StreamExtent& y) { return x.offset < y.offset; });
  Status st = Status::ok();
  if (!host.empty()) st = read_verified_ranges(m, host, copy_source(slot->data()));
  if (st.is_ok() && !dev.empty())
    st = device_snapshot_->restore_verified(ctx, slot->data(), m, dev);
  *seconds = now_seconds() - t0;
  if (st.is_ok()) device_direct_version_ = m.version;
  return st.prefixed(path);
}

}  // namespace cairn
