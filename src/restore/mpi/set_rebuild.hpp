// One redundancy set rebuilding its lost members from its set record, and the lost members writing the
// version back into their cache: what the same-count restart (core/restart_inplace.cpp, its fast path and
// the re-protection after it), the full search (core/restart_search.cpp) and the reshaping restart
// (redistribute/exec/reshape_l2.cpp) share. It works on a narrow view of the job (SetRebuildJob: the
// set's communicator, the losses, the version, the exchange unit, what the set must be), never on the
// runtime; the protocol underneath is redundancy/exchange/set_rebuild.hpp.
//
//   1. share_set: the first survivor reads the set record and every member learns it (and the code).
//   2. the caller sets up this member's buffers: survivor_buffers (its stream and redundancy file),
//      staging_buffers (fresh memory), claim_slot (a cache slot of its own), or its own memory (a lost
//      rank's regions, with a LandingVerifier);
//   3. SetRebuild::exchange: the set rebuilds its lost members' streams (and redundancy data);
//   4. a lost member writes the version back: write_back (copied from staging memory) or, where it landed
//      in a claimed slot, record_rebuilt.
#pragma once

#include <mpi.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "base/stream_reader.hpp"
#include "cache/cache_store.hpp"
#include "redundancy/exchange/set_rebuild.hpp"

namespace cairn::restore {

// The largest piece in which a lost member's data lands in exchange_data, so that a piece is still in the
// CPU cache when it is copied into place: on the machine of docs/performance.md ("The L2 restart: landing
// in the cache") 2 MiB beat 4 MiB (the exchange_chunk default) and 1 MiB, whose messages cost more than
// they saved.
inline constexpr uint64_t kLandingPiece = uint64_t{2} << 20;

// What a set rebuild needs of the job, and nothing more.
struct SetRebuildJob {
  MPI_Comm comm = MPI_COMM_NULL;  // the set's members, rank = member index
  int my_member = 0;              // this process's member index
  std::vector<bool> lost;         // per member: its copy of the version is gone; at least one is not
  uint64_t version = 0;
  uint64_t exchange_chunk = 4 << 20;  // the exchange unit (exchange_chunk knob)
  // What the set must be (a restart on the same rank count: scheme, parity, members); none: whatever the
  // record says (the reshaping restart, whose sets are the old job's).
  std::optional<redundancy::SetExpectation> expect;

  bool i_lost() const { return lost[static_cast<size_t>(my_member)]; }
  int first_survivor() const;
};

// Per member of `members` (job ranks, member order): lost where survives(rank) is false.
std::vector<bool> lost_members(const std::vector<int>& members, const std::function<bool(int)>& survives);

// A set whose record every member learnt: what its members need to exchange and write back.
struct SetRebuild {
  SetRebuildJob job;
  redundancy::SetRebuildPlan plan;  // every member's stream length, this member's manifest, the record
  redundancy::SetCode code;         // made from the record

  // Collective over job.comm: redundancy::rebuild_members with this set's values (arguments as there).
  Status exchange(const Status& ready, uint8_t* data, uint8_t* red, const std::string& what, bool verify_lost = true,
                  redundancy::RebuildPart part = redundancy::RebuildPart::all, bool gentle = false) const;

  // The lost members' data only (RebuildPart::data), in pieces of at most kLandingPiece on every member.
  // On a lost member with `landing` (its manifest's verifier over `data`), each piece is received into a
  // buffer of the exchange's, which stays in the CPU cache, and placed into `data` from there, verified as
  // it is copied (LandingVerifier::place; its result() is the caller's to read); without it the data is
  // received straight into `data` (staging memory the caller verifies as it copies it out).
  Status exchange_data(const Status& ready, uint8_t* data, uint8_t* red, bool gentle, LandingVerifier* landing) const;

  // The write-back, after a whole exchange, on a lost member, into `cache` slot `slot` (no version of the
  // pipeline holds it). claim_slot first (before the exchange, to rebuild into the slot itself): forgets
  // version job.version and every version whose record names `slot` or cannot be read, and maps the slot
  // and its redundancy twin for plan.mine.total_size and plan.redundancy_len bytes (*data, *red: the
  // cache's mappings). record_rebuilt last: the record, the set record and the protected marker, the
  // files a checkpoint leaves. write_back: claim_slot, the bytes copied in from `data` and `red`
  // (plan.redundancy_len bytes), record_rebuilt. Thread-safe as CacheStore is (per slot).
  Status claim_slot(CacheStore& cache, int slot, uint8_t** data, uint8_t** red) const;
  Status record_rebuilt(CacheStore& cache, int slot) const;
  Status write_back(CacheStore& cache, int slot, const uint8_t* data, const uint8_t* red) const;
};

// Collective over job.comm. `read_record` is called on the first survivor only (the set record's bytes);
// its failure is that member's error and fails every other member too (nothing is shared). Then as
// redundancy::share_set_record, and the set's code made from the record. ERR_MPI before anything else.
Result<SetRebuild> share_set(SetRebuildJob job, const std::function<Result<std::string>()>& read_record);

// This member's buffers for an exchange, and the memory or mappings they live in.
struct SetBuffers {
  std::optional<MappedFile> data_file, red_file;
  uint8_t* data = nullptr;
  uint8_t* red = nullptr;
};

// How survivor_buffers maps a survivor's files: populated now (MAP_POPULATE), or faulted in as the
// exchange reads them; or populated where the file system hands out huge pages (map_to_read of the
// file's st_blksize): there a few faults of the survivor's own cost less than the lost member's transfer
// taking them one by one, while on 4 KiB pages populating a whole file before the exchange starts costs
// more than it saves (docs/performance.md, "The L2 restart's bound, measured").
enum class Populate { no, yes, where_huge_pages };
// A survivor's: its stream, `stream` where the caller holds it already (verified), else its slot file
// mapped read-only and checked to hold `total` bytes; its redundancy file mapped read-only and checked to
// hold `red_len` bytes (the exchange only reads a survivor's buffers).
Status survivor_buffers(const std::string& slot_path, const std::string& red_path, uint64_t total, size_t red_len,
                        Populate populate, SetBuffers* out, const uint8_t* stream = nullptr);
// A lost member's staging memory: `total` bytes of stream, `red_len` of redundancy data (none when 0: a
// rebuild of the data only). populate: the data's pages faulted in now (MappedFile::anonymous).
Status staging_buffers(uint64_t total, size_t red_len, SetBuffers* out, bool populate = false);

}  // namespace cairn::restore
