#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <optional>
#include <random>
#include <thread>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/distributed/launcher.hpp"
#include "trainer/distributed/world.hpp"
#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/engine/fit.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/engine/resume_point.hpp"
#include "trainer/io/checkpoint_names.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/platform/stop_requests.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

struct TrainArgs {
  std::string config;                     // --config FILE
  std::vector<std::string> overrides;     // --set KEY=VALUE, in order
  std::string resume;                     // --resume CHECKPOINT, or auto
  std::string output_dir;                 // --output-dir DIR: the run folder itself
  bool smoke = false;                     // --smoke
  int64_t stop_after_epoch = 0;           // --stop-after-epoch N: save and stop after epoch N (0: run to the end)
  int64_t stop_after_step = 0;            // --stop-after-step N: save and stop after optimizer step N, mid-epoch
  std::optional<int64_t> nproc_per_node;  // --nproc-per-node N: start N processes here (distributed/launcher)
  int64_t max_restarts = 0;               // --max-restarts K: restart them all up to K times when one dies
  bool allow_pipe = false;                // --allow-pipe: pipe:CMD shards may run CMD
};

// A config the run reads (from --config, or a checkpoint's) with what only the command line may say applied.
Config with_command_line(Config config, const TrainArgs& args) {
  apply_allow_pipe(config, args.allow_pipe);
  return config;
}

Config resolve_run_config(const TrainArgs& args) {
  return with_command_line(resolve_config(args.config, args.overrides), args);
}

}  // namespace

namespace fs = std::filesystem;

namespace {

bool holds_run(const fs::path& dir) {
  for (const std::string& name :
       {std::string("config.resolved.json"), CheckpointNames::last(), CheckpointNames::best()})
    if (fs::exists(dir / name)) return true;
  return false;
}

void write_resolved_config(const fs::path& run_dir, const Config& config) {
  const std::string text = config_to_json(config).dump(2) + "\n";
  write_text_atomically(run_dir / "config.resolved.json", text);
}

// A new run folder: refuses one that already holds a run, so nothing saved there is overwritten.
fs::path run_dir_of(const Config& config, const std::string& output_dir) {
  return output_dir.empty() ? fs::path(config.run.output_dir) / config.run.name : fs::path(output_dir);
}

// `replace`: --resume auto found nothing usable there (no checkpoint, or only damaged ones): a new run may start.
fs::path prepare_new_run_dir(const Config& config, const std::string& output_dir, bool replace = false) {
  const fs::path dir = run_dir_of(config, output_dir);
  if (!replace && holds_run(dir))
    throw UsageError("run folder " + dir.string() + " already holds a run; continue it with `trainer --resume " +
                     (dir / CheckpointNames::last()).string() +
                     "` or choose another folder with --output-dir or --set run.name=NAME");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create run folder " + dir.string() + ": " + ec.message(), 1);
  return dir;
}

FitLimits fit_limits(const TrainArgs& args) {
  FitLimits limits;
  if (args.stop_after_epoch > 0) limits.epoch = args.stop_after_epoch;
  if (args.stop_after_step > 0) limits.step = args.stop_after_step;
  return limits;
}

std::optional<std::string> environment_variable(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

EnvironmentLookup process_environment() { return environment_variable; }

// This process's own command line without the launcher's options (--nproc-per-node, --max-restarts) and their
// values: what each rank the launcher starts runs.
std::vector<std::string> command_line_without_launcher_option() {
  const std::vector<std::string> all = own_command_line();
  std::vector<std::string> kept;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == "--nproc-per-node" || all[i] == "--max-restarts") {
      ++i;  // and its value
      continue;
    }
    if (all[i].rfind("--nproc-per-node=", 0) == 0 || all[i].rfind("--max-restarts=", 0) == 0) continue;
    kept.push_back(all[i]);
  }
  return kept;
}

// Data-parallel runs (torchrun's or SLURM's variables, or `--nproc-per-node`): this process's place in the world
// and, for more than one process, the group it trains with; null for a single process.
std::shared_ptr<Collectives> join_world(const Config& c) {
  const World world = world_from_environment(process_environment());
  if (!world.distributed()) return nullptr;
  CollectivesOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.run.dist_timeout_s * 1000));
  options.device = rank_device(select_device(c.run.device), world.local_rank, world.local_size);
  options.backend = resolve_backend(c.run.dist_backend, options.device);
  make_current(options.device);  // each rank on its own GPU from the start, before NCCL sees a tensor
  return std::make_shared<Collectives>(world, options);
}

