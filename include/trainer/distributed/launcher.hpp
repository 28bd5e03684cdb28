// `trainer --nproc-per-node N ...`: torchrun's standalone mode, built in. Starts N copies of this trainer with
// torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT: the
// given port, else a free one), each in its own process group so a terminal's Ctrl-C reaches the launcher alone,
// which forwards SIGINT/SIGTERM to every rank once per signal. Rank 0's output passes through; the other ranks'
// lines are prefixed "[rank R] ". When a rank fails (non-zero exit or killed), the others are stopped (SIGTERM,
// then SIGKILL after a grace period) and the launcher throws a TrainError naming the rank and its last line, or,
// with max_restarts, starts them all again (with restart_argv, on a new port) and says so, up to that many times.
//   return launch_local_ranks({4, {"trainer", "--config", "c.json"}, master_port(env)});
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trainer {

struct LaunchOptions {
  int nproc = 1;                          // processes to start
  std::vector<std::string> argv;          // each rank's command line, without --nproc-per-node
  std::optional<int> port;                // MASTER_PORT for the ranks to meet at; none: a free port on 127.0.0.1
  int max_restarts = 0;                   // restarts of all ranks after one fails on its own
  std::vector<std::string> restart_argv;  // the command line of a restart (one that continues the run)
};

// The exit code: 0 when every rank succeeded, else 128 + signal when a forwarded signal stopped them (or the
// largest exit code of the ranks).
int launch_local_ranks(const LaunchOptions& options);

}  // namespace trainer
