// Who this process is in a data-parallel run, read from its launcher's environment (the cli module passes the
// lookup in; nothing below reads the environment itself):
//   torchrun, and `trainer --nproc-per-node`: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//     MASTER_PORT, and torchrun's TORCHELASTIC_USE_AGENT_STORE / TORCHELASTIC_RESTART_COUNT (its agent already
//     serves the store at the master port: every rank joins it as a client, under the attempt's prefix);
//   SLURM (srun), when WORLD_SIZE is absent: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE
//     (its first figure), with the master taken from MASTER_ADDR when set, else the first host of
//     SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), and MASTER_PORT when set, else 29500;
//   neither: one process.
//   World w = world_from_environment([](const std::string& k) -> std::optional<std::string> { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace trainer {

struct World {
  int64_t rank = 0;
  int64_t size = 1;
  int64_t local_rank = 0;
  int64_t local_size = 1;
  std::string master_addr;
  int port = 0;
  std::string launcher = "none";  // "torchrun" (any launcher that sets torchrun's variables), "slurm" or "none"
  bool agent_store = false;       // torchrun's agent serves the TCPStore; no rank starts one
  int64_t restart_count = 0;      // torchrun's attempt number: the store keys' prefix

  // Whether the run joins a process group: several processes, or one that torchrun (or `--nproc-per-node 1`)
  // started with a master address, which trains through the same collectives as N ranks (a 1-rank NCCL run is the
  // cheapest check of that path). SLURM's single task and a stray WORLD_SIZE=1 stay one plain process.
  bool distributed() const { return size > 1 || (launcher == "torchrun" && !master_addr.empty()); }
};

using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Throws UsageError naming the variable for a value that is not a number or out of range, and for a world of
// several processes without a master address.
World world_from_environment(const EnvironmentLookup& env);

// The whole number in variable `name` (`fallback` when unset); UsageError naming the variable when it is not a
// number or lies outside [low, high].
int64_t environment_integer(const EnvironmentLookup& env, const std::string& name, int64_t fallback, int64_t low,
                            int64_t high);

// MASTER_PORT when set (1 .. 65535, checked as above).
std::optional<int> master_port(const EnvironmentLookup& env);

// The first host of a SLURM node list: "gpu[07-09,12],cpu01" -> "gpu07", "a,b" -> "a".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace trainer
