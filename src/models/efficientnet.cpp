#include "trainer/models/efficientnet.hpp"

#include <torch/torch.h>

#include <cmath>

#include "trainer/models/blocks/channels.hpp"
#include "trainer/models/blocks/squeeze_excitation.hpp"
#include "trainer/models/blocks/stochastic_depth.hpp"

namespace trainer {

namespace nn = torch::nn;

namespace {

// MBConv (expand 1x1, depthwise kxk, squeeze-excitation, project 1x1) or FusedMBConv (expand kxk, project 1x1),
// with the residual connection and its stochastic depth when the shape is kept.
class MBConv final : public Block {
 public:
  MBConv(const MBConvStage& s, int64_t in, int64_t stride, const BatchNormSettings& norm, double drop)
      : residual_(stride == 1 && in == s.out), drop_(drop), block_(std::make_shared<BlockSequence>()) {
    const int64_t expanded = make_divisible(static_cast<double>(in) * s.expand_ratio, 8);
    const Activation silu = Activation::silu, none = Activation::none;
    if (s.fused) {
      if (expanded != in) {
        block_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{in, expanded, s.kernel, stride, 1, silu, norm}));
        block_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{expanded, s.out, 1, 1, 1, none, norm}));
      } else {
        block_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{in, s.out, s.kernel, stride, 1, silu, norm}));
      }
    } else {
      if (expanded != in)
        block_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{in, expanded, 1, 1, 1, silu, norm}));
      block_->add(std::make_shared<ConvNormAct>(
          ConvNormActOptions{expanded, expanded, s.kernel, stride, /*groups=*/expanded, silu, norm}));
      block_->add(
          std::make_shared<SqueezeExcitation>(expanded, std::max<int64_t>(1, in / 4), silu, Activation::sigmoid));
      block_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{expanded, s.out, 1, 1, 1, none, norm}));
    }
    register_module("block", block_);
  }

  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor out = block_->forward(x);
    return residual_ ? stochastic_depth(out, drop_, is_training()) + x : out;
  }

  std::string describe(LayerGraph& g, const std::string& x, const std::string& prefix) const override {
    const std::string out = block_->describe(g, x, prefix + ".block");
    return residual_ ? g.add(out, x) : out;  // stochastic depth is the identity in eval mode
  }

 private:
  bool residual_;
  double drop_;
  std::shared_ptr<BlockSequence> block_;
};

// V1's stages at compound scale (width, depth) = (1, 1); efficientnet_specs() applies each variant's multipliers.
std::vector<MBConvStage> v1_stages() {
  return {{false, 1, 3, 1, 32, 16, 1},  {false, 6, 3, 2, 16, 24, 2},  {false, 6, 5, 2, 24, 40, 2},
          {false, 6, 3, 2, 40, 80, 3},  {false, 6, 5, 1, 80, 112, 3}, {false, 6, 5, 2, 112, 192, 4},
          {false, 6, 3, 1, 192, 320, 1}};
}

EfficientNetSpec v1(double width, double depth, double dropout, BatchNormSettings norm = {}) {
  EfficientNetSpec s;
  s.stages = v1_stages();
  s.width_mult = width;
  s.depth_mult = depth;
  s.dropout = dropout;
  s.norm = norm;
  return s;
}

EfficientNetSpec v2(std::vector<MBConvStage> stages, double dropout) {
  EfficientNetSpec s;
  s.stages = std::move(stages);
  s.last_channel = 1280;
  s.norm = {/*eps=*/1e-3, /*momentum=*/0.1};
  s.dropout = dropout;
  return s;
}

// The stage after the variant's multipliers (torchvision's MBConvConfig.adjust_channels / adjust_depth).
MBConvStage scaled(MBConvStage s, const EfficientNetSpec& spec) {
  if (s.fused) return s;  // FusedMBConvConfig takes no multipliers
  s.in = make_divisible(static_cast<double>(s.in) * spec.width_mult, 8);
  s.out = make_divisible(static_cast<double>(s.out) * spec.width_mult, 8);
  s.layers = static_cast<int64_t>(std::ceil(static_cast<double>(s.layers) * spec.depth_mult));
  return s;
}

}  // namespace

