#include "trainer/models/convnext.hpp"

#include <torch/torch.h>

#include "trainer/models/blocks/stochastic_depth.hpp"
#include "trainer/models/blocks/trunc_normal.hpp"

namespace trainer {

namespace nn = torch::nn;

namespace {

constexpr double kConvNextLayerNormEps = 1e-6;
constexpr double kLayerScale = 1e-6;

nn::Conv2d biased_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding = 0,
                       int64_t groups = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).groups(groups).bias(true));
}

// features.0 (conv "0", norm "1") and the downsampling layers (norm "0", conv "1"): a convolution and a
// LayerNorm2d in either order.
class ConvAndNorm final : public Block {
 public:
  ConvAndNorm(int64_t in, int64_t out, int64_t kernel, bool norm_first) : norm_first_(norm_first) {
    const int64_t norm_width = norm_first ? in : out;
    if (norm_first) norm_ = register_module("0", std::make_shared<LayerNorm2d>(norm_width, kConvNextLayerNormEps));
    conv_ = register_module(norm_first ? "1" : "0", biased_conv(in, out, kernel, kernel));
    if (!norm_first) norm_ = register_module("1", std::make_shared<LayerNorm2d>(norm_width, kConvNextLayerNormEps));
  }

  torch::Tensor forward(torch::Tensor x) override {
    return norm_first_ ? conv_->forward(norm_->forward(x)) : norm_->forward(conv_->forward(x));
  }

  std::string describe(LayerGraph& g, const std::string& x, const std::string& prefix) const override {
    const std::string conv_name = prefix + (norm_first_ ? ".1" : ".0"),
                      norm_name = prefix + (norm_first_ ? ".0" : ".1");
    if (norm_first_) return g.conv(norm_->describe(g, x, norm_name), conv_name, *conv_);
    return norm_->describe(g, g.conv(x, conv_name, *conv_), norm_name);
  }

 private:
  bool norm_first_;
  nn::Conv2d conv_{nullptr};
  std::shared_ptr<LayerNorm2d> norm_;
};

// The modules of CNBlock's nn.Sequential that hold parameters, under its indices (1 and 6 are permutes, 4 GELU).
struct CNBlockLayers final : nn::Module {
  explicit CNBlockLayers(int64_t dim) {
    depthwise = register_module("0", biased_conv(dim, dim, 7, 1, 3, dim));
    norm = register_module("2", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kConvNextLayerNormEps)));
    expand = register_module("3", nn::Linear(dim, 4 * dim));
    project = register_module("5", nn::Linear(4 * dim, dim));
  }
  nn::Conv2d depthwise{nullptr};
  nn::LayerNorm norm{nullptr};
  nn::Linear expand{nullptr}, project{nullptr};
};

class CNBlock final : public Block {
 public:
  CNBlock(int64_t dim, double drop) : drop_(drop) {
    layer_scale_ = register_parameter("layer_scale", torch::full({dim, 1, 1}, kLayerScale));
    block_ = register_module("block", std::make_shared<CNBlockLayers>(dim));
  }

  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor y = block_->depthwise->forward(x).permute({0, 2, 3, 1});
    y = block_->project->forward(torch::gelu(block_->expand->forward(block_->norm->forward(y))));
    y = layer_scale_ * y.permute({0, 3, 1, 2});
    return stochastic_depth(y, drop_, is_training()) + x;
  }

  std::string describe(LayerGraph& g, const std::string& x, const std::string& prefix) const override {
    const std::string p = prefix + ".block";
    std::string y = g.layer_norm_2d(g.conv(x, p + ".0", *block_->depthwise), p + ".2", kConvNextLayerNormEps);
    y = g.pixel_linear(g.activation(g.pixel_linear(y, p + ".3"), LayerKind::gelu), p + ".5");
    return g.add(g.scale(y, prefix + ".layer_scale"), x);  // stochastic depth is the identity in eval mode
  }

 private:
  double drop_;
  torch::Tensor layer_scale_;
  std::shared_ptr<CNBlockLayers> block_;
};

}  // namespace

const std::vector<std::pair<std::string, ConvNeXtSpec>>& convnext_specs() {
  static const std::vector<std::pair<std::string, ConvNeXtSpec>> specs{
      {"convnext_tiny", {{96, 192, 384, 768}, {3, 3, 9, 3}, 0.1}},
      {"convnext_small", {{96, 192, 384, 768}, {3, 3, 27, 3}, 0.4}},
      {"convnext_base", {{128, 256, 512, 1024}, {3, 3, 27, 3}, 0.5}},
      {"convnext_large", {{192, 384, 768, 1536}, {3, 3, 27, 3}, 0.5}},
  };
  return specs;
}

ConvNeXt::ConvNeXt(const ConvNeXtSpec& spec, int64_t in_channels, int64_t num_classes, double p, double rate) {
  features = std::make_shared<BlockSequence>();
  features->add(std::make_shared<ConvAndNorm>(in_channels, spec.widths[0], 4, /*norm_first=*/false));
  const int64_t total = spec.depths[0] + spec.depths[1] + spec.depths[2] + spec.depths[3];
  int64_t index = 0;
  for (size_t s = 0; s < 4; ++s) {
    auto stage = std::make_shared<BlockSequence>();
    for (int64_t i = 0; i < spec.depths[s]; ++i, ++index)
      stage->add(std::make_shared<CNBlock>(spec.widths[s], depth_rate(rate, index, total - 1)));
    features->add(stage);
    if (s < 3) features->add(std::make_shared<ConvAndNorm>(spec.widths[s], spec.widths[s + 1], 2, /*norm_first=*/true));
  }
  register_module("features", features);
  // classifier: 0 LayerNorm2d, 1 Flatten, 2 Linear; dropout (0 in torchvision) before the Linear.
  classifier = register_module("classifier", std::make_shared<nn::Module>());
  norm = classifier->register_module("0", std::make_shared<LayerNorm2d>(spec.widths[3], kConvNextLayerNormEps));
  head = classifier->register_module("2", nn::Linear(spec.widths[3], num_classes));
  dropout = register_module("dropout", nn::Dropout(p));

  // torchvision's initialisation.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<nn::Conv2d>()) {
      trunc_normal_(c->weight, 0.02);
      nn::init::zeros_(c->bias);
    } else if (auto* l = module->as<nn::Linear>()) {
      trunc_normal_(l->weight, 0.02);
      nn::init::zeros_(l->bias);
    }
  }
}

torch::Tensor ConvNeXt::forward(torch::Tensor x) {
  x = norm->forward(features->forward(x).mean({2, 3}, /*keepdim=*/true)).flatten(1);
  return head->forward(dropout->forward(x));
}

std::optional<LayerGraph> ConvNeXt::inference_graph() const {
  LayerGraph g;
  std::string x = norm->describe(g, g.squeeze(features->describe(g, g.input, "features")), "classifier.0");
  g.output = g.linear(g.flatten(x), "classifier.2");
  return g;
}

}  // namespace trainer
