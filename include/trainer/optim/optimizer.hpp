// The optimizer factory (one entry per optim.name) and the per-step learning-rate setter.
//   auto opt = make_optimizer(config.optim, model->parameters());
//   set_learning_rate(*opt, lr_at(config.schedule, config.optim.lr, step, length));
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& optim,
                                                        const std::vector<torch::Tensor>& parameters);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace trainer