// Rank 0 writes the run folder and logs; the other ranks write nothing and print only warnings and errors.
bool writes_run(const std::shared_ptr<Collectives>& group) { return !group || group->world().rank == 0; }

RunLogs rank_logs(const fs::path& run_dir, bool writer) {
  RunLogs logs = make_run_logs(writer ? run_dir : fs::path());
  if (!writer)
    for (auto* l : {logs.main.get(), logs.file.get()}) l->set_level(spdlog::level::warn);
  return logs;
}

// The last lines of a run; the exit code: 0, or 128 + the signal that stopped it (130 SIGINT, 143 SIGTERM).
int finish(const Session& s, const FitResult& r) {
  const std::string resume = "trainer --resume " + (s.run_dir / CheckpointNames::last()).string();
  const bool signalled = r.stopped_by && r.stopped_by->kind == StopReason::Kind::signal;
  if (s.run_dir.empty()) return signalled ? r.stopped_by->exit_code() : 0;  // a rank other than 0
  if (signalled) {
    s.logs.main->warn("stopped by {} after step {} (epoch {}, batch {}); continue with: {}",
                      signal_name(r.stopped_by->signal_number), r.state.step, r.state.epoch + 1, r.state.batch_in_epoch,
                      resume);
    return r.stopped_by->exit_code();
  }
  if (r.stopped_early)
    s.logs.main->info("stopped early after epoch {} of {} (train.early_stopping); best.pt holds the best weights",
                      r.state.epoch, s.config.train.epochs);
  if (r.last_eval)
    s.logs.main->info("finished {} epoch(s): eval top1 {:.4f} top5 {:.4f} loss {:.4f}{}; best {} {:.4f}; run folder {}",
                      r.state.epoch, r.last_eval->top1(), r.last_eval->top5(), r.last_eval->loss(),
                      r.last_ema_eval ? fmt::format(" (ema top1 {:.4f})", r.last_ema_eval->top1()) : std::string(),
                      enum_name(best_metrics(), s.config.train.best_metric), r.state.best.value_or(0.0),
                      s.run_dir.string());
  s.logs.main->info("continue with: {}  |  evaluate with: trainer eval --checkpoint {}", resume,
                    (s.run_dir / CheckpointNames::best()).string());
  return 0;
}

// model.weights as a file, fetched into the hub cache when it is a name or an address (progress in the run's log).
StartWeights locate_run_weights(const Config& config, const RunLogs& logs) {
  auto log = logs.main;
  return locate_start_weights(config.model,
                              weights_hub_from_environment([log](const std::string& line) { log->info("{}", line); }));
}

// A new run in its folder; `replace`: one that --resume auto found nothing usable in.
int train_new(const TrainArgs& args, const Config& config, bool replace) {
  auto group = join_world(config);
  const bool writer = writes_run(group);
  const fs::path run_dir = writer ? prepare_new_run_dir(config, args.output_dir, replace) : fs::path();
  RunLogs logs = rank_logs(run_dir, writer);
  // Rank 0 alone fetches the start weights: the others take its weights when the group starts.
  const StartWeights start = writer ? locate_run_weights(config, logs) : StartWeights{};
  Session s = make_session(config, run_dir, std::move(logs), nullptr, group, start);
  // Only now does the folder count as a run: a start that failed (bad data, weights that do not fit)
  // can be fixed and rerun into the same folder.
  if (writer) write_resolved_config(run_dir, s.config);  // model.num_classes resolved from the data
  s.logs.main->info("run folder {} (config {})", run_dir.string(), args.config);
  return finish(s, fit(s, fit_limits(args)));
}

int train_resume(const TrainArgs& args) {
  const LoadedCheckpoint checkpoint(args.resume);
  CheckpointConfig resolved = config_for_checkpoint(checkpoint, args.config, args.overrides);
  resolved.config = with_command_line(std::move(resolved.config), args);
  auto group = join_world(resolved.config);
  const bool writer = writes_run(group);
  fs::path run_dir;
  if (writer) {
    run_dir = args.output_dir.empty() ? fs::absolute(checkpoint.path()).parent_path() : fs::path(args.output_dir);
    fs::create_directories(run_dir);
  }
  RunLogs logs = rank_logs(run_dir, writer);
  for (const auto& change : resolved.changes) logs.main->info("resume: config change {} (allowed)", change.describe());
  if (checkpoint.meta().epoch >= resolved.config.train.epochs) {
    logs.main->info("{} already completed {} of {} epoch(s); nothing to do (raise it with --set train.epochs=N)",
                    checkpoint.path().string(), checkpoint.meta().epoch, resolved.config.train.epochs);
    return 0;
  }
  if (writer) write_resolved_config(run_dir, resolved.config);
  Session s = make_session(resolved.config, run_dir, std::move(logs), &checkpoint, group);
  return finish(s, fit(s, fit_limits(args)));
}

