#include "trainer/optim/optimizer.hpp"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "trainer/util/error.hpp"

namespace trainer {

ParameterSplit split_for_weight_decay(const torch::nn::Module& model, bool decay_norm_and_bias) {
  ParameterSplit split;
  for (const auto& p : model.parameters())
    (decay_norm_and_bias || p.dim() > 1 ? split.decay : split.no_decay).push_back(p);
  return split;
}

namespace {

// Two groups with their own options; an empty group is left out (LibTorch refuses none).
template <class Options>
std::vector<torch::optim::OptimizerParamGroup> groups(ParameterSplit split, const Options& options, double decay) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  auto with_decay = [&](double wd) {
    auto o = std::make_unique<Options>(options);
    o->weight_decay(wd);
    return o;
  };
  if (!split.decay.empty()) out.emplace_back(std::move(split.decay), with_decay(decay));
  if (!split.no_decay.empty()) out.emplace_back(std::move(split.no_decay), with_decay(0.0));
  return out;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim, const torch::nn::Module& model) {
  auto split = split_for_weight_decay(model, optim.decay_norm_and_bias);
  switch (optim.name) {
    case OptimizerKind::sgd: {
      if (optim.nesterov && optim.momentum <= 0)
        throw ConfigError("optim.nesterov: Nesterov momentum needs optim.momentum > 0, got " +
                          std::to_string(optim.momentum));
      const auto options = torch::optim::SGDOptions(optim.lr).momentum(optim.momentum).nesterov(optim.nesterov);
      return std::make_unique<torch::optim::SGD>(groups(std::move(split), options, optim.weight_decay), options);
    }
    case OptimizerKind::adamw: {
      const auto options =
          torch::optim::AdamWOptions(optim.lr).betas({optim.betas.at(0), optim.betas.at(1)}).eps(optim.eps);
      return std::make_unique<torch::optim::AdamW>(groups(std::move(split), options, optim.weight_decay), options);
    }
  }
  throw ConfigError("optim.name: unsupported optimizer");
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace trainer
