// Rebuilding a set's lost members from the set record: the protocol under restore/mpi/set_rebuild.hpp,
// the one set rebuild that a restart on the same rank count (core/restart) and a restart on another rank
// count (redistribute/exec) use.
//
//   1. share_set_record: the first surviving member broadcasts the set record it holds; every member
//      decodes it (the same bytes, so the same outcome everywhere), checks it against what the caller
//      expects, and learns every member's stream length and its own manifest.
//   2. the caller sets up its buffers: a survivor its stream and redundancy data, a lost member room for
//      them (redundancy_len bytes of redundancy).
//   3. rebuild_members: the whole set enters the exchange or none of it does (an agreement on each
//      member's readiness), the lost members' streams and redundancy data are decoded, and every lost
//      member verifies its rebuilt stream against its manifest before anything uses it.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "base/manifest.hpp"
#include "base/status.hpp"
#include "redundancy/exchange/set_exchange.hpp"
#include "redundancy/set_code.hpp"
#include "redundancy/set_record.hpp"

namespace cairn::redundancy {

// What the caller knows the set must be (a restart on the same rank count): the scheme, the parity and
// the members' job ranks in member order. A record that differs is ERR_UNRECOVERABLE.
struct SetExpectation {
  Redundancy scheme = Redundancy::single;
  int m = 0;
  std::vector<int> members;
};

struct SetRebuildPlan {
  SetRecord record;
  std::vector<size_t> lens;   // every member's stream length
  Manifest mine;              // this member's manifest, from the record
  size_t redundancy_len = 1;  // bytes of each member's redundancy data (at least 1)
};

// Collective over `comm` (the set's members, rank = member index). `record_bytes` is read only on
// `first_survivor` (empty there: it could not read its record, and every member fails).
Result<SetRebuildPlan> share_set_record(MPI_Comm comm, int first_survivor, const std::string& record_bytes,
                                        const std::optional<SetExpectation>& expect, uint64_t version);

// Collective over `comm`. `ready`: this member's buffers are set up (else nothing moves, on any member,
// and the first failure is returned everywhere). `data`: this member's stream (a lost member: room for
// plan.lens[my member] bytes); `red`: its redundancy data (plan.redundancy_len bytes). verify_lost: a lost
// member verifies its rebuilt stream here (`what` names it in the error); without it, the caller must
// verify it before use (e.g. while copying it out).
Status rebuild_members(MPI_Comm comm, const SetCode& code, const std::vector<bool>& lost, const SetRebuildPlan& plan,
                       const Status& ready, uint8_t* data, uint8_t* red, size_t exchange_chunk,
                       const std::string& what, bool verify_lost = true, RebuildPart part = RebuildPart::all,
                       bool gentle = false, const Place& place = {});

}  // namespace cairn::redundancy
