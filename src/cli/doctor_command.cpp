// `trainer doctor`: "will my run work on this machine?", one line per check (ok / warning / failed + hint); each
// check is a row of doctor_checks(), its function in src/cli/doctor/.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/doctor_checks.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

// `trainer doctor`: checks of the runtime, each CUDA device and, with a config, its data and output folder.
struct DoctorArgs {
  std::string config;                  // --config FILE (optional)
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string output_dir;              // --output-dir DIR: the run folder to check (default: run.output_dir/run.name)
  bool allow_pipe = false;             // --allow-pipe: pipe:CMD shards may run CMD
};

}  // namespace

std::string mib(double bytes) { return format_number(std::round(bytes / (1024.0 * 1024.0) * 10) / 10) + " MiB"; }
std::string gib(double bytes) {
  return format_number(std::round(bytes / (1024.0 * 1024.0 * 1024.0) * 10) / 10) + " GiB";
}

const std::vector<DoctorCheck>& doctor_checks() {
  // The config is read before any check runs (the thread counts reported are the run's); data before layout and
  // output, which use the training images' shape.
  static const std::vector<DoctorCheck> rows{
      {/*name=*/"runtime", /*needs_config=*/false, /*run=*/check_runtime},
      {/*name=*/"cuda", /*needs_config=*/false, /*run=*/check_cuda_devices},
      {/*name=*/"config", /*needs_config=*/false, /*run=*/check_config},
      {/*name=*/"data", /*needs_config=*/true, /*run=*/check_data},
      {/*name=*/"layout", /*needs_config=*/false, /*run=*/check_layout},
      {/*name=*/"output", /*needs_config=*/true, /*run=*/check_output},
  };
  return rows;
}

void check_config(Report& report, DoctorContext& context) {
  if (!context.config_error.empty())
    report.add(Verdict::failed, "config", context.config_error, "trainer config schema lists every key");
  if (!context.config) return;
  const Config& c = *context.config;
  const int64_t per_step = c.data.batch_size * c.train.accumulate_steps;
  report.add(Verdict::ok, "config",
             context.config_file + ": " + c.model.arch + ", " + std::to_string(c.train.epochs) + " epochs, batch " +
                 std::to_string(c.data.batch_size) +
                 (c.train.accumulate_steps > 1 ? " x " + std::to_string(c.train.accumulate_steps) +
                                                     " accumulated = " + std::to_string(per_step) + " per step"
                                               : std::string()) +
                 ", lr " + format_number(base_learning_rate(c)) +
                 (c.optim.lr_per_256 > 0 ? " (lr_per_256 " + format_number(c.optim.lr_per_256) + " x " +
                                               std::to_string(per_step) + " / 256)"
                                         : std::string()) +
                 ", device " + c.run.device +
                 (c.train.amp.enabled
                      ? std::string(", amp ") + (c.train.amp.dtype == AmpDtype::float16 ? "float16" : "bfloat16") +
                            (c.train.amp.cuda_only ? " (CUDA only)" : "")
                      : std::string()));
}

namespace {

int run_doctor(const DoctorArgs& args) {
  Report report;
  DoctorContext context;
  context.config_file = args.config;
  if (!args.config.empty()) {
    try {
      context.config = resolve_config(args.config, args.overrides);
      apply_allow_pipe(*context.config, args.allow_pipe);
      const Config& c = *context.config;
      context.run_dir = args.output_dir.empty() ? std::filesystem::path(c.run.output_dir) / c.run.name
                                                : std::filesystem::path(args.output_dir);
    } catch (const Error& e) {
      context.config_error = e.what();
    }
  }
  apply_threads(context.config ? context.config->run : RunConfig{});
  for (const DoctorCheck& check : doctor_checks())
    if (context.config || !check.needs_config) check.run(report, context);
  std::printf("doctor: %d check(s) failed, %d warning(s)\n", report.failed(), report.warnings());
  return report.failed() ? 1 : 0;
}

}  // namespace

void add_doctor_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "doctor", "check LibTorch, BLAS, threads, every CUDA device and, with --config, the data and output folder");
  add_config_options(*cmd, args->config, args->overrides, "config whose data, output folder and settings are checked");
  add_output_dir_option(*cmd, args->output_dir, "run folder to check (default: run.output_dir/run.name)");
  add_allow_pipe_flag(*cmd, args->allow_pipe);
  commands.push_back({cmd, [args] { return run_doctor(*args); }});
}

}  // namespace trainer
