// torchvision's ResNet family, layer for layer: the same modules, parameter and buffer names
// (conv1.weight, layer1.0.downsample.0.weight, fc.bias, bn1.num_batches_tracked, ...), the same counts and the
// same initialisation, so weights move between this trainer and torchvision without renaming.
// The bottleneck is v1.5: the stride sits on the 3x3 conv, as in torchvision.
//   ClassifierPtr net = build_model(model_config, {224, 224, 3});   // models/factory.hpp: by model.arch
//   auto r50 = std::make_shared<ResNet>(ResNetOptions{/*spec=*/spec, /*in_channels=*/3, /*num_classes=*/1000});
// where `spec` is resnet50's row of resnet_specs().
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/models/classifier.hpp"
#include "trainer/models/sync_batch_norm.hpp"

namespace trainer {

// What distinguishes one member of the family from another.
struct ResNetSpec {
  bool bottleneck = false;          // 1x1-3x3-1x1 blocks (expansion 4) instead of two 3x3 convs
  std::array<int64_t, 4> blocks{};  // blocks in layer1..layer4
  int64_t groups = 1;               // grouped 3x3 convs (ResNeXt)
  int64_t width_per_group = 64;     // 128 for the wide ResNets
};

// resnet18 ... resnext101_64x4d, in the order they are listed to users.
const std::vector<std::pair<std::string, ResNetSpec>>& resnet_specs();

struct ResNetOptions {
  ResNetSpec spec;
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  StemKind stem = StemKind::imagenet;
  double dropout = 0.0;  // before fc; torchvision has none, so 0 keeps it exact
  bool zero_init_residual = false;
};

// One residual block, basic (conv1/bn1/conv2/bn2) or bottleneck (also conv3/bn3), with an optional
// downsample (1x1 conv + BN) on the shortcut when the stride or width changes.
class ResidualBlock final : public torch::nn::Module {
 public:
  ResidualBlock(const ResNetSpec& spec, int64_t in_planes, int64_t planes, int64_t stride);
  torch::Tensor forward(torch::Tensor x);
  // Appends the block's layers, its parameters under `prefix` ("layer1.0"), to `graph`; returns its output.
  std::string describe(LayerGraph& graph, const std::string& x, const std::string& prefix) const;
  // The BatchNorm whose weight zero_init_residual sets to 0 (bn2 or bn3).
  SyncBatchNorm2d& last_bn() { return bottleneck_ ? bn3 : bn2; }

 private:
  bool bottleneck_;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  SyncBatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};
};

class ResNet final : public Classifier {
 public:
  explicit ResNet(const ResNetOptions& options);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;

 private:
  bool max_pool_;
  torch::nn::Conv2d conv1{nullptr};
  SyncBatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear fc{nullptr};
};

}  // namespace trainer
