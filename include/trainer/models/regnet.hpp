// torchvision's RegNet X and Y (400MF to 128GF), layer for layer: stem, trunk_output.block{1..4}.block{S}-{i}
// (hyphenated names) with proj, f.a, f.b (grouped 3x3), f.se (Y), f.c, and fc; the same names, shapes and
// initialisation. The stage widths, depths and group widths are the values torchvision's
// BlockParams.from_init_params computes for each variant (listed with their init parameters in regnet.cpp).
//   ClassifierPtr net = build_model(model_config, {224, 224, 3});   // models/factory.hpp: model.arch
#pragma once

#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "trainer/models/blocks/block.hpp"
#include "trainer/models/blocks/conv_norm_act.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct RegNetSpec {
  std::array<int64_t, 4> depths{}, widths{}, group_widths{};
  bool squeeze_excitation = false;  // RegNetY: se_ratio 0.25 of the block's input width
};

const std::vector<std::pair<std::string, RegNetSpec>>& regnet_specs();

class RegNet final : public Classifier {
 public:
  RegNet(const RegNetSpec& spec, int64_t in_channels, int64_t num_classes, double dropout);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;

 private:
  std::shared_ptr<ConvNormAct> stem;
  std::shared_ptr<BlockSequence> trunk_output;
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear fc{nullptr};
};

}  // namespace trainer
