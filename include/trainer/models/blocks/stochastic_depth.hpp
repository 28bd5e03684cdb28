// Stochastic depth ("row" mode, torchvision.ops.stochastic_depth): in training, each sample's residual branch is
// zeroed with probability p and the kept ones scaled by 1 / (1 - p); in eval mode the branch passes unchanged.
// The draw is torchvision's call (bernoulli_ on an [N, 1, 1, 1] tensor of the input's type and device) from
// LibTorch's default generator, which the checkpoint saves and --resume restores (every rank's, in a data-parallel
// run): a resumed run drops the same samples as one that never stopped, and a seeded run the same as torchvision.
//   result = stochastic_depth(branch, 0.1, is_training()) + input;
#pragma once

#include <torch/types.h>

namespace trainer {

torch::Tensor stochastic_depth(const torch::Tensor& x, double p, bool training);

// The per-block probabilities of a family: `rate` * depth position, torchvision's linear rule.
//   EfficientNet: rate * i / blocks          ConvNeXt: rate * i / (blocks - 1)
double depth_rate(double rate, int64_t index, int64_t denominator);

}  // namespace trainer
