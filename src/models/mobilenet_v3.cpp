#include "trainer/models/mobilenet_v3.hpp"

#include <torch/torch.h>

#include "trainer/models/blocks/channels.hpp"
#include "trainer/models/blocks/conv_norm_act.hpp"
#include "trainer/models/blocks/squeeze_excitation.hpp"

namespace trainer {

namespace nn = torch::nn;

namespace {

const BatchNormSettings kNorm{/*eps=*/1e-3, /*momentum=*/0.01};

class InvertedResidual final : public Block {
 public:
  explicit InvertedResidual(const InvertedResidualSpec& s)
      : residual_(s.stride == 1 && s.in == s.out), block_(std::make_shared<BlockSequence>()) {
    const Activation act = s.hardswish ? Activation::hardswish : Activation::relu;
    if (s.expanded != s.in)
      block_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{s.in, s.expanded, 1, 1, 1, act, kNorm}));
    block_->add(std::make_shared<ConvNormAct>(
        ConvNormActOptions{s.expanded, s.expanded, s.kernel, s.stride, /*groups=*/s.expanded, act, kNorm}));
    if (s.squeeze_excitation)
      block_->add(std::make_shared<SqueezeExcitation>(s.expanded,
                                                      make_divisible(static_cast<double>(s.expanded / 4), 8),
                                                      Activation::relu, Activation::hardsigmoid));
    block_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{s.expanded, s.out, 1, 1, 1, Activation::none, kNorm}));
    register_module("block", block_);
  }

  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor out = block_->forward(x);
    return residual_ ? out + x : out;
  }

  std::string describe(LayerGraph& g, const std::string& x, const std::string& prefix) const override {
    const std::string out = block_->describe(g, x, prefix + ".block");
    return residual_ ? g.add(out, x) : out;
  }

 private:
  bool residual_;
  std::shared_ptr<BlockSequence> block_;
};

}  // namespace

const std::vector<std::pair<std::string, MobileNetV3Spec>>& mobilenet_v3_specs() {
  // torchvision's _mobilenet_v3_conf at width 1.0 (every count already a multiple of 8): in, kernel, expanded, out,
  // squeeze-excitation, hardswish (else ReLU), stride.
  static const std::vector<std::pair<std::string, MobileNetV3Spec>> specs{
      {"mobilenet_v3_large",
       {{{16, 3, 16, 16, false, false, 1},
         {16, 3, 64, 24, false, false, 2},
         {24, 3, 72, 24, false, false, 1},
         {24, 5, 72, 40, true, false, 2},
         {40, 5, 120, 40, true, false, 1},
         {40, 5, 120, 40, true, false, 1},
         {40, 3, 240, 80, false, true, 2},
         {80, 3, 200, 80, false, true, 1},
         {80, 3, 184, 80, false, true, 1},
         {80, 3, 184, 80, false, true, 1},
         {80, 3, 480, 112, true, true, 1},
         {112, 3, 672, 112, true, true, 1},
         {112, 5, 672, 160, true, true, 2},
         {160, 5, 960, 160, true, true, 1},
         {160, 5, 960, 160, true, true, 1}},
        /*last_channel=*/1280}},
      {"mobilenet_v3_small",
       {{{16, 3, 16, 16, true, false, 2},
         {16, 3, 72, 24, false, false, 2},
         {24, 3, 88, 24, false, false, 1},
         {24, 5, 96, 40, true, true, 2},
         {40, 5, 240, 40, true, true, 1},
         {40, 5, 240, 40, true, true, 1},
         {40, 5, 120, 48, true, true, 1},
         {48, 5, 144, 48, true, true, 1},
         {48, 5, 288, 96, true, true, 2},
         {96, 5, 576, 96, true, true, 1},
         {96, 5, 576, 96, true, true, 1}},
        /*last_channel=*/1024}},
  };
  return specs;
}

MobileNetV3::MobileNetV3(const MobileNetV3Spec& spec, int64_t in_channels, int64_t num_classes, double p) {
  features = std::make_shared<BlockSequence>();
  features->add(std::make_shared<ConvNormAct>(
      ConvNormActOptions{in_channels, spec.blocks.front().in, 3, 2, 1, Activation::hardswish, kNorm}));
  for (const auto& block : spec.blocks) features->add(std::make_shared<InvertedResidual>(block));
  const int64_t last_in = spec.blocks.back().out, last_out = 6 * last_in;
  features->add(
      std::make_shared<ConvNormAct>(ConvNormActOptions{last_in, last_out, 1, 1, 1, Activation::hardswish, kNorm}));
  register_module("features", features);
  hidden = nn::Linear(last_out, spec.last_channel);
  dropout = nn::Dropout(p);
  head = nn::Linear(spec.last_channel, num_classes);
  classifier = register_module(
      "classifier", nn::Sequential(hidden, nn::Functional([](const torch::Tensor& t) { return torch::hardswish(t); }),
                                   dropout, head));

  init_convs_and_norms(*this, [](nn::LinearImpl& l) {
    nn::init::normal_(l.weight, 0, 0.01);
    nn::init::zeros_(l.bias);
  });
}

torch::Tensor MobileNetV3::forward(torch::Tensor x) {
  x = features->forward(x).mean({2, 3});
  return classifier->forward(x);
}

std::optional<LayerGraph> MobileNetV3::inference_graph() const {
  LayerGraph g;
  std::string x = g.global_avg_pool(features->describe(g, g.input, "features"));
  x = g.activation(g.linear(x, "classifier.0"), LayerKind::hardswish);
  g.output = g.linear(x, "classifier.3");  // dropout is the identity in eval mode
  return g;
}

}  // namespace trainer
