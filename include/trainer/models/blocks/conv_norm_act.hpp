// torchvision's Conv2dNormActivation with BatchNorm: a bias-free convolution ("0"), BatchNorm ("1") and an
// activation (no parameters), padded to keep the size at stride 1.
//   auto stem = std::make_shared<ConvNormAct>(ConvNormActOptions{/*in=*/3, /*out=*/16, /*kernel=*/3, /*stride=*/2,
//                                                                /*groups=*/1, Activation::hardswish, {1e-3, 0.01}});
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <functional>

#include "trainer/models/blocks/activation.hpp"
#include "trainer/models/blocks/block.hpp"
#include "trainer/models/sync_batch_norm.hpp"

namespace trainer {

// A family's BatchNorm settings (torchvision passes them as norm_layer=partial(BatchNorm2d, eps=..., momentum=...)).
struct BatchNormSettings {
  double eps = 1e-5;
  double momentum = 0.1;
};

struct ConvNormActOptions {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, groups = 1;
  Activation activation = Activation::relu;
  BatchNormSettings norm;
};

class ConvNormAct final : public Block {
 public:
  explicit ConvNormAct(const ConvNormActOptions& options);
  torch::Tensor forward(torch::Tensor x) override;
  std::string describe(LayerGraph& graph, const std::string& x, const std::string& prefix) const override;

  torch::nn::Conv2d conv{nullptr};
  SyncBatchNorm2d norm{nullptr};

 private:
  Activation activation_;
};

// The initialisation torchvision's MobileNetV3 and EfficientNet share: every convolution Kaiming-normal over its
// fan-out (bias 0), every BatchNorm weight 1 and bias 0, and each Linear as `linear` does (the family's own head).
void init_convs_and_norms(torch::nn::Module& model, const std::function<void(torch::nn::LinearImpl&)>& linear);

}  // namespace trainer
