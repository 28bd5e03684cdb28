// Everything one training run holds, built from a Config by make_session(): data sources, model,
// optimizer, progress, logs and the metrics files. fit() (fit.hpp) runs it.
//   Session s = make_session(config, run_dir, make_run_logs(run_dir), /*resume=*/nullptr);
#pragma once

#include <spdlog/logger.h>
#include <torch/optim/optimizer.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "trainer/config/config.hpp"
#include "trainer/data/bad_samples.hpp"
#include "trainer/data/image_source.hpp"
#include "trainer/data/model_input.hpp"
#include "trainer/engine/loss_scaler.hpp"
#include "trainer/engine/train_step.hpp"
#include "trainer/engine/weight_ema.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/metrics_sink.hpp"
#include "trainer/models/classifier.hpp"
#include "trainer/models/layout_check.hpp"

namespace trainer {

struct RunLogs {
  std::shared_ptr<spdlog::logger> main;  // console and RUN_DIR/train.log
  std::shared_ptr<spdlog::logger> file;  // train.log only: step lines while the console shows a progress line
  bool interactive = false;              // stdout is a terminal
};

// An empty run_dir logs to the console only.
RunLogs make_run_logs(const std::filesystem::path& run_dir);

struct Session {
  Config config;
  std::filesystem::path run_dir;
  torch::Device device{torch::kCPU};
  RunLogs logs;
  std::shared_ptr<const ImageSource> train_data;
  std::shared_ptr<const ImageSource> eval_data;
  std::shared_ptr<BadSamples> train_bad;  // unreadable images met so far, per split
  std::shared_ptr<BadSamples> eval_bad;
  bool drop_last = false;        // data.drop_last resolved for this model (data/last_batch.hpp)
  ClassifierPtr model;
  KernelLayout layout;           // model.channels_last resolved and self-checked for this device
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  Normalization norm;            // data.mean / data.std on the model's device
  StepOptions step;              // precision, accumulation, clipping
  LossScaler scaler;             // enabled for float16 autocast
  std::unique_ptr<WeightEma> ema;  // with train.ema.enabled
  TrainState state;
  std::unique_ptr<MetricsSink> metrics;
};

// Sets threads and seeds, loads the data and builds model, optimizer, loss scaler and EMA. A new run takes
// model.init_from's weights (minus model.init_exclude) when set. With `resume`, restores weights, optimizer
// state, scaler, EMA, RNG and progress (also mid-epoch) from it and keeps the metrics rows up to its step.
Session make_session(Config config, std::filesystem::path run_dir, RunLogs logs, const LoadedCheckpoint* resume);

// Applies run.threads (0: all cores) to LibTorch's intra-op pool.
void apply_threads(const RunConfig& run);

}  // namespace trainer
