// `cairn run`'s cluster mode, its pure parts (tools/cairn/launch/cluster_hosts.cpp, launch_plan.cpp): Slurm's
// host lists, Open MPI's hostfiles and --host, Slurm node states, and the srun and mpirun command lines
// that put every rank on its host.
#include "launch/cluster_hosts.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "launch/launch_plan.hpp"

namespace cairn::tool {
namespace {

using Words = std::vector<std::string>;

TEST(ClusterHosts, ExpandsSlurmHostLists) {
  EXPECT_EQ(*expand_hostlist("n[1-4]"), (Words{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(*expand_hostlist("n[1-2,7],gpu[08-10],login"), (Words{"n1", "n2", "n7", "gpu08", "gpu09", "gpu10", "login"}));
  EXPECT_EQ(*expand_hostlist("r[1-2]n[1-2]"), (Words{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(*expand_hostlist("single"), (Words{"single"}));
  EXPECT_EQ(*expand_hostlist("a,b c"), (Words{"a", "b", "c"}));
  EXPECT_EQ(*expand_hostlist("n[009-011]"), (Words{"n009", "n010", "n011"}));
}

TEST(ClusterHosts, RefusesBrokenHostLists) {
  for (const char* bad : {"n[1-3", "n1-3]", "n[3-1]", "n[]", "n[a-b]", "n[1-200000]"}) {
    auto r = expand_hostlist(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) EXPECT_NE(r.status().message().find("host list"), std::string::npos) << r.status().message();
  }
}

TEST(ClusterHosts, ReadsHostfilesAndHostOptions) {
  char path[] = "/tmp/cairn-hostfile-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "# the hosts\nh1 slots=4\n\nh2 slots=4 max_slots=8  # second\nh1\n";
  EXPECT_EQ(*read_hostfile(path), (Words{"h1", "h2"}));
  EXPECT_EQ(*mpirun_hosts({"--oversubscribe", "--hostfile", path}), (Words{"h1", "h2"}));
  EXPECT_EQ(*mpirun_hosts({std::string("--machinefile=") + path}), (Words{"h1", "h2"}));
  EXPECT_EQ(*mpirun_hosts({"-H", "a:2,b:2,a"}), (Words{"a", "b"}));
  EXPECT_TRUE(mpirun_hosts({"--oversubscribe"})->empty());
  std::ofstream(path) << "# nothing\n";
  EXPECT_FALSE(read_hostfile(path));
  unlink(path);
  EXPECT_FALSE(read_hostfile(path));
}

TEST(ClusterHosts, SlurmStatesThatMeanDown) {
  for (const char* up : {"idle", "mixed", "allocated", "completing", "idle~", "mixed-"})
    EXPECT_FALSE(slurm_state_is_down(up)) << up;
  for (const char* down : {"down", "down*", "idle*", "allocated*", "drained", "draining", "fail", "failing",
                           "future", "unknown", "", "mixed*", "powered_down"})
    EXPECT_TRUE(slurm_state_is_down(down)) << down;
}

LaunchSpec two_hosts() {
  LaunchSpec s;
  s.launcher = LauncherKind::srun;
  s.mpirun = "/usr/bin/mpirun";
  s.srun = "/usr/bin/srun";
  s.srun_args = srun_options({});
  s.multi_prog_file = "/p/.cairn/srun-multi-prog.conf";
  s.host_file = "/p/.cairn/srun-hosts";
  s.real_hosts = true;
  s.ranks_per_node = {2, 3};
  s.node_names = {"n1", "n5"};
  s.command = {"./app"};
  return s;
}

TEST(ClusterHosts, SrunPutsEveryRankOnItsHost) {
  LaunchSpec s = two_hosts();
  EXPECT_EQ(host_file_text(s), "n1\nn1\nn5\nn5\nn5\n");
  EXPECT_EQ(srun_argv(s), (Words{"/usr/bin/srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--quit-on-interrupt", "-n", "5",
                                 "-m", "arbitrary", "-w", "/p/.cairn/srun-hosts", "--multi-prog",
                                 "/p/.cairn/srun-multi-prog.conf"}));
  s.exclude = {"n2", "n3"};
  auto argv = srun_argv(s);
  const Words exclude{"-x", "n2,n3"};
  EXPECT_NE(std::search(argv.begin(), argv.end(), exclude.begin(), exclude.end()), argv.end());
  // No CAIRN_NODE: the library names the host itself, so the failure groups are the hosts.
  EXPECT_EQ(*multi_prog_text(s, false),
            "# srun --multi-prog file written by `cairn run` for this attempt: ranks, then the words.\n"
            "0-1 env ./app\n2-4 env ./app\n");
  s.ranks_per_node = {2, 0};  // a host lost without a spare (--no-spare=shrink)
  EXPECT_EQ(host_file_text(s), "n1\nn1\n");
}

TEST(ClusterHosts, RshAgentFromMpirunWordsOrEnvironment) {
  using Agents = std::vector<Words>;
  EXPECT_EQ(rsh_agents({}, nullptr), (Agents{{"ssh"}, {"rsh"}}));  // Open MPI's default
  EXPECT_EQ(rsh_agents({}, ""), (Agents{{"ssh"}, {"rsh"}}));
  EXPECT_EQ(rsh_agents({"--hostfile", "hf"}, "/s/cluster-rsh.sh /tmp/c"), (Agents{{"/s/cluster-rsh.sh", "/tmp/c"}}));
  // mpirun's words win over the environment, the last one given wins; the synonym counts too.
  EXPECT_EQ(rsh_agents({"--mca", "plm_rsh_agent", "a", "-mca", "orte_rsh_agent", "b:c"}, "env"), (Agents{{"b"}, {"c"}}));
  EXPECT_EQ(rsh_agents({"--mca", "btl", "tcp,self"}, nullptr), (Agents{{"ssh"}, {"rsh"}}));
}

TEST(ClusterHosts, MpirunPutsEveryContextOnItsHost) {
  LaunchSpec s = two_hosts();
  s.launcher = LauncherKind::mpirun;
  EXPECT_EQ(mpirun_argv(s, false), (Words{"/usr/bin/mpirun", "-np", "2", "--host", "n1:2", "env", "./app", ":", "-np", "3",
                                          "--host", "n5:3", "env", "./app"}));
}

// A relaunch's own srun refused by Slurm for the whole allocation (a failed attempt's step left
// completing) is told from srun's exit status and the end of its stderr, as the probes' refusals are.
TEST(ClusterHosts, TellsAStepSlurmRefusedFromSrunsEnd) {
  const std::string refused =
      "some output of the job\nsrun: error: Unable to create step for job 42: Job/step already completing or "
      "completed\n";
  const int failed = 1 << 8, killed = SIGKILL, ok = 0;
  EXPECT_EQ(classify_step_end(failed, refused), StepEnd::refused);
  EXPECT_EQ(refusal_line(refused), "srun: error: Unable to create step for job 42: Job/step already completing or completed");
  EXPECT_EQ(classify_step_end(killed, refused), StepEnd::refused);
  // srun succeeded: whatever its stderr says, the step ran.
  EXPECT_EQ(classify_step_end(ok, refused), StepEnd::ended);
  // Another failure (a lost host, the application's own error) is not a refusal.
  const std::string lost = "srun: error: n2: task 3: Killed\nsrun: Terminating StepId=42.0\n";
  EXPECT_EQ(classify_step_end(failed, lost), StepEnd::ended);
  EXPECT_EQ(refusal_line(lost), "");
  EXPECT_EQ(classify_step_end(failed, ""), StepEnd::ended);
  EXPECT_EQ(refusal_line("already completing or completed"), "already completing or completed");
}

// The tail kept of srun's stderr is its last bytes, however the pieces came.
TEST(ClusterHosts, OutputTailKeepsTheLastBytes) {
  OutputTail t(8);
  t.append("abc", 3);
  EXPECT_EQ(t.text(), "abc");
  t.append("defgh", 5);
  EXPECT_EQ(t.text(), "abcdefgh");
  t.append("ij", 2);
  EXPECT_EQ(t.text(), "cdefghij");
  t.append("0123456789", 10);
  EXPECT_EQ(t.text(), "23456789");
  // A refusal at the end of a long output is still seen.
  OutputTail srun;
  std::string job_output(100000, 'x');
  srun.append(job_output.data(), job_output.size());
  const std::string last = "\nsrun: error: Unable to create step for job 7: Job/step already completing or completed\n";
  srun.append(last.data(), last.size());
  EXPECT_EQ(srun.text().size(), 4096u);
  EXPECT_EQ(classify_step_end(1 << 8, srun.text()), StepEnd::refused);
}

}  // namespace
}  // namespace cairn::tool
