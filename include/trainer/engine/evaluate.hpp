// Evaluation over a whole split with exact counts: loss, top-1 and top-5 (top-k for fewer than 5 classes).
// Unreadable images (with EvalOptions::bad) are left out of the figures and counted in `dropped`. On request it
// also fills the confusion matrix and hands each batch's top-k predictions to a callback (`trainer eval`).
//   EvalResult r = evaluate(*model, eval_source, {256, 2, device, norm});
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "trainer/config/config.hpp"
#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/device/model_input.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/sources/image_source.hpp"
#include "trainer/distributed/collectives.hpp"
#include "trainer/engine/confusion.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct EvalOptions {
  size_t batch_size = 256;
  size_t workers = 0;
  torch::Device device{torch::kCPU};
  Normalization norm;
  bool channels_last = false;
  std::optional<at::ScalarType> autocast;  // forward under autocast in this dtype (train.amp.eval)
  size_t prefetch = 4;
  std::shared_ptr<BadSamples> bad;  // null: an unreadable image is an error
  bool confusion = false;           // fill EvalResult::confusion (C x C counts: `trainer eval`, not every epoch)
  Collectives* group = nullptr;     // data-parallel: each rank evaluates its shard; the figures are the sums
  // data.decode cuda: the GPU decoder the JPEGs are left encoded for (null: the workers decode them)
  std::shared_ptr<BatchDecoder> decoder;
  // A loader made in advance by make_evaluation_loader(), already reading while training finished its epoch;
  // null: evaluate() makes its own.
  std::shared_ptr<Loader> loader;
  // Called after each batch with the index of its first sample (samples are in order), the top-k classes
  // and softmax probabilities (int64 and float [B, k], on the CPU) and the labels (kDroppedLabel: unreadable).
  std::function<void(size_t first, const torch::Tensor& classes, const torch::Tensor& probs,
                     const torch::Tensor& labels)>
      on_batch;
};

struct EvalResult {
  int64_t count = 0;    // images in the figures
  int64_t dropped = 0;  // unreadable images left out of them
  int64_t read = 0;     // count + dropped
  int64_t correct1 = 0;
  int64_t correct5 = 0;
  double loss_sum = 0.0;  // summed cross-entropy (no label smoothing)
  double seconds = 0.0;
  torch::Tensor confusion;  // with EvalOptions::confusion: int64 [C, C] on the CPU, rows true class, columns predicted
  // Per class: its images and how many of them were predicted right (top-1), from every evaluation: 2 x C counts,
  // what the balanced accuracy needs, where the matrix would take C x C (3.2 GB at 20,000 classes).
  std::vector<ClassScore> classes;

  double loss() const { return count ? loss_sum / static_cast<double>(count) : 0.0; }
  double top1() const { return count ? static_cast<double>(correct1) / static_cast<double>(count) : 0.0; }
  double top5() const { return count ? static_cast<double>(correct5) / static_cast<double>(count) : 0.0; }
};

// Batch size, workers, prefetch, normalisation and autocast from the config, for a model on `device` in the
// memory format resolve_layout() chose.
EvalOptions eval_options(const Config& config, const torch::Device& device, bool channels_last,
                         std::shared_ptr<BadSamples> bad);

// The loader evaluate() reads `data` through with these options (this rank's shard in data-parallel runs): make
// it ahead of time to have the first batches ready when evaluation starts.
std::unique_ptr<Loader> make_evaluation_loader(std::shared_ptr<const ImageSource> data, const EvalOptions& options);

// Puts the model in eval mode; the caller switches it back to train mode.
EvalResult evaluate(Classifier& model, std::shared_ptr<const ImageSource> data, const EvalOptions& options);

}  // namespace trainer
