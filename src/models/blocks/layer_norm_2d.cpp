#include "trainer/models/blocks/layer_norm_2d.hpp"

#include <torch/torch.h>

namespace trainer {

LayerNorm2d::LayerNorm2d(int64_t channels, double eps) : channels_(channels), eps_(eps) {
  weight = register_parameter("weight", torch::ones({channels}));
  bias = register_parameter("bias", torch::zeros({channels}));
}

torch::Tensor LayerNorm2d::forward(torch::Tensor x) {
  x = torch::layer_norm(x.permute({0, 2, 3, 1}), {channels_}, weight, bias, eps_);
  return x.permute({0, 3, 1, 2});
}

std::string LayerNorm2d::describe(LayerGraph& g, const std::string& x, const std::string& prefix) const {
  return g.layer_norm_2d(x, prefix, eps_);
}

}  // namespace trainer
