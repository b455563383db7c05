// The protected regions (regions.hpp): the checks of the region calls, the table, and how a version
// describes and restores the regions.
#include "core/regions.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace cairn {
namespace {
uint32_t type_size(int type) {
  switch (type) {
    case CAIRN_BYTE: return 1;
    case CAIRN_CHAR: return sizeof(char);
    case CAIRN_INT: return sizeof(int);
    case CAIRN_INT32: return 4;
    case CAIRN_INT64: return 8;
    case CAIRN_UINT32: return 4;
    case CAIRN_UINT64: return 8;
    case CAIRN_FLOAT: return sizeof(float);
    case CAIRN_DOUBLE: return sizeof(double);
    case CAIRN_LONG: return sizeof(long);
    case CAIRN_COMPLEX_FLOAT: return 2 * sizeof(float);
    case CAIRN_COMPLEX_DOUBLE: return 2 * sizeof(double);
  }
  return 0;
}

Result<redistribute::Distribution> dist_from_c(const cairn_distribution& d) {
  if (d.kind < 0 || d.kind > CAIRN_DIST_BLOCK_COLS)
    return make_error(Code::ERR_INVALID_ARG, "unknown distribution kind %d", d.kind);
  return redistribute::make(static_cast<redistribute::Kind>(d.kind), d.global_count, d.block_size, d.rows, d.cols);
}
}  // namespace

Result<uint32_t> ProtectedRegions::check(const char* name, void* ptr, size_t count, int type) {
  if (!name || !*name) return make_error(Code::ERR_INVALID_ARG, "cairn_protect: name is empty");
  if (strlen(name) > 255) return make_error(Code::ERR_INVALID_ARG, "cairn_protect: name longer than 255 bytes");
  uint32_t elem = type_size(type);
  if (elem == 0) return make_error(Code::ERR_INVALID_ARG, "cairn_protect('%s'): unknown cairn_type %d", name, type);
  if (!ptr && count > 0)
    return make_error(Code::ERR_INVALID_ARG, "cairn_protect('%s'): NULL pointer with count %zu", name, count);
  if (count > (UINT64_MAX / elem)) return make_error(Code::ERR_INVALID_ARG, "cairn_protect('%s'): count overflows", name);
  return elem;
}

Result<redistribute::Distribution> ProtectedRegions::check_distribution(const char* name, size_t count,
                                                                        const cairn_distribution* d, int rank,
                                                                        int nranks) {
  if (!d) return make_error(Code::ERR_INVALID_ARG, "cairn_protect_distributed('%s'): distribution is NULL", name ? name : "");
  CAIRN_ASSIGN_OR_RETURN(dist, dist_from_c(*d));
  if (dist.kind != redistribute::Kind::private_ && dist.kind != redistribute::Kind::replicated) {
    uint64_t want = redistribute::local_count(dist, nranks, rank);
    // count 0 on a one-rank communicator: a process about to join a job by cairn_redistribute.
    if (want != count && !(count == 0 && nranks == 1))
      return make_error(Code::ERR_SIZE_MISMATCH,
                        "cairn_protect_distributed('%s'): %zu elements given, the %s distribution gives rank %d of %d "
                        "%llu (see cairn_local_count)", name ? name : "", count, redistribute::kind_name(dist.kind),
                        rank, nranks, static_cast<unsigned long long>(want));
  } else if (dist.kind == redistribute::Kind::replicated && dist.global_count && dist.global_count != count) {
    return make_error(Code::ERR_SIZE_MISMATCH, "cairn_protect_distributed('%s'): replicated region of %llu elements given %zu",
                      name ? name : "", static_cast<unsigned long long>(dist.global_count), count);
  }
  return dist;
}

Status ProtectedRegions::local_count(const cairn_distribution* d, int rank, int nranks, size_t* count) {
  if (!d || !count) return make_error(Code::ERR_INVALID_ARG, "cairn_local_count: NULL argument");
  CAIRN_ASSIGN_OR_RETURN(dist, dist_from_c(*d));
  if (dist.kind == redistribute::Kind::private_)
    return make_error(Code::ERR_INVALID_ARG, "cairn_local_count: a private region has no global shape");
  *count = static_cast<size_t>(dist.kind == redistribute::Kind::replicated
                                   ? dist.global_count
                                   : redistribute::local_count(dist, nranks, rank));
  return Status::ok();
}

void ProtectedRegions::put(const char* name, void* ptr, size_t count, int type, uint32_t elem, bool device, void* context) {
  Region& r = table_[name];
  r.name = name;
  r.ptr = ptr;
  r.count = count;
  r.type = type;
  r.elem_size = elem;
  r.dist_kind = 0;  // cairn_protect means private; cairn_protect_distributed sets it after
  if (device) device_[name] = context;
  else device_.erase(name);
  r.dist_params.clear();
}

void ProtectedRegions::distribute(const char* name, const redistribute::Distribution& dist) {
  Region& r = table_[name];
  r.dist_kind = static_cast<uint32_t>(dist.kind);
  r.dist_params = dist.to_params();
}

Status ProtectedRegions::set_resize(const char* name, cairn_resize_fn fn, void* user) {
  auto it = table_.find(name ? name : "");
  if (it == table_.end())
    return make_error(Code::ERR_UNKNOWN_REGION, "cairn_set_resize: no region named '%s' (protect it first)", name ? name : "(null)");
  it->second.resize = fn;
  it->second.resize_user = user;
  return Status::ok();
}

Status ProtectedRegions::check_unprotect(const char* name) const {
  if (!name || !table_.count(name))
    return make_error(Code::ERR_UNKNOWN_REGION, "cairn_unprotect: no region named '%s'", name ? name : "(null)");
  return Status::ok();
}

void ProtectedRegions::erase(const std::string& name) {
  table_.erase(name);
  device_.erase(name);
}

uint64_t ProtectedRegions::memory_entries(std::vector<RegionEntry>* out) const {
  uint64_t off = 0;
  for (const auto& [name, r] : table_) {
    RegionEntry e;
    e.name = name;
    e.kind = RegionKind::memory;
    e.type = static_cast<uint32_t>(r.type);
    e.elem_size = r.elem_size;
    e.count = r.count;
    e.offset = off;
    e.size = r.bytes();
    e.distribution = r.dist_kind;
    e.dist_params = r.dist_params;
    off += e.size;
    out->push_back(std::move(e));
  }
  return off;
}

std::vector<SnapshotRegion> ProtectedRegions::sources(const std::vector<RegionEntry>& entries) const {
  std::vector<SnapshotRegion> memory;
  for (const auto& e : entries) {
    const Region& r = table_.at(e.name);
    auto dev = device_.find(e.name);
    bool on_device = dev != device_.end();
    memory.push_back({e.name, r.ptr, e.size, e.offset, on_device, on_device ? dev->second : nullptr});
  }
  return memory;
}

bool ProtectedRegions::fit(const Manifest& m, int rank, int nranks) const {
  return m.nranks == static_cast<uint32_t>(nranks) && m.rank == static_cast<uint32_t>(rank) && m.chunk_size != 0 &&
         regions_hold(m, table_);
}

std::vector<StreamExtent> ProtectedRegions::extents(const Manifest& m) const {
  std::vector<StreamExtent> extents;
  for (const auto& e : m.regions)
    extents.push_back({e.offset, e.size, static_cast<uint8_t*>(table_.at(e.name).ptr)});
  std::sort(extents.begin(), extents.end(), [](const StreamExtent& x, const StreamExtent& y) { return x.offset < y.offset; });
  return extents;
}

}  // namespace cairn
