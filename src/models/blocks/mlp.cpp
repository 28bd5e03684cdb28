#include "trainer/models/blocks/mlp.hpp"

#include <torch/nn/init.h>
#include <torch/torch.h>

namespace trainer {

Mlp::Mlp(int64_t dim, int64_t hidden, double dropout) : dropout_(dropout) {
  expand_ = register_module("0", torch::nn::Linear(dim, hidden));
  project_ = register_module("3", torch::nn::Linear(hidden, dim));
  torch::NoGradGuard no_grad;
  for (auto* l : {&expand_, &project_}) {
    torch::nn::init::xavier_uniform_((*l)->weight);
    torch::nn::init::normal_((*l)->bias, 0, 1e-6);
  }
}

torch::Tensor Mlp::forward(const torch::Tensor& x) {
  const torch::Tensor h = torch::dropout(torch::gelu(expand_->forward(x)), dropout_, is_training());
  return torch::dropout(project_->forward(h), dropout_, is_training());
}

}  // namespace trainer
