// torchvision's MobileNetV3 (large and small), layer for layer: features.N.block.K (no stage level), Hardswish and
// Hardsigmoid, squeeze-excitation to _make_divisible(expanded / 4, 8), BatchNorm eps 1e-3 / momentum 0.01, and the
// classifier 0 (Linear) 1 (Hardswish) 2 (Dropout) 3 (Linear); the same parameter names, shapes and initialisation.
//   ClassifierPtr net = build_model(model_config, {224, 224, 3});   // models/factory.hpp: model.arch
#pragma once

#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>
#include <vector>

#include "trainer/models/blocks/block.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

// One inverted residual block, as a row of Tables 1 and 2 of the MobileNetV3 paper.
struct InvertedResidualSpec {
  int64_t in, kernel, expanded, out;
  bool squeeze_excitation, hardswish;
  int64_t stride;
};

struct MobileNetV3Spec {
  std::vector<InvertedResidualSpec> blocks;
  int64_t last_channel = 0;  // the classifier's hidden width
};

// mobilenet_v3_large, mobilenet_v3_small.
const std::vector<std::pair<std::string, MobileNetV3Spec>>& mobilenet_v3_specs();

class MobileNetV3 final : public Classifier {
 public:
  MobileNetV3(const MobileNetV3Spec& spec, int64_t in_channels, int64_t num_classes, double dropout);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;

 private:
  std::shared_ptr<BlockSequence> features;
  torch::nn::Sequential classifier{nullptr};
  torch::nn::Linear hidden{nullptr}, head{nullptr};
  torch::nn::Dropout dropout{nullptr};
};

}  // namespace trainer