// --resume auto (or run.resume auto): the run folder's newest good checkpoint, else a new run there. Every rank
// looks at the same folder and takes the same file; rank 0 says which.
int train_auto(const TrainArgs& args, const Config& config) {
  const fs::path run_dir = run_dir_of(config, args.output_dir);
  const ResumePoint point = find_resume_point(run_dir);
  if (world_from_environment(process_environment()).rank == 0) {
    const RunLogs console = make_run_logs({});
    for (const auto& note : point.notes) console.main->info("{}", note);
  }
  if (!point.checkpoint) return train_new(args, config, /*replace=*/true);
  TrainArgs resumed = args;
  resumed.resume = point.checkpoint->string();
  resumed.output_dir = run_dir.string();
  return train_resume(resumed);
}

int train_new(const TrainArgs& args) {
  const Config config = resolve_run_config(args);
  if (config.run.resume == ResumeMode::automatic) return train_auto(args, config);
  return train_new(args, config, /*replace=*/false);
}

// The whole pipeline on a few batches: train one epoch, save, resume for the second, evaluate best.pt.
int train_smoke(const TrainArgs& args) {
  Config config = resolve_run_config(args);
  config.data.limit_train = 4 * config.data.batch_size;
  config.data.limit_eval = 4 * config.data.batch_size;
  config.train.epochs = 2;
  config.train.eval_every = 1;
  config.train.checkpoint_every = 1;
  config.train.log_every = std::min<int64_t>(config.train.log_every, 2);
  fs::path run_dir;
  bool throwaway = args.output_dir.empty();
  if (throwaway) {
    // A new folder under the system's temporary folder: create_directory fails when the name is taken.
    std::random_device random;
    for (int attempt = 0; attempt < 100 && run_dir.empty(); ++attempt) {
      const fs::path candidate = fs::temp_directory_path() / ("trainer-smoke-" + std::to_string(random()));
      std::error_code ec;
      if (fs::create_directory(candidate, ec)) run_dir = candidate;
    }
    if (run_dir.empty()) throw Error("cannot create a temporary run folder", 1);
  } else {
    run_dir = prepare_new_run_dir(config, args.output_dir);
  }
  {
    RunLogs logs = make_run_logs(run_dir);
    const StartWeights start = locate_run_weights(config, logs);
    Session first = make_session(config, run_dir, std::move(logs), nullptr, nullptr, start);
    write_resolved_config(run_dir, first.config);
    first.logs.main->info("smoke: run folder {}; epoch 1, then resume for epoch 2", run_dir.string());
    fit(first, {/*epoch=*/1, std::nullopt});
  }
  const LoadedCheckpoint checkpoint(run_dir / CheckpointNames::last());
  Session second = make_session(with_command_line(config_for_checkpoint(checkpoint, "", {}).config, args), run_dir,
                                make_run_logs(run_dir), &checkpoint);
  const FitResult done = fit(second);
  EvalArgs eval;
  eval.checkpoint = (run_dir / CheckpointNames::best()).string();
  eval.allow_pipe = args.allow_pipe;
  const int code = run_eval(eval);
  if (code != 0 || done.state.epoch != 2) throw TrainError("smoke run did not complete");
  second.logs.main->info("smoke test passed: train, checkpoint, resume and eval work");
  if (throwaway) fs::remove_all(run_dir);
  return 0;
}

}  // namespace