const std::vector<std::pair<std::string, EfficientNetSpec>>& efficientnet_specs() {
  const BatchNormSettings large{/*eps=*/1e-3, /*momentum=*/0.01};
  static const std::vector<std::pair<std::string, EfficientNetSpec>> specs{
      {"efficientnet_b0", v1(1.0, 1.0, 0.2)},
      {"efficientnet_b1", v1(1.0, 1.1, 0.2)},
      {"efficientnet_b2", v1(1.1, 1.2, 0.3)},
      {"efficientnet_b3", v1(1.2, 1.4, 0.3)},
      {"efficientnet_b4", v1(1.4, 1.8, 0.4)},
      {"efficientnet_b5", v1(1.6, 2.2, 0.4, large)},
      {"efficientnet_b6", v1(1.8, 2.6, 0.5, large)},
      {"efficientnet_b7", v1(2.0, 3.1, 0.5, large)},
      // fused, expand ratio, kernel, stride, in, out, layers
      {"efficientnet_v2_s", v2({{true, 1, 3, 1, 24, 24, 2},
                                {true, 4, 3, 2, 24, 48, 4},
                                {true, 4, 3, 2, 48, 64, 4},
                                {false, 4, 3, 2, 64, 128, 6},
                                {false, 6, 3, 1, 128, 160, 9},
                                {false, 6, 3, 2, 160, 256, 15}},
                               0.2)},
      {"efficientnet_v2_m", v2({{true, 1, 3, 1, 24, 24, 3},
                                {true, 4, 3, 2, 24, 48, 5},
                                {true, 4, 3, 2, 48, 80, 5},
                                {false, 4, 3, 2, 80, 160, 7},
                                {false, 6, 3, 1, 160, 176, 14},
                                {false, 6, 3, 2, 176, 304, 18},
                                {false, 6, 3, 1, 304, 512, 5}},
                               0.3)},
      {"efficientnet_v2_l", v2({{true, 1, 3, 1, 32, 32, 4},
                                {true, 4, 3, 2, 32, 64, 7},
                                {true, 4, 3, 2, 64, 96, 7},
                                {false, 4, 3, 2, 96, 192, 10},
                                {false, 6, 3, 1, 192, 224, 19},
                                {false, 6, 3, 2, 224, 384, 25},
                                {false, 6, 3, 1, 384, 640, 7}},
                               0.4)},
  };
  return specs;
}

EfficientNet::EfficientNet(const EfficientNetSpec& spec, int64_t in_channels, int64_t num_classes, double dropout,
                           double rate) {
  std::vector<MBConvStage> stages;
  int64_t total = 0;
  for (const auto& s : spec.stages) {
    stages.push_back(scaled(s, spec));
    total += stages.back().layers;
  }
  features = std::make_shared<BlockSequence>();
  features->add(std::make_shared<ConvNormAct>(
      ConvNormActOptions{in_channels, stages.front().in, 3, 2, 1, Activation::silu, spec.norm}));
  int64_t index = 0;
  for (const auto& s : stages) {
    auto stage = std::make_shared<BlockSequence>();
    for (int64_t i = 0; i < s.layers; ++i, ++index)
      stage->add(std::make_shared<MBConv>(s, i == 0 ? s.in : s.out, i == 0 ? s.stride : 1, spec.norm,
                                          depth_rate(rate, index, total)));
    features->add(stage);
  }
  const int64_t last_in = stages.back().out, last_out = spec.last_channel ? spec.last_channel : 4 * last_in;
  features->add(
      std::make_shared<ConvNormAct>(ConvNormActOptions{last_in, last_out, 1, 1, 1, Activation::silu, spec.norm}));
  register_module("features", features);
  head = nn::Linear(last_out, num_classes);
  classifier = register_module("classifier", nn::Sequential(nn::Dropout(dropout), head));

  init_convs_and_norms(*this, [](nn::LinearImpl& l) {
    const double range = 1.0 / std::sqrt(static_cast<double>(l.options.out_features()));
    nn::init::uniform_(l.weight, -range, range);
    nn::init::zeros_(l.bias);
  });
}

torch::Tensor EfficientNet::forward(torch::Tensor x) { return classifier->forward(features->forward(x).mean({2, 3})); }

std::optional<LayerGraph> EfficientNet::inference_graph() const {
  LayerGraph g;
  g.output = g.linear(g.global_avg_pool(features->describe(g, g.input, "features")), "classifier.1");
  return g;
}

}  // namespace trainer
