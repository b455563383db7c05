// The job environment the runtime-level MPI tests run in (tests/unit/mpi/*_test.cpp): a fresh
// directory per test and the CAIRN_* variables that put a job's prefix and cache in it; and the check
// that something holds on every rank.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "base/fsutil.hpp"

namespace cairn::test {

// /tmp/cairn-<tag>-<rank 0's pid>-<n>, made anew by rank 0 (every rank waits), and the environment of
// job `job` in it: one simulated node per rank, 64 KiB chunks, redundancy single, every version
// flushed to L3, no flush at finalize, the log at errors only unless CAIRN_LOG is set. Collective.
inline std::string start_scratch_job(const char* tag, const char* job, int n) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long id = rank == 0 ? static_cast<long>(getpid()) : 0;
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  std::string root = std::string("/tmp/cairn-") + tag + "-" + std::to_string(id) + "-" + std::to_string(n);
  if (rank == 0) {
    fs::remove_tree(root).ignore();
    EXPECT_TRUE(fs::make_dirs(root).is_ok()) << root;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  setenv("CAIRN_PREFIX", (root + "/prefix").c_str(), 1);
  setenv("CAIRN_CACHE_DIR", (root + "/cache").c_str(), 1);
  setenv("CAIRN_JOB", job, 1);
  setenv("CAIRN_NODE", ("node" + std::to_string(rank)).c_str(), 1);
  setenv("CAIRN_CHUNK_SIZE", "64K", 1);
  setenv("CAIRN_FLUSH_ON_FINALIZE", "false", 1);
  setenv("CAIRN_LOG", "error", 0);  // CAIRN_LOG=info shows which restart path ran
  setenv("CAIRN_REDUNDANCY", "single", 1);
  setenv("CAIRN_FLUSH_EVERY", "1", 1);
  return root;
}

// Whether `ok` holds on every rank of the world. Collective.
inline bool everywhere(bool ok) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v == 1;
}

// After every rank is through with it: rank 0 removes the directory. Collective.
inline void end_scratch_job(const std::string& root) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove_tree(root).ignore();
}

}  // namespace cairn::test
