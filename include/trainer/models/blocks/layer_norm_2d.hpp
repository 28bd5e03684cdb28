// ConvNeXt's LayerNorm2d: LayerNorm over the channels of each pixel of an [N, C, H, W] tensor (torchvision permutes
// to channels-last, normalises the last dimension and permutes back; so does this), parameters weight and bias [C].
#pragma once

#include "trainer/models/blocks/block.hpp"

namespace trainer {

class LayerNorm2d final : public Block {
 public:
  LayerNorm2d(int64_t channels, double eps);
  torch::Tensor forward(torch::Tensor x) override;
  std::string describe(LayerGraph& graph, const std::string& x, const std::string& prefix) const override;

  torch::Tensor weight, bias;

 private:
  int64_t channels_;
  double eps_;
};

}  // namespace trainer
