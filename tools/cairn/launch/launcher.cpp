#include "launch/launcher.hpp"

#include <cstdlib>

#include "common.hpp"

namespace cairn::tool {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

}  // namespace

Result<std::string> resolve_launcher(const std::string& option, LaunchSpec* spec) {
  std::string requested = option, from = "--launcher ";
  if (requested.empty()) {
    requested = env_or_empty("CAIRN_LAUNCHER");
    from = "CAIRN_LAUNCHER=";
  }
  if (requested.empty()) requested = "auto", from = "";

  const std::string srun_env = env_or_empty("CAIRN_SRUN");
  const std::string srun_name = srun_env.empty() ? "srun" : srun_env;
  const std::string srun_path = find_executable(srun_name);
  const std::string srun_hint =
      srun_env.empty() ? "not in PATH; set CAIRN_SRUN to it" : "CAIRN_SRUN=" + srun_env + " is not an executable";
  auto choice = choose_launcher(requested, from, env_or_empty("SLURM_JOB_ID"), srun_path, srun_hint);
  if (!choice) return choice.status();
  spec->launcher = choice->kind;

  if (choice->kind == LauncherKind::srun) {
    spec->srun = srun_path;
    spec->srun_args = srun_options(split_whitespace(env_or_empty("CAIRN_SRUN_ARGS")));
  } else {
    const std::string mpirun_env = env_or_empty("CAIRN_MPIRUN");
    const std::string mpirun_name = mpirun_env.empty() ? "mpirun" : mpirun_env;
    spec->mpirun = find_executable(mpirun_name);
    if (spec->mpirun.empty())
      return make_error(Code::ERR_INVALID_ARG, "MPI launcher not found: %s (%s)", mpirun_name.c_str(),
                        mpirun_env.empty() ? "not in PATH; set CAIRN_MPIRUN to it" : "from CAIRN_MPIRUN");
    spec->mpirun_args = split_whitespace(env_or_empty("CAIRN_MPIRUN_ARGS"));
  }
  return choice->reason;
}

}  // namespace cairn::tool
