// The subcommands behind `trainer`. Each command is one file, src/cli/<name>_command.cpp, holding its options
// struct, its run_* function and the add_*_command() that puts it on the command line; main.cpp's table lists
// the add_*_command functions, parses argv and runs the command that was chosen. A run_* function returns the
// process exit code and throws trainer::Error for user mistakes. This header holds what several commands share:
// the Command type, the nested commands `bench` adds, and the options one command passes to another.
//   CLI::App app;  Commands commands;
//   add_eval_command(app, commands);   ...   app.parse(argc, argv);
//   for (const Command& c : commands) if (c.app->parsed()) return c.run();
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainer/io/weights_hub.hpp"

namespace CLI {
class App;
}

namespace trainer {

// A command as added to the command line: its (sub)command, and how to run it with the options parsed into it.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};
// Nested commands come before their parent (`bench data` before `bench`), and `train`, whose options live on
// the top level, comes last: the first parsed one is the one the user chose.
using Commands = std::vector<Command>;

void add_data_bench_command(CLI::App& bench, Commands& commands);  // called by add_bench_command

// PyTorch's hub cache ($TORCH_HOME, $XDG_CACHE_HOME or the home folder) and TRAINER_WEIGHTS_MIRROR, from the
// environment; `say` prints download progress (weights_command.cpp).
WeightsHub weights_hub_from_environment(std::function<void(const std::string&)> say);
void add_predict_bench_command(CLI::App& bench, Commands& commands);  // called by add_bench_command

// `trainer eval`, also run by `trainer --smoke` on the checkpoint it wrote.
struct EvalArgs {
  std::string checkpoint;              // --checkpoint FILE
  std::string config;                  // --config FILE: data settings to evaluate on (model must match)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string output;                  // --output FILE: the JSON report (default: OUTPUT_DIR/eval.json)
  std::string output_dir;     // --output-dir DIR: eval.json and confusion.png (default: the checkpoint's folder)
  std::string split = "val";  // --split val|train (train: the training images, eval transform)
  bool ema = false;           // --ema: the checkpoint's EMA weights
  std::string predictions;    // --predictions FILE.csv: one row per image with its top-5
  bool allow_pipe = false;    // --allow-pipe: pipe:CMD shards may run CMD
};

// `trainer bench` (bench_command.cpp, and config_bench_command.cpp with --config): times the training step (forward,
// loss, backward, SGD update) on random data.
struct BenchArgs {
  std::string arch = "resnet50";
  int64_t batch = 16;
  int64_t size = 224;  // square input, pixels
  int64_t classes = 1000;
  std::string stem = "imagenet";
  bool channels_last = false;
  int64_t threads = 0;  // 0: all cores
  std::string device = "auto";
  int64_t warmup = 2;  // untimed steps first (allocator, oneDNN/cuDNN kernel choice)
  int64_t steps = 10;
  std::string amp = "off";   // off, bfloat16 or float16: autocast as train.amp does
  bool loss_scaler = false;  // run the float16 loss scaler's work even without float16 (its cost)
  double clip = 0.0;         // clip the gradient norm (0: off)
  bool ema = false;          // update a weight EMA after every step
  bool json = false;         // print one JSON line instead of a sentence
  // With --config: time that run's own pipeline and step instead (run_config_bench).
  std::string config;                  // --config FILE
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string mode = "train";          // --mode, one of bench_modes()
};
inline std::vector<std::string> bench_modes() { return {"data", "model", "train"}; }

// `trainer bench data`: images/s of a config's training input pipeline (read, decode, augment, batch, and the
// float normalisation a CPU step does), or with --decode-only the full-size decode rate of the same files.
struct DataBenchArgs {
  std::string config;                  // --config FILE (its data section; data.kind imagenet for --decode-only)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  // Untimed batches first; -1, the default: data.prefetch + 2, by when every batch block has been made and
  // written once (the timed batches then show the steady state, not the pipeline filling up).
  int64_t warmup = -1;
  int64_t batches = 20;
  bool decode_only = false;
  bool eval = false;  // --eval: the evaluation pipeline (eval split and transforms, a new
                      // loader per pass over the split, as each evaluation makes one)
  bool json = false;
  bool allow_pipe = false;  // --allow-pipe: pipe:CMD shards may run CMD
};

int run_eval(const EvalArgs& args);
int run_bench(const BenchArgs& args);
int run_config_bench(const BenchArgs& args);
int run_data_bench(const DataBenchArgs& args);

// "trainer 0.1.0" and the LibTorch runtime (version, CUDA devices, threads).
std::string version_text();

}  // namespace trainer
