// `trainer --nproc-per-node N ...`: torchrun's standalone mode, built in. Starts N copies of this trainer with
// torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT: a
// free port unless set), each in its own process group so a terminal's Ctrl-C reaches the launcher alone, which
// forwards SIGINT/SIGTERM to every rank once per signal. Rank 0's output passes through; the other ranks' lines
// are prefixed "[rank R] ". When a rank fails (non-zero exit or killed), the others are stopped (SIGTERM, then
// SIGKILL after a grace period) and the launcher exits 1 naming the rank and its last line.
//   return launch_local_ranks(4, {"trainer", "--config", "c.json"});   // argv without --nproc-per-node
#pragma once

#include <string>
#include <vector>

namespace trainer {

// The exit code: 0 when every rank succeeded, 128 + signal when a forwarded signal stopped them, else 1.
int launch_local_ranks(int nproc, const std::vector<std::string>& argv);

// This process's own command line (/proc/self/cmdline) without the --nproc-per-node option and its value.
std::vector<std::string> command_line_without_launcher_option();

}  // namespace trainer
