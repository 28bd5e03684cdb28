// The subcommands behind `trainer`. Each command's file declares its options beside its run_* function and adds
// itself to the command line with one add_*_command(); main() lists those in one table, parses argv and runs
// the command that was chosen. A run_* function returns the process exit code and throws trainer::Error for user
// mistakes.
//   CLI::App app;  Commands commands;
//   add_eval_command(app, commands);   ...   app.parse(argc, argv);
//   for (const Command& c : commands) if (c.app->parsed()) return c.run();
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

void add_eval_command(CLI::App& app, Commands& commands);
void add_predict_command(CLI::App& app, Commands& commands);
void add_plot_command(CLI::App& app, Commands& commands);
void add_doctor_command(CLI::App& app, Commands& commands);
void add_config_command(CLI::App& app, Commands& commands);   // config show, config schema
void add_export_command(CLI::App& app, Commands& commands);
void add_bench_command(CLI::App& app, Commands& commands);    // bench (--arch or --config), bench data
void add_train_command(CLI::App& app, Commands& commands);    // the top level: trainer --config / --resume
void add_data_bench_command(CLI::App& bench, Commands& commands);     // called by add_bench_command
void add_predict_bench_command(CLI::App& bench, Commands& commands);  // called by add_bench_command

struct TrainArgs {
  std::string config;                  // --config FILE
  std::vector<std::string> overrides;  // --set KEY=VALUE, in order
  std::string resume;                  // --resume CHECKPOINT
  std::string output_dir;              // --output-dir DIR: the run folder itself
  bool smoke = false;                  // --smoke
  int64_t stop_after_epoch = 0;        // --stop-after-epoch N: save and stop after epoch N (0: run to the end)
  int64_t stop_after_step = 0;         // --stop-after-step N: save and stop after optimizer step N, mid-epoch
  int64_t nproc_per_node = 0;          // --nproc-per-node N: start N data-parallel processes here (cli/launcher)
};

struct EvalArgs {
  std::string checkpoint;              // --checkpoint FILE
  std::string config;                  // --config FILE: data settings to evaluate on (model must match)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string output;                  // --output FILE: the JSON report (default: OUTPUT_DIR/eval.json)
  std::string output_dir;              // --output-dir DIR: eval.json and confusion.png (default: the checkpoint's folder)
  std::string split = "val";           // --split val|train (train: the training images, eval transform)
  bool ema = false;                    // --ema: the checkpoint's EMA weights
  std::string predictions;             // --predictions FILE.csv: one row per image with its top-5
};

struct ExportArgs {
  std::string checkpoint;              // --checkpoint FILE
  std::string output;                  // --output FILE
  std::string format;                  // --format (default: from the output's extension)
  bool ema = false;                    // --ema: the checkpoint's EMA weights
  int64_t opset = 0;                   // --opset N (ONNX; 0: 17)
  std::string batch = "dynamic";       // --batch dynamic|N (ONNX)
};

// `trainer bench`: times the training step (forward, loss, backward, SGD update) on random data.
struct BenchArgs {
  std::string arch = "resnet50";
  int64_t batch = 16;
  int64_t size = 224;                  // square input, pixels
  int64_t classes = 1000;
  std::string stem = "imagenet";
  bool channels_last = false;
  int64_t threads = 0;                 // 0: all cores
  std::string device = "auto";
  int64_t warmup = 2;                  // untimed steps first (allocator, oneDNN/cuDNN kernel choice)
  int64_t steps = 10;
  std::string amp = "off";             // off, bfloat16 or float16: autocast as train.amp does
  bool loss_scaler = false;            // run the float16 loss scaler's work even without float16 (its cost)
  double clip = 0.0;                   // clip the gradient norm (0: off)
  bool ema = false;                    // update a weight EMA after every step
  bool json = false;                   // print one JSON line instead of a sentence
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
  int64_t warmup = 2;                  // untimed batches first (threads start, caches warm)
  int64_t batches = 20;
  bool decode_only = false;
  bool json = false;
};

// `trainer bench predict`: forward-pass latency of a checkpoint or an exported file on random input.
struct PredictBenchArgs {
  std::string checkpoint;              // --checkpoint FILE
  std::string model;                   // --model FILE (ONNX or TorchScript)
  int64_t batch = 1;
  int64_t warmup = 5;
  int64_t runs = 20;
  bool json = false;
};

// `trainer config show`: the resolved config (extends, --set and derived defaults applied) as JSON.
struct ConfigShowArgs {
  std::string config;                  // --config FILE
  std::vector<std::string> overrides;  // --set KEY=VALUE
};

// `trainer predict`: top-5 classes of image files with a checkpoint's own preprocessing.
struct PredictArgs {
  std::string checkpoint;              // --checkpoint FILE
  std::string model;                   // --model FILE: an exported ONNX or TorchScript file instead
  std::vector<std::string> images;     // IMAGE...
  bool json = false;                   // --json: one JSON line
};

// `trainer doctor`: checks of the runtime, each CUDA device and, with a config, its data and output folder.
struct DoctorArgs {
  std::string config;                  // --config FILE (optional)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string output_dir;              // --output-dir DIR: the run folder to check (default: run.output_dir/run.name)
};

// `trainer plot RUN_DIR`: curves.png from the run's metrics.jsonl.
struct PlotArgs {
  std::string run_dir;
};

int run_train(const TrainArgs& args);
int run_config_show(const ConfigShowArgs& args);
int run_config_schema();
int run_predict(const PredictArgs& args);
int run_plot(const PlotArgs& args);
int run_doctor(const DoctorArgs& args);
int run_eval(const EvalArgs& args);
int run_export(const ExportArgs& args);
int run_bench(const BenchArgs& args);
int run_config_bench(const BenchArgs& args);
int run_data_bench(const DataBenchArgs& args);
int run_predict_bench(const PredictBenchArgs& args);

// "trainer 0.1.0" and the LibTorch runtime (version, CUDA devices, threads).
std::string version_text();

}  // namespace trainer
