// One checkpoint = one file (LibTorch's serialize archive) holding everything a run needs to continue
// exactly: format version, resolved config, progress, best metric, class names, model, optimizer, RNG.
//   save_checkpoint(dir / "last.pt", meta, *model, *optimizer);            // atomic; refuses a non-finite model
//   auto ck = load_checkpoint("runs/x/last.pt"); ck.restore_model(*model);
#pragma once

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "trainer/data/image_shape.hpp"

namespace trainer {

constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  nlohmann::json config;                 // the resolved config of the run
  int64_t epoch = 0;                     // completed epochs
  int64_t step = 0;                      // completed optimizer steps
  double best_top1 = -1.0;               // best eval top-1 so far; -1 before the first evaluation
  std::vector<std::string> class_names;
  ImageShape input;                      // training image shape; lets export rebuild the model without the data
};

// Writes atomically: on any failure the previous file at `path` is left as it was.
// Throws TrainError, writing nothing, when a parameter or buffer holds inf or NaN.
void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta, const torch::nn::Module& model,
                     const torch::optim::Optimizer& optimizer);

// Copies a checkpoint file (for best.pt after last.pt), with the same atomicity.
void copy_checkpoint(const std::filesystem::path& from, const std::filesystem::path& to);

class LoadedCheckpoint {
 public:
  explicit LoadedCheckpoint(const std::filesystem::path& path);  // throws CheckpointError naming the file

  const std::filesystem::path& path() const { return path_; }
  const CheckpointMeta& meta() const { return meta_; }
  // Both throw CheckpointError when names or shapes do not match the module built from the config.
  void restore_model(torch::nn::Module& model) const;
  void restore_optimizer(torch::optim::Optimizer& optimizer) const;
  void restore_rng() const;

 private:
  std::filesystem::path path_;
  CheckpointMeta meta_;
  std::shared_ptr<torch::serialize::InputArchive> archive_;
};

}  // namespace trainer
