// The ResNets' BatchNorm2d: torchvision's layer (the same parameters, buffers and names), which in a data-parallel
// run with model.sync_batchnorm takes its batch statistics over every rank's images, as PyTorch's SyncBatchNorm:
// mean and variance of the global batch, the running statistics updated with them (the unbiased variance over
// all N images), and a backward pass whose input gradient holds the other ranks' terms. 2 ranks x 16 images
// then train as 1 x 32. Without a sum over ranks, or in eval mode, it is LibTorch's BatchNorm2d exactly.
//   SyncBatchNorm2d bn(64);                                        // as torch::nn::BatchNorm2d(64), bit for bit
//   sync_batch_norm(model, [&](const auto& t) { group.all_reduce_sum(t); });
#pragma once

#include <torch/nn/cloneable.h>

#include <functional>
#include <vector>

namespace trainer {

// Sums each tensor over the ranks, in place (Collectives::all_reduce_sum).
using SumOverRanks = std::function<void(const std::vector<torch::Tensor>&)>;

// Affine, with running statistics; momentum 0.1 and eps 1e-5 by default as torchvision's BatchNorm2d (the families
// that set others: EfficientNet B5-B7 and MobileNetV3 1e-3 / 0.01, EfficientNetV2 eps 1e-3). Its own module rather
// than a subclass of torch::nn::BatchNorm2dImpl, whose base-class methods LibTorch does not export to subclasses.
class SyncBatchNorm2dImpl : public torch::nn::Cloneable<SyncBatchNorm2dImpl> {
 public:
  explicit SyncBatchNorm2dImpl(int64_t features, double eps = 1e-5, double momentum = 0.1);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& input);
  void sync_over(SumOverRanks sum) { sum_ = std::move(sum); }
  void pretty_print(std::ostream& stream) const override;
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }

  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  int64_t features_;
  double eps_, momentum_;
  SumOverRanks sum_;  // empty: per-rank statistics
};
TORCH_MODULE(SyncBatchNorm2d);

// Gives every SyncBatchNorm2d in `model` the sum over ranks (an empty function takes it away); returns how many.
int64_t sync_batch_norm(torch::nn::Module& model, const SumOverRanks& sum);

}  // namespace trainer
