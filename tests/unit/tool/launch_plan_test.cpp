// `cairn run`'s launch plan (tools/cairn/launch/launch_plan.cpp, launcher.cpp): placement, the mpirun and srun
// command lines, srun's --multi-prog file, and the choice of launcher from the options and environment.
#include "launch/launch_plan.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "base/fsutil.hpp"
#include "launch/launcher.hpp"

namespace cairn::tool {
namespace {

using Words = std::vector<std::string>;

LaunchSpec spec_5_ranks_2_nodes() {
  LaunchSpec s;
  s.mpirun = "/usr/bin/mpirun";
  s.mpirun_args = {"--oversubscribe"};
  s.srun = "/usr/bin/srun";
  s.srun_args = srun_options({});
  s.multi_prog_file = "/p/.cairn/srun-multi-prog.conf";
  s.ranks_per_node = ranks_per_node(5, 2);
  s.node_names = {"node0", "node1"};
  s.command = {"./app", "a b"};
  s.job_env = {{"CAIRN_CONFIG", "/p/job.toml"}};
  s.inject_nodes = {1};
  s.inject_env = {{"CAIRN_INJECT", "checkpoint:5"}, {"CAIRN_INJECT_DIR", "/p/.cairn/inject"}};
  return s;
}

TEST(LaunchPlan, RanksSpreadInContiguousBlocks) {
  EXPECT_EQ(ranks_per_node(8, 4), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(ranks_per_node(5, 2), (std::vector<int>{3, 2}));
  EXPECT_EQ(ranks_of_node({3, 2}, 1), (std::vector<int>{3, 4}));
}

TEST(LaunchPlan, MpirunOneAppContextPerNode) {
  LaunchSpec s = spec_5_ranks_2_nodes();
  EXPECT_EQ(mpirun_argv(s, false),
            (Words{"/usr/bin/mpirun", "--oversubscribe", "-np", "3", "env", "CAIRN_NODE=node0", "CAIRN_CONFIG=/p/job.toml",
                   "./app", "a b", ":", "-np", "2", "env", "CAIRN_NODE=node1", "CAIRN_CONFIG=/p/job.toml", "./app", "a b"}));
  Words with = mpirun_argv(s, true);
  EXPECT_EQ(std::count(with.begin(), with.end(), "CAIRN_INJECT=checkpoint:5"), 1);  // node1 only
  EXPECT_EQ(with[with.size() - 4], "CAIRN_INJECT=checkpoint:5");
}

// mpirun ends the other ranks at once after a failure, unless the user chose the grace.
TEST(LaunchPlan, MpirunEnvEndsTheRanksAtOnceUnlessTheUserSetTheGrace) {
  LaunchSpec s = spec_5_ranks_2_nodes();
  const EnvAssignments none, now{{"OMPI_MCA_odls_base_sigkill_timeout", "0"}};
  EXPECT_EQ(mpirun_env(s, nullptr), now);
  EXPECT_EQ(mpirun_env(s, ""), now);
  EXPECT_EQ(mpirun_env(s, "5"), none);
  s.mpirun_args = {"--oversubscribe", "--mca", "odls_base_sigkill_timeout", "3"};
  EXPECT_EQ(mpirun_env(s, nullptr), none);
  s.mpirun_args = {"--oversubscribe"};
  s.launcher = LauncherKind::srun;
  EXPECT_EQ(mpirun_env(s, nullptr), none);
}

TEST(LaunchPlan, SrunOptionsAddWhatCairnNeedsUnlessGiven) {
  EXPECT_EQ(srun_options({}), (Words{"--mpi=pmix", "--kill-on-bad-exit=1", "--quit-on-interrupt"}));
  EXPECT_EQ(srun_options({"--mpi=pmi2", "--overcommit"}),
            (Words{"--kill-on-bad-exit=1", "--quit-on-interrupt", "--mpi=pmi2", "--overcommit"}));
  EXPECT_EQ(srun_options({"--mpi", "none", "-K0", "-q"}), (Words{"--mpi", "none", "-K0", "-q"}));
  EXPECT_EQ(srun_options({"--kill-on-bad-exit=0", "--quit-on-interrupt"}),
            (Words{"--mpi=pmix", "--kill-on-bad-exit=0", "--quit-on-interrupt"}));
}

TEST(LaunchPlan, SrunArgvNamesTheRanksAndTheFile) {
  LaunchSpec s = spec_5_ranks_2_nodes();
  EXPECT_EQ(srun_argv(s), (Words{"/usr/bin/srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--quit-on-interrupt", "-n",
                                 "5", "--multi-prog", "/p/.cairn/srun-multi-prog.conf"}));
  s.ranks_per_node = {3, 0};  // node1 lost without a spare: 3 ranks
  EXPECT_EQ(srun_argv(s)[5], "3");
}

TEST(LaunchPlan, MultiProgLinePerNodeWithItsRankRange) {
  LaunchSpec s = spec_5_ranks_2_nodes();
  auto text = multi_prog_text(s, true);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_NE(text->find("\n0-2 env CAIRN_NODE=node0 CAIRN_CONFIG=/p/job.toml ./app 'a b'\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("\n3-4 env CAIRN_NODE=node1 CAIRN_CONFIG=/p/job.toml CAIRN_INJECT=checkpoint:5 "
                       "CAIRN_INJECT_DIR=/p/.cairn/inject ./app 'a b'\n"),
            std::string::npos)
      << *text;
  EXPECT_EQ(text->find("CAIRN_INJECT", text->find("node0")), text->find("CAIRN_INJECT", text->find("node1")));

  // A spare in place of node0; one rank per node; a node lost without a spare: ranks renumbered.
  s.node_names = {"node4", "node1", "node2"};
  s.ranks_per_node = {1, 0, 2};
  text = multi_prog_text(s, false);
  ASSERT_TRUE(text.is_ok());
  EXPECT_NE(text->find("\n0 env CAIRN_NODE=node4 "), std::string::npos) << *text;
  EXPECT_NE(text->find("\n1-2 env CAIRN_NODE=node2 "), std::string::npos) << *text;
  EXPECT_EQ(text->find("node1"), std::string::npos) << *text;
}

TEST(LaunchPlan, SpreadRanksRunOneByOneOnOtherNodes) {
  // --no-spare=oversubscribe: node1's ranks 3 and 4 keep their numbers and run on node0 and node2.
  LaunchSpec s = spec_5_ranks_2_nodes();
  s.ranks_per_node = {3, 2, 1};
  s.node_names = {"node0", "node1", "node2"};
  s.spread = {{}, {"node0", "node2"}, {}};
  Words argv = mpirun_argv(s, false);
  Words nodes;
  Words counts;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i].rfind("CAIRN_NODE=", 0) == 0) nodes.push_back(argv[i].substr(11));
    if (argv[i] == "-np") counts.push_back(argv[i + 1]);
  }
  EXPECT_EQ(nodes, (Words{"node0", "node0", "node2", "node2"}));
  EXPECT_EQ(counts, (Words{"3", "1", "1", "1"}));
  auto text = multi_prog_text(s, false);
  ASSERT_TRUE(text.is_ok());
  EXPECT_NE(text->find("\n3 env CAIRN_NODE=node0 "), std::string::npos) << *text;
  EXPECT_NE(text->find("\n4 env CAIRN_NODE=node2 "), std::string::npos) << *text;
  EXPECT_NE(text->find("\n5 env CAIRN_NODE=node2 "), std::string::npos) << *text;
  EXPECT_EQ(text->find("node1"), std::string::npos) << *text;
  EXPECT_EQ(srun_argv(s)[5], "6");
}

