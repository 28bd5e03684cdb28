// torchvision's ConvNeXt (tiny, small, base, large), layer for layer: features.0 a 4x4 stride-4 convolution and
// LayerNorm2d (eps 1e-6); stages at features.1, 3, 5, 7 and downsampling (LayerNorm2d, 2x2 stride-2 convolution)
// at 2, 4, 6; each CNBlock its layer_scale [C, 1, 1] and block.0 (depthwise 7x7), block.2 (LayerNorm), block.3 and
// block.5 (Linear), exact GELU, stochastic depth rate * i / (blocks - 1); classifier.0 LayerNorm2d, classifier.2
// Linear; the same names, shapes and initialisation (truncated normal, std 0.02).
//   ClassifierPtr net = build_model(model_config, {224, 224, 3});   // models/factory.hpp: model.arch
#pragma once

#include <torch/nn/modules/linear.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "trainer/models/blocks/block.hpp"
#include "trainer/models/blocks/layer_norm_2d.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct ConvNeXtSpec {
  std::array<int64_t, 4> widths{}, depths{};
  double stochastic_depth = 0;  // torchvision's default rate for the variant
};

const std::vector<std::pair<std::string, ConvNeXtSpec>>& convnext_specs();

class ConvNeXt final : public Classifier {
 public:
  ConvNeXt(const ConvNeXtSpec& spec, int64_t in_channels, int64_t num_classes, double dropout, double stochastic_depth);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;

 private:
  std::shared_ptr<BlockSequence> features;
  std::shared_ptr<torch::nn::Module> classifier;
  std::shared_ptr<LayerNorm2d> norm;
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace trainer
