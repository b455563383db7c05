// Which program starts the ranks of `cairn run`: mpirun, or srun inside a Slurm allocation. Reads the
// environment (CAIRN_LAUNCHER, SLURM_JOB_ID, CAIRN_MPIRUN[_ARGS], CAIRN_SRUN[_ARGS]) and PATH; the
// decision itself is choose_launcher() in launch_plan.hpp.
#pragma once

#include <string>

#include "base/status.hpp"
#include "launch/launch_plan.hpp"

namespace cairn::tool {

// Fills spec->launcher, and spec->mpirun/mpirun_args or spec->srun/srun_args (the caller sets
// spec->multi_prog_file). `option` is --launcher's value, empty when not given: then CAIRN_LAUNCHER,
// else auto. Returns why that launcher was chosen (for the log);
// an error when the choice is impossible or the launcher is not found.
Result<std::string> resolve_launcher(const std::string& option, LaunchSpec* spec);

}  // namespace cairn::tool