TEST(LaunchPlan, MultiProgQuotesForSrunsParser) {
  EXPECT_EQ(multi_prog_quote("--n"), "--n");
  EXPECT_EQ(multi_prog_quote("/a/b-c_d.e:1,2=x+y@z"), "/a/b-c_d.e:1,2=x+y@z");
  EXPECT_EQ(multi_prog_quote(""), "''");
  EXPECT_EQ(multi_prog_quote("a b"), "'a b'");
  EXPECT_EQ(multi_prog_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(multi_prog_quote("50%t"), "'50%t'");  // srun would substitute %t outside quotes
  EXPECT_EQ(multi_prog_quote("$HOME \"x\""), "'$HOME \"x\"'");

  LaunchSpec s = spec_5_ranks_2_nodes();
  s.command = {"./app", "two\nlines"};
  auto text = multi_prog_text(s, false);
  ASSERT_FALSE(text.is_ok());
  EXPECT_NE(text.status().message().find("line break"), std::string::npos) << text.status().message();
}

TEST(LaunchPlan, LaunchArgvWritesTheMultiProgFile) {
  char dir[] = "/tmp/cairn-launch-plan-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  LaunchSpec s = spec_5_ranks_2_nodes();
  s.launcher = LauncherKind::srun;
  s.multi_prog_file = std::string(dir) + "/.cairn/srun-multi-prog.conf";
  auto argv = launch_argv(s, true);
  ASSERT_TRUE(argv.is_ok()) << argv.status().message();
  EXPECT_EQ(argv->back(), s.multi_prog_file);
  auto written = fs::read_file(s.multi_prog_file);
  ASSERT_TRUE(written.is_ok());
  EXPECT_EQ(*written, *multi_prog_text(s, true));

  s.launcher = LauncherKind::mpirun;
  argv = launch_argv(s, false);
  ASSERT_TRUE(argv.is_ok());
  EXPECT_EQ(*argv, mpirun_argv(s, false));
  EXPECT_TRUE(fs::remove_tree(dir).is_ok());
}

TEST(LaunchPlan, ChoosingTheLauncher) {
  auto c = choose_launcher("auto", "", "", "/usr/bin/srun", "");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->kind, LauncherKind::mpirun);
  EXPECT_EQ(c->reason, "auto: not inside a Slurm allocation (SLURM_JOB_ID is not set)");

  c = choose_launcher("auto", "", "42", "/usr/bin/srun", "");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->kind, LauncherKind::srun);
  EXPECT_EQ(c->reason, "auto: inside Slurm allocation 42");

  c = choose_launcher("auto", "", "42", "", "not in PATH; set CAIRN_SRUN to it");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->kind, LauncherKind::mpirun);
  EXPECT_NE(c->reason.find("srun was not found (not in PATH"), std::string::npos) << c->reason;

  c = choose_launcher("mpirun", "--launcher ", "42", "/usr/bin/srun", "");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->kind, LauncherKind::mpirun);
  EXPECT_EQ(c->reason, "--launcher mpirun");

  c = choose_launcher("srun", "CAIRN_LAUNCHER=", "7", "/usr/bin/srun", "");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->kind, LauncherKind::srun);

  c = choose_launcher("srun", "--launcher ", "", "/usr/bin/srun", "");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), Code::ERR_INVALID_ARG);
  EXPECT_NE(c.status().message().find("--launcher srun: not inside a Slurm allocation (SLURM_JOB_ID is not set)"),
            std::string::npos)
      << c.status().message();

  c = choose_launcher("srun", "--launcher ", "7", "", "CAIRN_SRUN=/x is not an executable");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("srun not found (CAIRN_SRUN=/x is not an executable)"), std::string::npos);

  c = choose_launcher("slurm", "CAIRN_LAUNCHER=", "", "", "");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("CAIRN_LAUNCHER=slurm: unknown launcher; use auto, mpirun or srun"),
            std::string::npos);
}

