#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "trainer/cli/bench_support.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/engine/step.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// What `trainer bench --arch` measured, for its report.
struct StepTiming {
  std::vector<double> step_ms;  // each timed step
  bool channels_last = false;   // the layout the self-check kept
  std::string precision;
  bool loss_scaler = false;
  bool precision_has_scaler = false;  // float16: the scaler belongs to the precision
  torch::Device device{torch::kCPU};
};

void print_step_timing(const BenchArgs& a, const StepTiming& t) {
  const double med = median(t.step_ms);
  const double images_per_s = 1000.0 * static_cast<double>(a.batch) / med;
  const CudaMemory gpu_memory = cuda_peak_memory(t.device);
  if (a.json) {
    nlohmann::json j = {{"impl", "trainer"},
                        {"arch", a.arch},
                        {"batch", a.batch},
                        {"size", a.size},
                        {"channels_last", t.channels_last},
                        {"threads", torch::get_num_threads()},
                        {"precision", t.precision},
                        {"loss_scaler", t.loss_scaler},
                        {"clip", a.clip},
                        {"ema", a.ema},
                        {"device", t.device.str()},
                        {"step_ms_median", med},
                        {"step_ms", t.step_ms},
                        {"images_per_s", images_per_s},
                        {"peak_rss_mib", peak_resident_mib()}};
    if (gpu_memory.known) {
      j["cuda_peak_allocated_mib"] = gpu_memory.peak_allocated_mib;
      j["cuda_peak_reserved_mib"] = gpu_memory.peak_reserved_mib;
    }
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "%s batch %lld at %lldpx, channels_last %s, %s%s%s%s, %d threads on %s: median step %.1f ms over "
      "%lld steps (%.1f img/s), peak RSS %.0f MiB\n",
      a.arch.c_str(), static_cast<long long>(a.batch), static_cast<long long>(a.size), t.channels_last ? "on" : "off",
      t.precision.c_str(), t.loss_scaler && !t.precision_has_scaler ? " + loss scaler" : "",
      a.clip > 0 ? " + clipping" : "", a.ema ? " + EMA" : "", torch::get_num_threads(), t.device.str().c_str(), med,
      static_cast<long long>(a.steps), images_per_s, peak_resident_mib());
  if (gpu_memory.known)
    std::printf("  GPU memory peak: %.0f MiB allocated, %.0f MiB reserved\n", gpu_memory.peak_allocated_mib,
                gpu_memory.peak_reserved_mib);
}

}  // namespace

int run_bench(const BenchArgs& a) {
  if (a.batch < 1 || a.size < 1 || a.steps < 1 || a.warmup < 0 || a.classes < 2)
    throw UsageError("bench: --batch, --size and --steps must be >= 1, --warmup >= 0, --classes >= 2");
  ModelConfig m;
  m.arch = a.arch;
  m.in_channels = 3;
  m.num_classes = a.classes;
  for (const auto& [name, kind] : stem_kinds())  // --stem is one of these names (checked when parsed)
    if (name == a.stem) m.stem = kind;
  m.channels_last = a.channels_last ? Switch::on : Switch::off;
  model_row(m.arch);  // an unknown --arch fails before anything is built
  RunConfig run;
  run.threads = a.threads;
  apply_threads(run);
  StepTiming t;
  t.device = select_device(a.device);

  // A benchmark of wrong kernels measures nothing: the same self-check and fallback as a run.
  torch::manual_seed(0);
  auto model = build_model(m, {a.size, a.size, 3});
  t.channels_last = place_in_checked_layout(*model, m, {a.size, a.size, 3}, t.device, warn_on_stderr).channels_last;
  auto optimizer = make_optimizer(OptimConfig{}, *model);
  TrainConfig train;
  train.clip_grad_norm = a.clip;
  train.amp.enabled = a.amp != "off";
  for (const auto& [name, dtype] : amp_dtypes())  // --amp is off or one of these names (checked when parsed)
    if (name == a.amp) train.amp.dtype = dtype;
  const StepOptions options = step_options(train, t.device);
  LossScaler scaler(train.amp, options.uses_scaler() || a.loss_scaler);
  t.precision = describe_precision(options);
  t.loss_scaler = scaler.enabled();
  t.precision_has_scaler = options.uses_scaler();
  std::unique_ptr<WeightEma> ema;
  if (a.ema) {
    auto shadow = build_model(m, {a.size, a.size, 3});
    place_model(*shadow, t.device, t.channels_last);
    ema = std::make_unique<WeightEma>(train.ema, std::move(shadow), *model);
  }
  model->train();
  const auto memory_format = t.channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  const torch::Tensor x = torch::randn({a.batch, 3, a.size, a.size}, torch::device(t.device)).contiguous(memory_format);
  const torch::Tensor y = torch::randint(0, a.classes, {a.batch}, torch::device(t.device).dtype(torch::kLong));

  for (int64_t i = 0; i < a.warmup + a.steps; ++i) {
    const auto start = Clock::now();
    const MicroResult out = forward_backward(*model, MixedBatch{x, y, {}, 1.0, false}, options, scaler);
    const UpdateResult u = apply_update(*model, *optimizer, scaler, options);
    if (ema && !u.skipped) ema->after_step(i + 1);
    out.loss.item<float>();  // waits for the device, as the Python side does
    const double ms = ms_since(start);
    if (i >= a.warmup) t.step_ms.push_back(ms);
  }
  print_step_timing(a, t);
  return 0;
}

void add_bench_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd =
      app.add_subcommand("bench", "time the training step (forward, backward, SGD) of a model on random images");
  cmd->add_option("--arch", args->arch, "model architecture")->capture_default_str();
  cmd->add_option("--batch", args->batch, "images per step")->capture_default_str();
  cmd->add_option("--size", args->size, "square image size in pixels")->capture_default_str();
  cmd->add_option("--classes", args->classes, "classifier outputs")->capture_default_str();
  cmd->add_option("--stem", args->stem, "ResNet stem")->check(one_of(stem_kinds()))->capture_default_str();
  cmd->add_flag("--channels-last", args->channels_last, "weights and inputs in channels_last");
  cmd->add_option("--threads", args->threads, "intra-op threads (0: all cores)")->capture_default_str();
  cmd->add_option("--device", args->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed steps first")->capture_default_str();
  cmd->add_option("--steps", args->steps, "timed steps")->capture_default_str();
  std::vector<std::string> amp{"off"};
  for (const auto& name : enum_names(amp_dtypes())) amp.push_back(name);
  cmd->add_option("--amp", args->amp, "autocast dtype, as train.amp")->check(one_of(amp))->capture_default_str();
  cmd->add_flag("--loss-scaler", args->loss_scaler, "do the float16 loss scaler's work in any precision");
  cmd->add_option("--clip", args->clip, "clip the gradient norm to this value (0: off)")->capture_default_str();
  cmd->add_flag("--ema", args->ema, "update an EMA of the weights after every step");
  add_json_flag(*cmd, args->json);
  add_config_options(*cmd, args->config, args->overrides,
                     "time this config's run instead: its data pipeline, its model step, or both (--mode)");
  cmd->add_option("--mode", args->mode,
                  "with --config: data (pipeline alone), model (step on random images) or train (both, with the "
                  "data-wait vs compute split)")
      ->check(one_of(bench_modes()))
      ->capture_default_str();
  add_data_bench_command(*cmd, commands);  // before bench itself: `bench data` also parses `bench`
  add_predict_bench_command(*cmd, commands);
  commands.push_back({cmd, [args] { return args->config.empty() ? run_bench(*args) : run_config_bench(*args); }});
}

}  // namespace trainer
