// One checkpoint = one file (LibTorch's serialize archive) holding everything a run needs to continue
// exactly, also mid-epoch: format version, resolved config, progress (epoch, step, batch within the epoch),
// best metric, loss-scaler state, class names, model, optimizer, EMA weights, CPU and CUDA RNG states, and a
// CRC-32C per weight. Opening one checks every byte against its zip record's CRC-32 (LibTorch does not).
//   save_checkpoint(dir / "last.pt", meta, {*model, *optimizer, ema});      // atomic; refuses a non-finite model
//   const LoadedCheckpoint ck("runs/x/last.pt"); ck.restore_model(*model);
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/data/pixels/image_shape.hpp"

namespace trainer {

constexpr int64_t kCheckpointFormatVersion = 1;

// Where a run stands: what it has done so far, and where it continues.
struct TrainState {
  int64_t epoch = 0;           // completed epochs
  int64_t step = 0;            // completed optimizer steps
  int64_t batch_in_epoch = 0;  // batches of epoch `epoch` (0-based) already trained: > 0 after a mid-epoch stop
  std::optional<double> best;  // best value of train.best_metric so far; none before the first evaluation
  // Early stopping: the best value of the watched metric so far, and the evaluations since it last improved.
  std::optional<double> watched_best;
  int64_t evals_without_improvement = 0;
};

// Whether a metadata key must be in a checkpoint; optional keys were added after format version 1 was first
// written and take their default when absent.
enum class MetaKey { required, optional };

// A checkpoint's metadata is the run's TrainState plus what it takes to rebuild the run around it.
struct CheckpointMeta : TrainState {
  nlohmann::json config;  // the resolved config of the run
  std::vector<std::string> class_names;
  int64_t train_images = 0;  // the training split's size (0: a file from before it was recorded)
  ImageShape input;          // training image shape; lets export rebuild the model without the data
  nlohmann::json scaler;  // LossScaler::state(), null without one
  int64_t ema_updates = 0;

  // The metadata's JSON keys, declared once for writing and reading.
  template <class V>
  void visit(V& v) {
    v.field("config", config, MetaKey::required);
    v.field("epoch", epoch, MetaKey::required);
    v.field("step", step, MetaKey::required);
    v.field("batch_in_epoch", batch_in_epoch, MetaKey::optional);
    v.field("best", best, MetaKey::optional);  // older files: best_top1, read by the loader
    v.field("class_names", class_names, MetaKey::required);
    v.field("train_images", train_images, MetaKey::optional);
    v.field("input", input, MetaKey::optional);  // absent before export existed
    v.field("scaler", scaler, MetaKey::optional);
    v.field("ema_updates", ema_updates, MetaKey::optional);
    v.field("watched_best", watched_best, MetaKey::optional);
    v.field("evals_without_improvement", evals_without_improvement, MetaKey::optional);
  }
};

// Every rank's generator states in a data-parallel run (distributed/rank_generators): row r is rank r's. `cuda` holds
// each rank's own device's state and is undefined on the CPU.
struct GeneratorRows {
  torch::Tensor cpu, cuda;
  int64_t ranks() const { return cpu.defined() ? cpu.size(0) : 0; }
};

struct CheckpointModules {
  const torch::nn::Module& model;
  const torch::optim::Optimizer& optimizer;
  const torch::nn::Module* ema = nullptr;  // the EMA weights, when train.ema is on
};

// Writes atomically: on any failure the previous file at `path` is left as it was.
// Throws TrainError, writing nothing, when a parameter or buffer holds inf or NaN. The writing process's own
// generator states are always saved; `ranks` adds every rank's in a data-parallel run.
void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta, const CheckpointModules& modules,
                     const GeneratorRows& ranks = {});

// The step a checkpoint file says it holds, read from its metadata record alone (kilobytes, not the weights), to
// order a run folder's files before any is opened; nullopt when the file does not show it (not a checkpoint,
// damaged, another layout). Nothing is checked: LoadedCheckpoint is what verifies a file.
std::optional<int64_t> peek_checkpoint_step(const std::filesystem::path& path);

class LoadedCheckpoint {
 public:
  explicit LoadedCheckpoint(const std::filesystem::path& path);  // throws CheckpointError naming the file

  const std::filesystem::path& path() const { return path_; }
  const CheckpointMeta& meta() const { return meta_; }
  // Whether the file names its weights' checksums (CRC-32C per tensor), so that a damaged file is refused
  // naming the weight; without them (older files) the damaged record is named. Every file's bytes are checked
  // against its records' CRC-32 when it is opened, either way.
  bool has_checksums() const { return checksums_.is_object(); }
  // Both throw CheckpointError when names or shapes do not match the module built from the config.
  void restore_model(torch::nn::Module& model) const;
  void restore_optimizer(torch::optim::Optimizer& optimizer) const;
  void restore_rng() const;
  // Every rank's generator states; none for a one-process run or one saved after a failed step.
  std::optional<GeneratorRows> rank_generators() const;
  // False when the checkpoint holds no EMA weights (the run had train.ema off).
  bool restore_ema(torch::nn::Module& ema) const;

 private:
  // A damaged record as the weight it holds, where the checksums tell.
  std::string damaged_part(const std::string& record) const;

  std::filesystem::path path_;
  CheckpointMeta meta_;
  nlohmann::json checksums_;  // "model/<name>" and "ema/<name>" -> CRC-32C; not an object in older files
  std::shared_ptr<torch::serialize::InputArchive> archive_;
};

}  // namespace trainer