// resolve_launcher() reads the environment: each case sets exactly the variables it needs and puts
// back what was there.
class ResolveLauncher : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      const char* v = getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
    char tmpl[] = "/tmp/cairn-resolve-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Executables standing in for srun and mpirun: only looked up, never run.
    for (const char* name : {"srun", "mpirun"}) {
      std::ofstream(dir_ + "/" + name) << "#!/bin/sh\nexit 1\n";
      ASSERT_EQ(chmod((dir_ + "/" + name).c_str(), 0755), 0);
    }
    setenv("PATH", dir_.c_str(), 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_)
      value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
    EXPECT_TRUE(fs::remove_tree(dir_).is_ok());
  }
  static constexpr const char* kNames[] = {"PATH", "SLURM_JOB_ID", "CAIRN_LAUNCHER", "CAIRN_SRUN", "CAIRN_SRUN_ARGS",
                                           "CAIRN_MPIRUN", "CAIRN_MPIRUN_ARGS"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
  std::string dir_;
};

TEST_F(ResolveLauncher, AutoOutsideAnAllocationIsMpirun) {
  setenv("CAIRN_MPIRUN_ARGS", "--oversubscribe", 1);
  LaunchSpec s;
  auto why = resolve_launcher("", &s);
  ASSERT_TRUE(why.is_ok()) << why.status().message();
  EXPECT_EQ(s.launcher, LauncherKind::mpirun);
  EXPECT_EQ(s.mpirun, dir_ + "/mpirun");
  EXPECT_EQ(s.mpirun_args, (Words{"--oversubscribe"}));
  EXPECT_EQ(*why, "auto: not inside a Slurm allocation (SLURM_JOB_ID is not set)");
}

