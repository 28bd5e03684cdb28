// torchvision's SwinTransformer, V1 (swin_t, swin_s, swin_b) and V2 (swin_v2_t, swin_v2_s, swin_v2_b), layer for
// layer: features.0 (conv k4 s4 "0", LayerNorm "2" over channels last), stages of blocks at features.1, 3, 5, 7
// and patch merging at 2, 4, 6, then norm and head; tokens are [N, H, W, C] throughout. A block attends within
// windows (7 for V1, 8 for V2), shifted by half a window on odd blocks, the map padded to whole windows, so any
// image size runs with the same weights. V1: pre-norm, a relative position bias table; V2: post-norm, cosine
// attention with logit_scale and a continuous position bias (cpb_mlp). The same names, buffers and initialisation.
//   ClassifierPtr net = build_model(model_config, {224, 224, 3});   // models/factory.hpp: model.arch
#pragma once

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct SwinSpec {
  int64_t embed = 96;
  std::vector<int64_t> depths{2, 2, 6, 2}, heads{3, 6, 12, 24};
  int64_t window = 7;
  double stochastic_depth = 0.2;
  bool v2 = false;
};

const std::vector<std::pair<std::string, SwinSpec>>& swin_specs();

class SwinTransformer final : public Classifier {
 public:
  // `input`: the training images' size, which an export is written for (any other runs in forward).
  SwinTransformer(const SwinSpec& spec, const ImageShape& input, int64_t num_classes, double dropout,
                  double stochastic_depth);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;

 private:
  struct Parts;  // the typed modules of features.0, 1, ... (swin.cpp)
  SwinSpec spec_;
  ImageShape input_;
  std::shared_ptr<Parts> parts_;
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace trainer
