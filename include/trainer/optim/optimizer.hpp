// The optimizer factory (one entry per optim.name) and the per-step learning-rate setter.
// Parameters come in two groups, as in the torchvision and timm recipes: conv and linear weights get
// optim.weight_decay; normalisation weights and all biases (every parameter of dimension <= 1) get none,
// unless optim.decay_norm_and_bias is set.
//   auto opt = make_optimizer(config.optim, *model);
//   set_learning_rate(*opt, lr_at(config.schedule, base_learning_rate(config), step, length));
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>

#include "trainer/config/config.hpp"

namespace trainer {

struct ParameterSplit {
  std::vector<torch::Tensor> decay;
  std::vector<torch::Tensor> no_decay;
};
ParameterSplit split_for_weight_decay(const torch::nn::Module& model, bool decay_norm_and_bias);

// Starts at optim.lr; fit() sets each step's rate.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim, const torch::nn::Module& model);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace trainer
