// The optimizer factory (one entry per optim.name) and the per-step learning-rate setter.
// Parameters come in groups, as in the torchvision and timm recipes: conv and linear weights get optim.weight_decay;
// normalisation weights and all biases (every parameter of dimension <= 1) get none, unless
// optim.decay_norm_and_bias is set, nor do those optim.no_decay names; and each learning-rate multiplier (optim.lr_mult
// times optim.layer_decay's for the parameter's block) has its own pair of groups.
//   auto opt = make_optimizer(config.optim, *model);
//   const auto mult = lr_multipliers(config.optim, *model);   // per group, in the optimizer's order
//   set_learning_rate(*opt, lr_at(config.schedule, base_learning_rate(config), step, length), mult);
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>

#include "trainer/config/config.hpp"

namespace trainer {

struct ParameterSplit {
  std::vector<torch::Tensor> decay;
  std::vector<torch::Tensor> no_decay;
};
ParameterSplit split_for_weight_decay(const torch::nn::Module& model, bool decay_norm_and_bias);

// The block a parameter belongs to, for optim.layer_decay (a model-table row's block_of): the parameter's block in
// the model's depth order ("layer2.1"), or "" for the classifier. Blocks are numbered by their first parameter.
using BlockOf = std::function<std::string(const std::string& parameter)>;

// One optimizer group: its parameters, weight decay and learning-rate multiplier.
struct ParamGroup {
  std::vector<torch::Tensor> parameters;
  double weight_decay = 0;
  double lr_mult = 1;
};
// The groups in optimizer order: per multiplier (in order of the first parameter that takes it), the decayed
// parameters, then the others; empty groups left out. Every parameter is in one, frozen ones included, so the
// optimizer's layout (and a checkpoint's state) is the same before and after an unfreeze. Throws ConfigError for a
// negative multiplier, an optim.lr_mult or optim.no_decay pattern that matches no parameter, or optim.layer_decay
// without `block_of`.
std::vector<ParamGroup> param_groups(const OptimConfig& optim, const torch::nn::Module& model,
                                     const BlockOf& block_of = {});

// Starts at optim.lr (times each group's multiplier); fit() sets each step's rate.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim, const torch::nn::Module& model,
                                                        const BlockOf& block_of = {});

// Each group's learning-rate multiplier, in make_optimizer's group order.
std::vector<double> lr_multipliers(const OptimConfig& optim, const torch::nn::Module& model,
                                   const BlockOf& block_of = {});

// Sets every group's rate to lr times its multiplier (`lr_mult` empty: all 1).
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& lr_mult = {});

}  // namespace trainer
