// `trainer bench --config C --mode data|model|train`: a config's run, timed in parts. data: the input pipeline
// alone (as `bench data`); model: the training step alone on random images of the run's shape; train: both, as
// fit() runs them, with each step split into waiting for data and computing.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "trainer/cli/bench_support.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/batch_dataset.hpp"
#include "trainer/engine/mix.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/engine/train_step.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One micro-batch through the run's own step: normalise, mix, forward and backward, and the update after the
// last micro-batch of an optimizer step. Returns once the device is done (the loss is read back).
void train_micro_batch(Session& s, const Normalization& norm, const ImageBatch& batch, int64_t micro) {
  const Config& c = s.config;
  const auto x = to_model_input(batch.images.to(s.device, /*non_blocking=*/true), norm, c.model.channels_last);
  const auto y = batch.labels.to(s.device, /*non_blocking=*/true);
  const MicroResult out =
      forward_backward(*s.model, mix_batch(x, y, c.train.mix, static_cast<uint64_t>(micro)), s.step, s.scaler);
  if ((micro + 1) % c.train.accumulate_steps == 0) apply_update(*s.model, *s.optimizer, s.scaler, s.step);
  out.loss.item<float>();
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
  Config c = load_config(a.config, a.overrides);
  RunLogs logs = make_run_logs({});
  if (a.json) logs.main->set_level(spdlog::level::err);  // stdout carries only the JSON line
  Session s = make_session(c, {}, logs, nullptr);
  const int64_t batch = c.data.batch_size;
  s.model->train();
  const Normalization norm = make_normalization(c.data.mean, c.data.std, c.model.in_channels, s.device);

  std::vector<double> wait_ms, compute_ms;
  const int64_t total = a.warmup + a.steps;
  if (a.mode == "model") {
    // Random images of the run's shape, made once: only the step is timed.
    const ImageShape shape = s.train_data->shape();
    ImageBatch fixed{torch::randint(0, 256, {batch, shape.height, shape.width, shape.channels}, torch::kUInt8),
                     torch::randint(0, c.model.num_classes, {batch}, torch::kLong)};
    for (int64_t i = 0; i < total; ++i) {
      const auto start = Clock::now();
      train_micro_batch(s, norm, fixed, i);
      if (i >= a.warmup) compute_ms.push_back(ms_since(start));
    }
  } else {
    int64_t seen = 0;
    for (int64_t epoch = 0; seen < total; ++epoch) {
      auto loader = make_loader(BatchDataset(s.train_data, s.device.is_cuda(), {static_cast<uint64_t>(c.run.seed), epoch},
                                             s.train_bad),
                                EpochSampler({s.train_data->size(), static_cast<size_t>(batch),
                                              static_cast<uint64_t>(c.run.seed), epoch, c.data.shuffle, c.data.drop_last, 0}),
                                static_cast<size_t>(batch), static_cast<size_t>(c.data.workers),
                                static_cast<size_t>(c.data.prefetch));
      auto wait_start = Clock::now();
      for (ImageBatch& b : *loader) {
        const double waited = ms_since(wait_start);
        const auto start = Clock::now();
        train_micro_batch(s, norm, b, seen);
        if (seen >= a.warmup) {
          wait_ms.push_back(waited);
          compute_ms.push_back(ms_since(start));
        }
        wait_start = Clock::now();
        if (++seen == total) break;
      }
    }
  }
  double wait_sum = 0, compute_sum = 0;
  for (double v : wait_ms) wait_sum += v;
  for (double v : compute_ms) compute_sum += v;
  const double images_per_s = 1000.0 * static_cast<double>(batch) * static_cast<double>(a.steps) / (wait_sum + compute_sum);
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
                      {"precision", describe_precision(s.step)},
                      {"steps", a.steps},
                      {"images_per_s", images_per_s},
                      {"step_ms_median", median(compute_ms)},
                      {"peak_rss_mib", peak_rss_mib()}};
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
  std::printf("%s (%s, batch %lld, %s on %s, %d threads): %.1f images/s over %lld steps; compute %.1f ms per step "
              "(median)",
              a.mode == "model" ? "model step on random images" : "training (data + model)", c.model.arch.c_str(),
              static_cast<long long>(batch), describe_precision(s.step).c_str(), s.device.str().c_str(),
              torch::get_num_threads(), images_per_s, static_cast<long long>(a.steps), median(compute_ms));
  if (a.mode == "train")
    std::printf(", data wait %.1f ms (median), %.0f%% of the time", median(wait_ms), 100.0 * share);
  std::printf("; peak RSS %.0f MiB", peak_rss_mib());
  if (cuda.known)
    std::printf(", CUDA peak %.0f MiB allocated / %.0f MiB reserved", cuda.peak_allocated_mib, cuda.peak_reserved_mib);
  std::printf("\n");
  return 0;
}

}  // namespace trainer
