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
#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/device/decode_choice.hpp"
#include "trainer/data/device/model_input.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/sources/bad_samples.hpp"
#include "trainer/data/sources/image_source.hpp"
#include "trainer/distributed/collectives.hpp"
#include "trainer/distributed/grad_reducer.hpp"
#include "trainer/engine/loss_scaler.hpp"
#include "trainer/engine/start_weights.hpp"
#include "trainer/engine/step.hpp"
#include "trainer/engine/weight_ema.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/metrics_sink.hpp"
#include "trainer/models/classifier.hpp"
#include "trainer/models/frozen_layers.hpp"
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
  std::filesystem::path run_dir;       // empty: nothing is written (a benchmark, or a rank other than 0)
  std::shared_ptr<Collectives> group;  // data-parallel runs: the ranks' collectives; null in a single process
  World world;                         // this process's rank (one process: rank 0 of 1)
  torch::Device device{torch::kCPU};
  RunLogs logs;
  std::shared_ptr<const ImageSource> train_data;
  std::shared_ptr<const ImageSource> eval_data;
  std::shared_ptr<BadSamples> train_bad;  // unreadable images met so far, per split
  std::shared_ptr<BadSamples> eval_bad;
  bool drop_last = false;  // data.drop_last resolved for this model (data/last_batch.hpp)
  RunDecoder decode;       // data.decode resolved for this device and augmentation, and the decoder of a GPU decode
  ClassifierPtr model;
  KernelLayout layout;  // model.channels_last resolved and self-checked for this device
  FrozenLayers frozen;  // model.freeze, lifted after train.unfreeze_at_epoch epochs
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<double> lr_mult;           // per optimizer group (optim.lr_mult)
  std::unique_ptr<GradReducer> reducer;  // data-parallel runs: averages the gradients over the ranks
  Normalization norm;                    // data.mean / data.std on the model's device
  torch::Tensor input_buffer;            // CPU runs: the float input, written again each step (to_model_input)
  StepOptions step_options;              // precision, accumulation, clipping (the counter is state.step)
  LossScaler scaler;                     // enabled for float16 autocast
  std::unique_ptr<WeightEma> ema;        // with train.ema.enabled
  TrainState state;
  std::unique_ptr<MetricsSink> metrics;
};

// Sets threads and seeds, loads the data and builds model, optimizer, loss scaler and EMA. A new run takes
// `start`'s weights (model.weights located by locate_start_weights) when given. With `resume`, restores weights,
// optimizer state, scaler, EMA, RNG and progress (also mid-epoch) from it and keeps the metrics rows up to its step.
// With `group` (data-parallel), every rank checks that it has rank 0's config, takes cuda:LOCAL_RANK on CUDA,
// and starts from rank 0's weights; gradients are then averaged by a GradReducer.
Session make_session(Config config, std::filesystem::path run_dir, RunLogs logs, const LoadedCheckpoint* resume,
                     std::shared_ptr<Collectives> group = nullptr, const StartWeights& start = {});

// Data-parallel runs: every rank takes rank 0's BatchNorm statistics (model and EMA), as DDP's buffer broadcast
// does, so evaluation shards see one model. A no-op in a single process.
void sync_buffers(Session& session);

// The session's training loader for `epochs` epochs from `epoch`, the first from batch `start_batch` on: its data,
// seed, drop_last rule, bad-image record, pinned memory on CUDA and this rank's share.
std::unique_ptr<Loader> make_train_loader(const Session& session, int64_t epoch, size_t start_batch = 0,
                                          int64_t epochs = 1);

// The model in training mode, with model.freeze's BatchNorm layers kept in eval mode while they are frozen.
void train_mode(Session& session);

// model.freeze for the epoch the session is at (state.epoch): frozen until train.unfreeze_at_epoch epochs have run,
// then every layer trains (said once in the log). Data-parallel runs rebuild the gradient buckets over the
// parameters that now train. Returns whether anything changed.
bool apply_freeze_schedule(Session& session);

// Applies run.threads (0: all cores) to LibTorch's intra-op pool.
void apply_threads(const RunConfig& run);

}  // namespace trainer
