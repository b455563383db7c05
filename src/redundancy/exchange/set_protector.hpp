// The pipeline's L2 protector (pipeline/protector.hpp) over MPI: this rank's redundancy set encodes a
// version together (set_exchange), and each member writes its redundancy data and the set record (every
// member's manifest) into its cache.
#pragma once

#include <mpi.h>

#include <vector>

#include "cache/cache_store.hpp"
#include "pipeline/protector.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_code.hpp"

namespace cairn::redundancy {

class SetProtector final : public pipeline::Protector {
 public:
  // set_comm: this rank's set, ranks in member order; members: the job ranks of the set. Borrowed: cache,
  // code (they outlive the protector).
  SetProtector(MPI_Comm set_comm, std::vector<int> members, const SetCode* code, CacheStore* cache,
               uint64_t exchange_chunk)
      : comm_(set_comm), members_(std::move(members)), code_(code), cache_(cache), exchange_chunk_(exchange_chunk) {}
  const char* scheme() const override { return redundancy_name(code_->scheme()); }
  // The members' lengths, then encode_set into v's slot's redundancy data. Remembers its outcome for
  // protect() of the same version.
  Status exchange(const pipeline::Version& v, const Status& landed) override;
  // The members' manifests (with their hashes) gathered into the set record, written to the cache.
  Status protect(const pipeline::Version& v, uint64_t* redundancy_bytes) override;
  std::string exchange_note() const override;
  Sent sent_bytes() const override { return {sent_, full_}; }

 private:
  MPI_Comm comm_;
  std::vector<int> members_;
  const SetCode* code_;
  CacheStore* cache_;
  uint64_t exchange_chunk_;
  // The last exchange: its version (0: none), outcome (the same on every member of the set unless ERR_MPI)
  // and this rank's redundancy bytes.
  uint64_t exchanged_ = 0;
  Status exchange_status_;
  uint64_t red_bytes_ = 0;
  size_t steps_ = 0, skipped_ = 0;  // the last exchange's pipeline steps, and those left out
  uint64_t sent_ = 0, full_ = 0;    // and the bytes this member sent, against those of a full exchange
  uint64_t delta_from_ = 0;         // the version whose parity the last exchange updated (0: none)
  // How the whole set may encode (plan()): only what changed since the version this slot held (its
  // redundancy data is that version's), and a delta update from v's delta base.
  struct Plan {
    bool only = false, delta = false;
  };
  Result<Plan> plan(const pipeline::Version& v, const std::vector<size_t>& lens, uint64_t red_len,
                    ChangedChunks* changed, DeltaBase* base);
};

}  // namespace cairn::redundancy
