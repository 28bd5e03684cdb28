// nn.MultiheadAttention as torchvision's ViT uses it: self-attention over tokens [N, L, D] (batch first), one
// projection for queries, keys and values (in_proj_weight [3D, D], in_proj_bias [3D]) and out_proj, under
// PyTorch's names; attention through compat::attention (LibTorch's fused kernel where it has one).
//   auto a = std::make_shared<MultiheadAttention>(768, 12, 0.0);   y = a->forward(x);   // x, y: [N, L, 768]
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

namespace trainer {

class MultiheadAttention final : public torch::nn::Module {
 public:
  MultiheadAttention(int64_t dim, int64_t heads, double dropout);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor in_proj_weight, in_proj_bias;
  torch::nn::Linear out_proj{nullptr};

 private:
  int64_t heads_;
  double dropout_;
};

}  // namespace trainer
