#include "trainer/models/blocks/squeeze_excitation.hpp"

#include <torch/torch.h>

namespace trainer {

SqueezeExcitation::SqueezeExcitation(int64_t channels, int64_t squeeze_channels, Activation activation,
                                     Activation scale)
    : activation_(activation), scale_(scale) {
  fc1 = register_module("fc1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, squeeze_channels, 1)));
  fc2 = register_module("fc2", torch::nn::Conv2d(torch::nn::Conv2dOptions(squeeze_channels, channels, 1)));
}

torch::Tensor SqueezeExcitation::forward(torch::Tensor x) {
  // The mean rather than adaptive_avg_pool2d, whose CUDA backward has no deterministic kernel.
  torch::Tensor s = x.mean({2, 3}, /*keepdim=*/true);
  s = activate(fc2->forward(activate(fc1->forward(s), activation_)), scale_);
  return s * x;
}

std::string SqueezeExcitation::describe(LayerGraph& g, const std::string& x, const std::string& prefix) const {
  std::string s = describe_activation(g, g.conv(g.squeeze(x), prefix + ".fc1", *fc1), activation_);
  s = describe_activation(g, g.conv(s, prefix + ".fc2", *fc2), scale_);
  // The ONNX writer spells sigmoid and hardsigmoid as primitives, so no runtime fuses them with this Mul.
  return g.mul(s, x);
}

}  // namespace trainer