namespace {

// --nproc-per-node within what this machine holds: one process per GPU on CUDA. On the CPU more processes than
// cores is legitimate (a 3-rank world on a 2-core laptop or CI box tests a run that will resume on another world
// size; torchrun allows it): a warning, up to kProcessesPerCore each; past that (a typo of 100000 would fork that
// many LibTorch processes) it is refused.
constexpr int64_t kProcessesPerCore = 4;

void check_process_count(int64_t n, const TrainArgs& args) {
  const std::string option = "--nproc-per-node " + std::to_string(n);
  if (n < 1) throw UsageError(option + ": expected a number of processes >= 1");
  const std::string device = args.config.empty() ? "auto" : resolve_config(args.config, args.overrides).run.device;
  const auto gpus = static_cast<int64_t>(torch::cuda::device_count());
  if (gpus > 0 && device.rfind("cpu", 0) != 0) {
    if (n > gpus) throw UsageError(option + ": this machine has " + std::to_string(gpus) + " GPU(s), one process each");
    return;
  }
  const auto cores = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  if (n > kProcessesPerCore * cores)
    throw UsageError(option + ": this machine has " + std::to_string(cores) + " CPU core(s); more than " +
                     std::to_string(kProcessesPerCore) + " processes a core would only make each slower");
  if (n > cores)
    spdlog::warn("{}: more processes than this machine's {} CPU core(s); they share them (slower, same results)",
                 option, cores);
}

}  // namespace

int run_train(const TrainArgs& args) {
  if (args.stop_after_epoch < 0) throw UsageError("--stop-after-epoch expects an epoch number >= 1");
  if (args.stop_after_step < 0) throw UsageError("--stop-after-step expects a step number >= 1");
  if (args.smoke && !args.resume.empty())
    throw UsageError("--smoke starts its own run; it cannot be combined with --resume");
  if (args.nproc_per_node) {
    check_process_count(*args.nproc_per_node, args);
    if (environment_variable("WORLD_SIZE"))
      throw UsageError("--nproc-per-node starts its own processes; it cannot run under torchrun or another launcher");
    if (args.smoke) throw UsageError("--smoke runs in one process; it cannot be combined with --nproc-per-node");
    LaunchOptions launch;
    launch.nproc = static_cast<int>(*args.nproc_per_node);
    launch.argv = command_line_without_launcher_option();
    launch.port = master_port(process_environment());
    launch.max_restarts = static_cast<int>(args.max_restarts);
    // A restart continues the run: a new run's command line becomes --resume auto (a --resume CHECKPOINT line
    // continues from that file's folder as it is, last.pt being rewritten at every save).
    launch.restart_argv = launch.argv;
    if (args.resume.empty()) launch.restart_argv.insert(launch.restart_argv.end(), {"--resume", "auto"});
    return launch_local_ranks(launch);
  }
  if (args.max_restarts > 0)
    throw UsageError(
        "--max-restarts restarts the processes --nproc-per-node starts; under torchrun use its own "
        "--max-restarts with --resume auto");
  if (args.smoke) {
    if (args.config.empty()) throw UsageError("--smoke needs --config FILE");
    if (environment_variable("WORLD_SIZE").value_or("1") != "1")
      throw UsageError("--smoke runs in one process; start it without a launcher");
    return train_smoke(args);
  }
  if (args.resume == "auto") {
    if (args.config.empty())
      throw UsageError("--resume auto needs --config FILE: the run it continues, or starts in its folder");
    return train_auto(args, resolve_run_config(args));
  }
  if (!args.resume.empty()) return train_resume(args);
  if (args.config.empty()) throw UsageError("training needs --config FILE or --resume CHECKPOINT (see trainer --help)");
  return train_new(args);
}

void add_train_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<TrainArgs>();
  add_config_options(app, args->config, args->overrides, "JSON config file (may \"extends\" a parent)");
  app.add_option("--resume", args->resume,
                 "continue the run of this checkpoint (its config is reused); auto (with --config): the run folder's "
                 "newest good checkpoint, or a new run there");
  add_output_dir_option(app, args->output_dir, "run folder (default: run.output_dir/run.name)");
  app.add_option("--stop-after-epoch", args->stop_after_epoch,
                 "save and stop after this epoch; --resume continues the same schedule (for time-limited jobs)");
  app.add_option("--stop-after-step", args->stop_after_step,
                 "save and stop after this optimizer step, also mid-epoch; --resume continues exactly there");
  app.add_option("--max-restarts", args->max_restarts,
                 "with --nproc-per-node: when a process dies, stop the others and start them all again from the "
                 "run's newest good checkpoint, up to this many times")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  app.add_option("--nproc-per-node", args->nproc_per_node,
                 "data-parallel: start this many training processes on this machine (as torchrun does; 1: one "
                 "process in a group of one)")
      ->type_name("INT");
  app.add_flag("--smoke", args->smoke, "train a few batches for 2 epochs with a save, a resume and an eval");
  add_allow_pipe_flag(app, args->allow_pipe);
  commands.push_back({&app, [args] { return run_train(*args); }});
}

}  // namespace trainer
