// A job's L2 sets over MPI: where every rank runs, gathered; the sets placed from it (place_sets,
// redundancy/placement.hpp); this rank's set communicator split off; the code of its set made. The
// runtime calls it each time it takes a communicator (cairn_init, cairn_redistribute).
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "base/redundancy_scheme.hpp"
#include "base/status.hpp"
#include "redundancy/placement.hpp"
#include "redundancy/set_code.hpp"

namespace cairn::redundancy {

struct JobSets {
  std::vector<std::string> node_of_rank;  // every rank's failure group (its `node`)
  SetPlacement placement;
  MPI_Comm set_comm = MPI_COMM_NULL;      // this rank's set (rank = member); the caller frees it
  std::optional<SetCode> code;            // this rank's set's code, when L2 is on
};

// Collective over `comm` (node names gathered, the code's failure agreed) and `split_from` (the set
// communicator is split from it: the communicator of the pipeline's agreements). `node`: this rank's
// failure group; scheme, set_size and rs_parity: the redundancy knobs, the same on every rank. Rank 0
// logs place_sets's warnings. Fills `out` as far as it got; ERR_MPI, or the code's error on every rank.
Status place_job_sets(MPI_Comm comm, MPI_Comm split_from, const std::string& node, Redundancy scheme, int set_size,
                      int rs_parity, JobSets* out);

}  // namespace cairn::redundancy
