// Gradient-norm clipping that never waits for the device. LibTorch's C++ clip_grad_norm_ returns the norm as a
// double, which costs a host sync every optimizer step on CUDA; this returns it as a device scalar, and the
// caller reads it only when it logs (TrainMeter) — the same arithmetic as torch.nn.utils.clip_grad_norm_:
// total = ||(||g_1||, ..., ||g_n||)||_2, every gradient scaled by min(1, max_norm / (total + 1e-6)).
//   torch::Tensor norm = clip_grad_norm(model.parameters(), 1.0);   // float32 scalar on the gradients' device
#pragma once

#include <torch/types.h>

#include <vector>

namespace trainer {

// Scales the defined gradients of `parameters` in place so their total L2 norm is at most `max_norm`, and
// returns the total norm before clipping (undefined when no parameter has a gradient). A non-finite norm
// turns the gradients into NaN, as PyTorch's does; the training loop reports it at its next check.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace trainer
