// torchvision's EfficientNet (B0-B7) and EfficientNetV2 (S, M, L), layer for layer: a stem, stages of MBConv (and,
// in V2, FusedMBConv) blocks at features.1..N whose block.K indices shift when a block has no expansion,
// squeeze-excitation from the block's input channels (SiLU, sigmoid), widths by _make_divisible and depths by
// ceil of the multipliers, stochastic depth rate * i / blocks, the BatchNorm settings of each variant, and the
// classifier 0 (Dropout) 1 (Linear); the same names, shapes and initialisation.
//   ClassifierPtr net = build_model(model_config, {224, 224, 3});   // models/factory.hpp: model.arch
#pragma once

#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>
#include <vector>

#include "trainer/models/blocks/block.hpp"
#include "trainer/models/blocks/conv_norm_act.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

// One stage, as a row of Table 1 of the EfficientNet paper or Table 4 of EfficientNetV2's (before the multipliers).
struct MBConvStage {
  bool fused = false;  // FusedMBConv (V2's early stages): the expansion and depthwise convolutions as one
  double expand_ratio = 1;
  int64_t kernel = 3, stride = 1, in = 0, out = 0, layers = 1;
};

struct EfficientNetSpec {
  std::vector<MBConvStage> stages;
  double width_mult = 1, depth_mult = 1;  // V1's compound scaling (1 for V2)
  int64_t last_channel = 0;               // 0: four times the last stage's width (V1)
  BatchNormSettings norm;
  double dropout = 0.2;           // torchvision's default before the classifier
  double stochastic_depth = 0.2;  // the rate of the deepest block
};

// efficientnet_b0 .. efficientnet_b7, efficientnet_v2_s, _m, _l.
const std::vector<std::pair<std::string, EfficientNetSpec>>& efficientnet_specs();

class EfficientNet final : public Classifier {
 public:
  EfficientNet(const EfficientNetSpec& spec, int64_t in_channels, int64_t num_classes, double dropout,
               double stochastic_depth);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;

 private:
  std::shared_ptr<BlockSequence> features;
  torch::nn::Sequential classifier{nullptr};
  torch::nn::Linear head{nullptr};
};

}  // namespace trainer
