// `trainer bench --config C --mode data|model|train`: a config's run, timed in parts. data: the input pipeline
// alone (as `bench data`); model: the training step alone on random images of the run's shape; train: both, as
// fit() runs them, with each step split into waiting for data and computing.
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

#include "trainer/cli/bench_support.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/engine/session_step.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// One micro-batch through the run's own step (train_micro_batch, and take_optimizer_step after the last
// micro-batch of an optimizer step, as fit() calls them). Returns once the device is done (the loss is read back).
void train_micro_batch_synced(Session& s, const ImageBatch& batch, int64_t micro) {
  const TrainedMicroBatch m = train_micro_batch(s, batch, micro);
  if (micro + 1 == s.config.train.accumulate_steps) take_optimizer_step(s);
  m.out.loss.item<float>();
}

// The step alone, on random images of the run's shape made once.
void time_model_steps(Session& s, const BenchArgs& a, std::vector<double>& compute_ms) {
  const Config& c = s.config;
  const int64_t batch = c.data.batch_size, total = a.warmup + a.steps;
  const ImageShape shape = s.train_data->shape();
  ImageBatch fixed{torch::randint(0, 256, {batch, shape.height, shape.width, shape.channels}, torch::kUInt8),
                   torch::randint(0, c.model.num_classes, {batch}, torch::kLong),
                   {}};
  for (int64_t i = 0; i < total; ++i) {
    const auto start = Clock::now();
    train_micro_batch_synced(s, fixed, i % c.train.accumulate_steps);
    if (i >= a.warmup) compute_ms.push_back(ms_since(start));
  }
}

// Data and step as a run has them: the run's own loader, epoch after epoch, each step split into waiting and
// computing.
void time_training_steps(Session& s, const BenchArgs& a, std::vector<double>& wait_ms,
                         std::vector<double>& compute_ms) {
  const Config& c = s.config;
  const int64_t total = a.warmup + a.steps;
  auto loader = make_train_loader(s, 0, 0, kEndless);
  int64_t seen = 0;
  auto wait_start = Clock::now();
  for_each_batch(*loader, [&](ImageBatch& b) {
    const double waited = ms_since(wait_start);
    const auto start = Clock::now();
    train_micro_batch_synced(s, b, seen % c.train.accumulate_steps);
    if (seen >= a.warmup) {
      wait_ms.push_back(waited);
      compute_ms.push_back(ms_since(start));
    }
    wait_start = Clock::now();
    return ++seen < total;
  });
}

}  // namespace

int run_config_bench(const BenchArgs& a) {
  if (a.steps < 1 || a.warmup < 0) throw UsageError("bench: --steps must be >= 1 and --warmup >= 0");
  if (a.mode == "data") {
    DataBenchArgs d;
    d.config = a.config;
    d.overrides = a.overrides;
    d.warmup = a.warmup;
    d.batches = a.steps;
    d.json = a.json;
    return run_data_bench(d);
  }
  if (a.mode != "model" && a.mode != "train") throw UsageError("--mode: expected data, model or train, got " + a.mode);
  Config c = resolve_config(a.config, a.overrides);
  RunLogs logs = make_run_logs({});
  if (a.json) logs.main->set_level(spdlog::level::err);  // stdout carries only the JSON line
  Session s = make_session(c, {}, logs, nullptr);
  const int64_t batch = c.data.batch_size;
  train_mode(s);

  std::vector<double> wait_ms, compute_ms;
  if (a.mode == "model") time_model_steps(s, a, compute_ms);
  else time_training_steps(s, a, wait_ms, compute_ms);
  double wait_sum = 0, compute_sum = 0;
  for (double v : wait_ms) wait_sum += v;
  for (double v : compute_ms) compute_sum += v;
  const double images_per_s =
      1000.0 * static_cast<double>(batch) * static_cast<double>(a.steps) / (wait_sum + compute_sum);
  const double share = wait_sum / std::max(1e-9, wait_sum + compute_sum);
  const CudaMemory cuda = cuda_peak_memory(s.device);
  nlohmann::json j = {{"impl", "trainer"},
                      {"mode", a.mode},
                      {"config", a.config},
                      {"arch", c.model.arch},
                      {"batch", batch},
                      {"workers", c.data.workers},
                      {"threads", torch::get_num_threads()},
                      {"device", s.device.str()},
                      {"precision", describe_precision(s.step_options)},
                      {"steps", a.steps},
                      {"images_per_s", images_per_s},
                      {"step_ms_median", median(compute_ms)},
                      {"peak_rss_mib", peak_resident_mib()}};
  if (a.mode == "train") {
    j["data_wait_ms_median"] = median(wait_ms);
    j["data_wait_share"] = share;
  }
  if (cuda.known) {
    j["cuda_peak_allocated_mib"] = cuda.peak_allocated_mib;
    j["cuda_peak_reserved_mib"] = cuda.peak_reserved_mib;
  }
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "%s (%s, batch %lld, %s on %s, %d threads): %.1f images/s over %lld steps; compute %.1f ms per step "
      "(median)",
      a.mode == "model" ? "model step on random images" : "training (data + model)", c.model.arch.c_str(),
      static_cast<long long>(batch), describe_precision(s.step_options).c_str(), s.device.str().c_str(),
      torch::get_num_threads(), images_per_s, static_cast<long long>(a.steps), median(compute_ms));
  if (a.mode == "train")
    std::printf(", data wait %.1f ms (median), %.0f%% of the time", median(wait_ms), 100.0 * share);
  std::printf("; peak RSS %.0f MiB", peak_resident_mib());
  if (cuda.known)
    std::printf(", CUDA peak %.0f MiB allocated / %.0f MiB reserved", cuda.peak_allocated_mib, cuda.peak_reserved_mib);
  std::printf("\n");
  return 0;
}

}  // namespace trainer
