// torchvision's SqueezeExcitation: each channel scaled by scale(fc2(act(fc1(mean over the image)))), fc1 and fc2
// being 1x1 convolutions with bias. EfficientNet: SiLU and sigmoid; MobileNetV3: ReLU and hardsigmoid; RegNet:
// ReLU and sigmoid.
#pragma once

#include <torch/nn/modules/conv.h>

#include "trainer/models/blocks/activation.hpp"
#include "trainer/models/blocks/block.hpp"

namespace trainer {

class SqueezeExcitation final : public Block {
 public:
  SqueezeExcitation(int64_t channels, int64_t squeeze_channels, Activation activation, Activation scale);
  torch::Tensor forward(torch::Tensor x) override;
  std::string describe(LayerGraph& graph, const std::string& x, const std::string& prefix) const override;

 private:
  torch::nn::Conv2d fc1{nullptr}, fc2{nullptr};
  Activation activation_, scale_;
};

}  // namespace trainer
