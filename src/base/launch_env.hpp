// What the launcher said about the job's size, from the environment it gives every task, for a check at
// cairn_init: an MPI library that did not connect to its launcher (an MPICH program started by srun's
// PMIx plugin, an Open MPI program started by MPICH's mpiexec) runs every task as a singleton. Each one
// then believes it is the whole job, and they all write one prefix's checkpoints, each over the others'.
#pragma once

#include <string>

#include "base/config.hpp"

namespace cairn {

struct LaunchedTasks {
  int tasks = 0;       // 0: the environment says nothing
  std::string source;  // the variable that said it, e.g. "SLURM_STEP_NUM_TASKS=8"
};

// The number of tasks the launcher started in this job step. The MPI launchers' own variables come first
// (Open MPI's OMPI_COMM_WORLD_SIZE, the PMI size of MPICH's hydra and of srun --mpi=pmi2), then srun's
// SLURM_STEP_NUM_TASKS. A value that is not a positive number counts as absent.
LaunchedTasks launched_tasks(const EnvLookup& env);

// The error for a world of one process where `launched` says more were started; empty when they agree.
// Names the variable and says what to do (the launcher's PMI option for this MPI library).
std::string singleton_mismatch(int world_size, const LaunchedTasks& launched);

}  // namespace cairn
