// base/launch_env.hpp: the launcher's task count from the environment, and the error for a singleton
// among several tasks (an MPI library that did not connect to its launcher).
#include "base/launch_env.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace cairn {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, NothingSaidIsZero) {
  EXPECT_EQ(launched_tasks(env_of({})).tasks, 0);
  EXPECT_EQ(singleton_mismatch(1, launched_tasks(env_of({}))), "");
}

TEST(LaunchEnv, TheMpiLaunchersOwnVariableComesBeforeSlurms) {
  // Open MPI's mpirun inside a Slurm step: the step's tasks are mpirun's daemons, not the ranks.
  auto l = launched_tasks(env_of({{"OMPI_COMM_WORLD_SIZE", "8"}, {"SLURM_STEP_NUM_TASKS", "2"}}));
  EXPECT_EQ(l.tasks, 8);
  EXPECT_EQ(l.source, "OMPI_COMM_WORLD_SIZE=8");
  l = launched_tasks(env_of({{"PMI_SIZE", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}}));
  EXPECT_EQ(l.source, "PMI_SIZE=4");
  l = launched_tasks(env_of({{"SLURM_STEP_NUM_TASKS", "8"}}));
  EXPECT_EQ(l.tasks, 8);
  EXPECT_EQ(l.source, "SLURM_STEP_NUM_TASKS=8");
}

TEST(LaunchEnv, AValueThatIsNoPositiveNumberIsAbsent) {
  for (const char* bad : {"", "0", "-3", "8x", "x", "99999999999"})
    EXPECT_EQ(launched_tasks(env_of({{"SLURM_STEP_NUM_TASKS", bad}})).tasks, 0) << bad;
  EXPECT_EQ(launched_tasks(env_of({{"OMPI_COMM_WORLD_SIZE", "junk"}, {"SLURM_STEP_NUM_TASKS", "3"}})).tasks, 3);
}

TEST(LaunchEnv, OnlyASingletonAmongSeveralTasksIsAnError) {
  LaunchedTasks eight{8, "SLURM_STEP_NUM_TASKS=8"};
  std::string e = singleton_mismatch(1, eight);
  EXPECT_NE(e.find("MPI_COMM_WORLD has 1 process, but the launcher started 8 (SLURM_STEP_NUM_TASKS=8)"),
            std::string::npos) << e;
  EXPECT_NE(e.find("--mpi=pmi2"), std::string::npos) << e;
  EXPECT_EQ(singleton_mismatch(8, eight), "");                   // they agree
  EXPECT_EQ(singleton_mismatch(1, LaunchedTasks{1, "PMI_SIZE=1"}), "");  // a job of one
  EXPECT_EQ(singleton_mismatch(4, eight), "");  // a world smaller than the step: not this check's business
}

}  // namespace
}  // namespace cairn
