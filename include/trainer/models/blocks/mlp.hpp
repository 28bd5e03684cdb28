// torchvision's MLP as ViT's MLPBlock and Swin's blocks use it: Linear "0", exact GELU, Dropout, Linear "3",
// Dropout (the indices 1, 2 and 4 hold no weights), on the last dimension of tokens [..., D]. Initialised as both
// do: Xavier-uniform weights, N(0, 1e-6) biases (Swin then re-initialises every Linear of the model).
//   auto mlp = std::make_shared<Mlp>(768, 3072, 0.0);   y = mlp->forward(x);
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

namespace trainer {

class Mlp final : public torch::nn::Module {
 public:
  Mlp(int64_t dim, int64_t hidden, double dropout);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  double dropout_;
  torch::nn::Linear expand_{nullptr}, project_{nullptr};
};

}  // namespace trainer
