// The data-parallel world read from torchrun's and SLURM's variables, and the errors for bad values.
#include <gtest/gtest.h>

#include <map>

#include "support/fixtures.hpp"
#include "trainer/distributed/world.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

EnvironmentLookup lookup(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(World, NoLauncherIsOneProcess) {
  const World w = world_from_environment(lookup({}));
  EXPECT_FALSE(w.distributed());
  EXPECT_EQ(w.launcher, "none");
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
}

// torchrun with one process (or --nproc-per-node 1) still joins a group: the collectives path on one rank.
// SLURM's single task, or WORLD_SIZE=1 with no master, is one plain process.
TEST(World, OneLaunchedRankJoinsAGroupOnlyUnderTorchrun) {
  EXPECT_TRUE(world_from_environment(lookup({{"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}})).distributed());
  EXPECT_FALSE(world_from_environment(lookup({{"WORLD_SIZE", "1"}})).distributed());
  EXPECT_FALSE(world_from_environment(lookup({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"MASTER_ADDR", "h"}}))
                   .distributed());
}

TEST(World, TorchrunVariables) {
  const World w = world_from_environment(lookup({{"WORLD_SIZE", "8"},
                                                 {"RANK", "5"},
                                                 {"LOCAL_RANK", "1"},
                                                 {"LOCAL_WORLD_SIZE", "4"},
                                                 {"MASTER_ADDR", "node0"},
                                                 {"MASTER_PORT", "29400"},
                                                 {"SLURM_PROCID", "9"}}));
  EXPECT_EQ(w.launcher, "torchrun");  // torchrun's variables win over SLURM's (torchrun inside an allocation)
  EXPECT_EQ(w.size, 8);
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 4);
  EXPECT_EQ(w.master_addr, "node0");
  EXPECT_EQ(w.port, 29400);
  EXPECT_FALSE(w.agent_store);
  const World agent = world_from_environment(lookup({{"WORLD_SIZE", "2"},
                                                     {"MASTER_ADDR", "h"},
                                                     {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                     {"TORCHELASTIC_RESTART_COUNT", "3"}}));
  EXPECT_TRUE(agent.agent_store);
  EXPECT_EQ(agent.restart_count, 3);
}

TEST(World, SlurmVariablesTakeTheMasterFromTheNodeList) {
  const World w = world_from_environment(lookup({{"SLURM_NTASKS", "16"},
                                                 {"SLURM_PROCID", "9"},
                                                 {"SLURM_LOCALID", "1"},
                                                 {"SLURM_NTASKS_PER_NODE", "8(x2)"},
                                                 {"SLURM_JOB_NODELIST", "gpu[007-008]"}}));
  EXPECT_EQ(w.launcher, "slurm");
  EXPECT_EQ(w.size, 16);
  EXPECT_EQ(w.rank, 9);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 8);
  EXPECT_EQ(w.master_addr, "gpu007");
  EXPECT_EQ(w.port, 29500);
  EXPECT_EQ(first_slurm_host("gpu[07-09,12],cpu01"), "gpu07");
  EXPECT_EQ(first_slurm_host("a,b[1-2]"), "a");
  EXPECT_EQ(first_slurm_host("node12"), "node12");
  EXPECT_EQ(first_slurm_host("rack1-n[3,5]"), "rack1-n3");
}

TEST(World, BadValuesAreOneLineErrorsNamingTheVariable) {
  auto error = [](std::map<std::string, std::string> vars) {
    return testing::error_of<UsageError>([&] { world_from_environment(lookup(vars)); });
  };
  EXPECT_EQ(error({{"WORLD_SIZE", "2"}, {"RANK", "0"}}),
            "usage: environment: WORLD_SIZE=2 but MASTER_ADDR is not set: set MASTER_ADDR and MASTER_PORT to the "
            "address and a free port of the rank-0 host");
  EXPECT_EQ(error({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "h"}}),
            "usage: environment: RANK=2 is out of range (0 to 1)");
  EXPECT_EQ(error({{"WORLD_SIZE", "two"}}), "usage: environment: WORLD_SIZE=two is not a whole number");
  EXPECT_EQ(error({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
            "usage: environment: MASTER_PORT=70000 is out of range (1 to 65535)");
  EXPECT_EQ(error({{"WORLD_SIZE", "1"}}), "no error");  // one process needs no master
}

// The built-in launcher takes MASTER_PORT when set, with the check the ranks apply to it.
TEST(World, LauncherPortIsCheckedAsTheRanksCheckIt) {
  EXPECT_EQ(master_port(lookup({})), std::nullopt);
  EXPECT_EQ(master_port(lookup({{"MASTER_PORT", "29511"}})), 29511);
  EXPECT_EQ(testing::error_of<UsageError>([] {
              master_port(lookup({{"MASTER_PORT", "abc"}}));
            }),
            "usage: environment: MASTER_PORT=abc is not a whole number");
  EXPECT_EQ(testing::error_of<UsageError>([] {
              master_port(lookup({{"MASTER_PORT", "0"}}));
            }),
            "usage: environment: MASTER_PORT=0 is out of range (1 to 65535)");
}

}  // namespace
}  // namespace trainer
