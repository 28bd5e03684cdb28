#include "trainer/optim/optimizer.hpp"

#include <torch/optim/sgd.h>

#include "trainer/util/error.hpp"

namespace trainer {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim,
                                                        const std::vector<torch::Tensor>& parameters) {
  switch (optim.name) {
    case OptimizerKind::sgd:
      if (optim.nesterov && optim.momentum <= 0)
        throw ConfigError("optim.nesterov: Nesterov momentum needs optim.momentum > 0, got " +
                          std::to_string(optim.momentum));
      return std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(optim.lr)
                                                                 .momentum(optim.momentum)
                                                                 .nesterov(optim.nesterov)
                                                                 .weight_decay(optim.weight_decay));
  }
  throw ConfigError("optim.name: unsupported optimizer");
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace trainer
