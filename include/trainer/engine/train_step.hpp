// One optimizer step: forward, cross-entropy (with label smoothing), backward, update. fit() and
// `trainer bench` share it, so the benchmark times exactly what training runs.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include "trainer/models/classifier.hpp"

namespace trainer {

struct StepResult {
  torch::Tensor logits;  // detached
  torch::Tensor loss;    // detached scalar; reading it waits for the device, so callers accumulate instead
};

StepResult train_step(Classifier& model, torch::optim::Optimizer& optimizer, const torch::Tensor& images,
                      const torch::Tensor& labels, double label_smoothing);

}  // namespace trainer
