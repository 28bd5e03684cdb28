// Batches for LibTorch's DataLoader: each worker writes its samples straight into one uint8 NHWC tensor
// (pinned when the model is on CUDA); normalisation happens later, on the device (see to_model_input).
//   BatchDataset ds(source, /*pin_memory=*/false);
//   auto loader = make_loader(ds, EpochSampler({...}), /*workers=*/2);
//   for (ImageBatch& b : *loader) { auto x = to_model_input(b.images, norm); ... }
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "trainer/data/epoch_sampler.hpp"
#include "trainer/data/image_source.hpp"

namespace trainer {

struct ImageBatch {
  torch::Tensor images;  // uint8 [B, H, W, C]
  torch::Tensor labels;  // int64 [B]
};

class BatchDataset : public torch::data::datasets::BatchDataset<BatchDataset, ImageBatch, std::vector<size_t>> {
 public:
  BatchDataset(std::shared_ptr<const ImageSource> source, bool pin_memory);
  ImageBatch get_batch(std::vector<size_t> indices) override;
  torch::optional<size_t> size() const override { return source_->size(); }

 private:
  std::shared_ptr<const ImageSource> source_;
  ImageShape shape_;
  bool pin_memory_;
};

using Loader = torch::data::StatelessDataLoader<BatchDataset, EpochSampler>;

// `workers` threads prepare batches ahead of the training step; 0 prepares them on the calling thread.
std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers);

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
