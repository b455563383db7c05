// L2 behind a narrow interface: protect one version of this rank within its redundancy set (the set's
// members exchange and encode; the redundancy data and the set record land in this rank's cache). The MPI
// implementation is redundancy/exchange/set_protector. Whether the version then counts as protected is the
// pipeline's decision, agreed by every rank (the marker is written only then).
//
// In two calls, so that the bytes travel while the worker still hashes them (pipeline/version.hpp):
// exchange() once the slot's bytes are final, before the version is sealed and before agree_local; then,
// only for a version whole on every rank, protect(). Both on the team's thread, for one version at a time,
// in version order.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.hpp"
#include "pipeline/version.hpp"

namespace cairn::pipeline {

class Protector {
 public:
  virtual ~Protector() = default;
  virtual const char* scheme() const = 0;  // "partner", "xor", "rs"
  // Collective within the set: the part of L2 that needs the slot's bytes but not their hashes (the data
  // exchange and encode). landed: this rank's snapshot outcome (the slot holds v's bytes only if it is
  // ok); a member that has not landed makes its whole set skip the work. The version may still be
  // discarded afterwards, so nothing written here may make it count: no set record, no marker, nothing
  // outside v's own slot's redundancy data (the newest protected version lives in another slot). Returns
  // ERR_MPI when the exchange itself broke (the pipeline then stops agreeing); any other failure is kept
  // for protect() to return. The default does nothing ahead.
  virtual Status exchange(const Version& v, const Status& landed) {
    (void)v;
    (void)landed;
    return Status::ok();
  }
  // Collective within the set, for a sealed version whole on every rank: what is left of L2 (with the
  // exchange above: the set record, every member's manifest with its chunk hashes; a version whose
  // exchange did not run is exchanged here first). The local outcome; ERR_MPI as above.
  // *redundancy_bytes: this rank's redundancy data.
  virtual Status protect(const Version& v, uint64_t* redundancy_bytes) = 0;
  // For the version's summary line: what the last exchange left out, if anything ("" when it encoded all).
  virtual std::string exchange_note() const { return ""; }
  // The bytes this rank sent in the last exchange, and those a full exchange would have had it send (an
  // exchange of the changes only sends fewer); both 0 where the protector does not count them.
  struct Sent {
    uint64_t sent = 0, full = 0;
  };
  virtual Sent sent_bytes() const { return {}; }
};

}  // namespace cairn::pipeline
