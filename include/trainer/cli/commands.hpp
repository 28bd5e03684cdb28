// The subcommands behind `trainer`. main.cpp parses argv into these structs and calls one; each returns the
// process exit code and throws trainer::Error for user mistakes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

struct TrainArgs {
  std::string config;                  // --config FILE
  std::vector<std::string> overrides;  // --set KEY=VALUE, in order
  std::string resume;                  // --resume CHECKPOINT
  std::string output_dir;              // --output-dir DIR: the run folder itself
  bool smoke = false;                  // --smoke
  int64_t stop_after_epoch = 0;        // --stop-after-epoch N: save and stop after epoch N (0: run to the end)
};

struct EvalArgs {
  std::string checkpoint;              // --checkpoint FILE
  std::string config;                  // --config FILE: data settings to evaluate on (model must match)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string output;                  // --output FILE: write the result as JSON
};

int run_train(const TrainArgs& args);
int run_eval(const EvalArgs& args);

// "trainer 0.1.0" and the LibTorch runtime (version, CUDA devices, threads).
std::string version_text();

}  // namespace trainer
