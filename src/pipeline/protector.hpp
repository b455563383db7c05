// L2 behind a narrow interface: protect one sealed version of this rank within its redundancy set (the
// set's members exchange and encode; the redundancy data and the set record land in this rank's cache).
// The MPI implementation is pipeline/mpi/set_protector. Whether the version then counts as protected is
// the pipeline's decision, agreed by every rank (the marker is written only then).
#pragma once

#include <cstdint>

#include "base/status.hpp"
#include "pipeline/version.hpp"

namespace cairn::pipeline {

class Protector {
 public:
  virtual ~Protector() = default;
  virtual const char* scheme() const = 0;  // "partner", "xor", "rs"
  // Collective within the set. The local outcome; ERR_MPI when the exchange itself broke (the pipeline
  // then stops agreeing). *redundancy_bytes: this rank's redundancy data.
  virtual Status protect(const Version& v, uint64_t* redundancy_bytes) = 0;
};

}  // namespace cairn::pipeline
