#include "base/launch_env.hpp"

#include <cstdlib>
#include <cstring>

namespace cairn {

LaunchedTasks launched_tasks(const EnvLookup& env) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* value = env(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    long n = strtol(value, &end, 10);
    if (*end != '\0' || n <= 0 || n > 1 << 24) continue;
    return LaunchedTasks{static_cast<int>(n), std::string(name) + "=" + value};
  }
  return LaunchedTasks{};
}

std::string singleton_mismatch(int world_size, const LaunchedTasks& launched) {
  if (world_size != 1 || launched.tasks <= 1) return std::string();
  return "MPI_COMM_WORLD has 1 process, but the launcher started " + std::to_string(launched.tasks) + " (" +
         launched.source +
         "): the MPI library did not connect to the launcher, so every task runs alone and they would all "
         "write this prefix's checkpoints over each other. Launch with the process manager this MPI library "
         "speaks: under srun, MPICH needs --mpi=pmi2 and Open MPI --mpi=pmix (with cairn run: "
         "CAIRN_SRUN_ARGS=--mpi=pmi2); or use the mpirun/mpiexec of the MPI library the program was built with";
}

}  // namespace cairn
