// Batches for LibTorch's DataLoader: each worker writes its samples straight into one uint8 NHWC tensor
// (pinned when the model is on CUDA); normalisation happens later, on the device (see to_model_input).
// A sample that cannot be read is recorded in `bad`; for training its slot is filled with another sample,
// chosen by (seed, epoch, index), so batches stay full and deterministic; for evaluation (BadSlot::drop) the
// slot is zeroed and labelled kDroppedLabel, so that metrics leave it out instead of counting a duplicate.
// Without `bad` the error propagates.
//   BatchDataset ds(source, /*pin_memory=*/false, {seed, epoch}, bad);
//   auto loader = make_loader(ds, EpochSampler({...}), batch_size, /*workers=*/2, /*prefetch=*/4);
//   for (ImageBatch& b : *loader) { auto x = to_model_input(b.images, norm); ... }
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "trainer/data/bad_samples.hpp"
#include "trainer/data/epoch_sampler.hpp"
#include "trainer/data/image_source.hpp"

namespace trainer {

struct ImageBatch {
  torch::Tensor images;  // uint8 [B, H, W, C]
  torch::Tensor labels;  // int64 [B]
};

// Label of a slot whose image could not be read under BadSlot::drop.
constexpr int64_t kDroppedLabel = -1;
enum class BadSlot { replace, drop };

class BatchDataset : public torch::data::datasets::BatchDataset<BatchDataset, ImageBatch, std::vector<size_t>> {
 public:
  BatchDataset(std::shared_ptr<const ImageSource> source, bool pin_memory, ReadContext context = {},
               std::shared_ptr<BadSamples> bad = nullptr, BadSlot bad_slot = BadSlot::replace);
  ImageBatch get_batch(std::vector<size_t> indices) override;
  torch::optional<size_t> size() const override { return source_->size(); }

 private:
  std::shared_ptr<const ImageSource> source_;
  ImageShape shape_;
  bool pin_memory_;
  ReadContext context_;
  std::shared_ptr<BadSamples> bad_;
  BadSlot bad_slot_;
};

using Loader = torch::data::StatelessDataLoader<BatchDataset, EpochSampler>;

// `workers` threads keep up to `prefetch` batches ready ahead of the training step; 0 workers prepare them on
// the calling thread.
std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers,
                                    size_t prefetch = 4);

// Per-channel normalisation constants, ready on the model's device.
struct Normalization {
  torch::Tensor mean;  // float [1, C, 1, 1], 0..255 scale
  torch::Tensor inv_std;
};
Normalization make_normalization(const std::vector<double>& mean, const std::vector<double>& std, int64_t channels,
                                 const torch::Device& device);

// uint8 NHWC on any device -> normalized float NCHW on `norm`'s device, contiguous or channels_last.
torch::Tensor to_model_input(const torch::Tensor& images, const Normalization& norm, bool channels_last);

}  // namespace trainer