TEST_F(ResolveLauncher, AutoInsideAnAllocationIsSrunWithItsArgs) {
  setenv("SLURM_JOB_ID", "31", 1);
  setenv("CAIRN_SRUN_ARGS", " --mpi=pmi2   --overcommit ", 1);
  LaunchSpec s;
  auto why = resolve_launcher("", &s);
  ASSERT_TRUE(why.is_ok()) << why.status().message();
  EXPECT_EQ(s.launcher, LauncherKind::srun);
  EXPECT_EQ(s.srun, dir_ + "/srun");
  EXPECT_EQ(s.srun_args, (Words{"--kill-on-bad-exit=1", "--quit-on-interrupt", "--mpi=pmi2", "--overcommit"}));
  EXPECT_EQ(*why, "auto: inside Slurm allocation 31");
}

TEST_F(ResolveLauncher, OptionBeatsVariable) {
  setenv("SLURM_JOB_ID", "31", 1);
  setenv("CAIRN_LAUNCHER", "srun", 1);
  LaunchSpec s;
  auto why = resolve_launcher("mpirun", &s);
  ASSERT_TRUE(why.is_ok());
  EXPECT_EQ(s.launcher, LauncherKind::mpirun);
  EXPECT_EQ(*why, "--launcher mpirun");
  why = resolve_launcher("", &s);
  ASSERT_TRUE(why.is_ok());
  EXPECT_EQ(s.launcher, LauncherKind::srun);
  EXPECT_EQ(*why, "CAIRN_LAUNCHER=srun, in Slurm allocation 31");
}

TEST_F(ResolveLauncher, SrunOutsideAnAllocationOrMissingIsAnError) {
  LaunchSpec s;
  auto why = resolve_launcher("srun", &s);
  ASSERT_FALSE(why.is_ok());
  EXPECT_NE(why.status().message().find("not inside a Slurm allocation"), std::string::npos);
  setenv("SLURM_JOB_ID", "31", 1);
  setenv("CAIRN_SRUN", (dir_ + "/no-srun").c_str(), 1);
  why = resolve_launcher("srun", &s);
  ASSERT_FALSE(why.is_ok());
  EXPECT_EQ(why.status().message(),
            "--launcher srun: srun not found (CAIRN_SRUN=" + dir_ + "/no-srun is not an executable)");
  // auto falls back to mpirun, and says why.
  why = resolve_launcher("", &s);
  ASSERT_TRUE(why.is_ok());
  EXPECT_EQ(s.launcher, LauncherKind::mpirun);
  EXPECT_NE(why->find("srun was not found"), std::string::npos) << *why;
}

TEST_F(ResolveLauncher, MpirunMissingIsAnError) {
  setenv("CAIRN_MPIRUN", (dir_ + "/no-mpirun").c_str(), 1);
  LaunchSpec s;
  auto why = resolve_launcher("", &s);
  ASSERT_FALSE(why.is_ok());
  EXPECT_EQ(why.status().message(), "MPI launcher not found: " + dir_ + "/no-mpirun (from CAIRN_MPIRUN)");
}

}  // namespace
}  // namespace cairn::tool
