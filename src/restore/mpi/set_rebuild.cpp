#include "restore/mpi/set_rebuild.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "redundancy/set_record.hpp"

namespace cairn::restore {

int SetRebuildJob::first_survivor() const {
  for (size_t i = 0; i < lost.size(); ++i)
    if (!lost[i]) return static_cast<int>(i);
  return -1;
}

std::vector<bool> lost_members(const std::vector<int>& members, const std::function<bool(int)>& survives) {
  std::vector<bool> lost(members.size());
  for (size_t i = 0; i < members.size(); ++i) lost[i] = !survives(members[i]);
  return lost;
}

Result<SetRebuild> share_set(SetRebuildJob job, const std::function<Result<std::string>()>& read_record) {
  const int first = job.first_survivor();
  Result<std::string> bytes = job.my_member == first ? read_record() : Result<std::string>(std::string());
  auto shared = redundancy::share_set_record(job.comm, first, bytes ? *bytes : std::string(), job.expect, job.version);
  if (shared.status().code() == Code::ERR_MPI) return shared.status();
  if (!bytes) return bytes.status();
  if (!shared) return shared.status();
  // The same record everywhere, so the same outcome on every member.
  auto code = redundancy::SetCode::make(shared->record.scheme, static_cast<int>(job.lost.size()),
                                        static_cast<int>(shared->record.m));
  if (!code) return code.status();
  return SetRebuild{std::move(job), std::move(shared).value(), std::move(code).value()};
}

Status SetRebuild::exchange(const Status& ready, uint8_t* data, uint8_t* red, const std::string& what, bool verify_lost,
                            redundancy::RebuildPart part, bool gentle) const {
  return redundancy::rebuild_members(job.comm, code, job.lost, plan, ready, data, red, job.exchange_chunk, what,
                                     verify_lost, part, gentle);
}

Status SetRebuild::exchange_data(const Status& ready, uint8_t* data, uint8_t* red, bool gentle,
                                 LandingVerifier* landing) const {
  redundancy::Place place;
  if (landing && job.i_lost()) place = [landing](size_t off, const uint8_t* src, size_t len) { landing->place(off, src, len); };
  return redundancy::rebuild_members(job.comm, code, job.lost, plan, ready, data, red,
                                     std::min<uint64_t>(job.exchange_chunk, kLandingPiece), "", /*verify_lost=*/false,
                                     redundancy::RebuildPart::data, gentle, place);
}

Status SetRebuild::claim_slot(CacheStore& cache, int slot, uint8_t** data, uint8_t** red) const {
  CAIRN_TRY(cache.release_slot(slot));
  CAIRN_TRY(cache.drop(job.version));
  CAIRN_ASSIGN_OR_RETURN(d, cache.slot(slot, std::max<uint64_t>(plan.mine.total_size, 1)));
  CAIRN_ASSIGN_OR_RETURN(r, cache.red(slot, plan.redundancy_len));
  *data = d->data();
  *red = r->data();
  return Status::ok();
}

Status SetRebuild::record_rebuilt(CacheStore& cache, int slot) const {
  CAIRN_TRY(cache.write_record(job.version, L1Record{static_cast<uint32_t>(slot), plan.mine}));
  CAIRN_TRY(cache.write_set(job.version, redundancy::encode_set_record(plan.record)));
  return cache.mark_protected(job.version);
}

Status SetRebuild::write_back(CacheStore& cache, int slot, const uint8_t* data, const uint8_t* red) const {
  uint8_t* d = nullptr;
  uint8_t* r = nullptr;
  CAIRN_TRY(claim_slot(cache, slot, &d, &r));
  if (plan.mine.total_size) memcpy(d, data, plan.mine.total_size);
  memcpy(r, red, plan.redundancy_len);
  return record_rebuilt(cache, slot);
}

namespace {
bool populate_file(const std::string& path, Populate populate) {
  if (populate != Populate::where_huge_pages) return populate == Populate::yes;
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && map_to_read(static_cast<uint64_t>(st.st_blksize));
}
}  // namespace

Status survivor_buffers(const std::string& slot_path, const std::string& red_path, uint64_t total, size_t red_len,
                        Populate populate, SetBuffers* out, const uint8_t* stream) {
  if (!stream) {
    CAIRN_ASSIGN_OR_RETURN(d, MappedFile::open_ro(slot_path, populate_file(slot_path, populate)));
    if (d.size() < total) return make_error(Code::ERR_CORRUPT, "%s: slot shorter than the version", d.path().c_str());
    out->data_file.emplace(std::move(d));
    stream = out->data_file->data();
  }
  CAIRN_ASSIGN_OR_RETURN(r, MappedFile::open_ro(red_path, populate_file(red_path, populate)));
  if (r.size() < red_len) return make_error(Code::ERR_CORRUPT, "%s: shorter than the redundancy data", r.path().c_str());
  out->red_file.emplace(std::move(r));
  out->data = const_cast<uint8_t*>(stream);  // read only: the exchange never writes a survivor's buffers
  out->red = out->red_file->data();
  return Status::ok();
}

Status staging_buffers(uint64_t total, size_t red_len, SetBuffers* out, bool populate) {
  CAIRN_ASSIGN_OR_RETURN(d, MappedFile::anonymous(std::max<uint64_t>(total, 1), populate));
  out->data_file.emplace(std::move(d));
  out->data = out->data_file->data();
  if (red_len == 0) return Status::ok();
  CAIRN_ASSIGN_OR_RETURN(r, MappedFile::anonymous(red_len));
  out->red_file.emplace(std::move(r));
  out->red = out->red_file->data();
  return Status::ok();
}

}  // namespace cairn::restore
