#include "trainer/engine/grad_clip.hpp"

#include <torch/torch.h>

namespace trainer {

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  std::vector<torch::Tensor> grads;
  grads.reserve(parameters.size());
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return {};
  // One multi-tensor kernel per dtype and device on CUDA; a loop of norms on the CPU.
  const auto norms = torch::_foreach_norm(grads, 2);
  const auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  const auto coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (auto& g : grads) g.mul_(coefficient);
  return total;
}

}  // namespace trainer
