#include "trainer/models/regnet.hpp"

#include <torch/torch.h>

#include <cmath>

#include "trainer/models/blocks/squeeze_excitation.hpp"

namespace trainer {

namespace nn = torch::nn;

namespace {

constexpr int64_t kStemWidth = 32;

// x + F(x), or proj(x) + F(x) when the width or the stride changes; F = 1x1, grouped 3x3 [+ SE], 1x1.
class ResBottleneckBlock final : public Block {
 public:
  ResBottleneckBlock(int64_t in, int64_t out, int64_t stride, int64_t group_width, bool se)
      : f_(std::make_shared<BlockSequence>()) {
    const Activation relu = Activation::relu;
    if (in != out || stride != 1)
      proj_ = register_module(
          "proj", std::make_shared<ConvNormAct>(ConvNormActOptions{in, out, 1, stride, 1, Activation::none, {}}));
    const int64_t bottleneck = out;  // bottleneck multiplier 1 in every torchvision RegNet
    f_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{in, bottleneck, 1, 1, 1, relu, {}}), "a");
    f_->add(std::make_shared<ConvNormAct>(
                ConvNormActOptions{bottleneck, bottleneck, 3, stride, bottleneck / group_width, relu, {}}),
            "b");
    if (se)  // int(round(0.25 * in)): Python rounds halves to even, as nearbyint does
      f_->add(std::make_shared<SqueezeExcitation>(bottleneck, static_cast<int64_t>(std::nearbyint(0.25 * in)), relu,
                                                  Activation::sigmoid),
              "se");
    f_->add(std::make_shared<ConvNormAct>(ConvNormActOptions{bottleneck, out, 1, 1, 1, Activation::none, {}}), "c");
    register_module("f", f_);
  }

  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor shortcut = proj_ ? proj_->forward(x) : x;
    return torch::relu(shortcut + f_->forward(x));
  }

  std::string describe(LayerGraph& g, const std::string& x, const std::string& prefix) const override {
    const std::string shortcut = proj_ ? proj_->describe(g, x, prefix + ".proj") : x;
    return g.relu(g.add(shortcut, f_->describe(g, x, prefix + ".f")));
  }

 private:
  std::shared_ptr<ConvNormAct> proj_;
  std::shared_ptr<BlockSequence> f_;
};

}  // namespace

// torchvision's BlockParams.from_init_params(depth, w_0, w_a, w_m, group_width[, se_ratio=0.25]) for each variant,
// evaluated: stage depths, widths and group widths (bottleneck multiplier 1 throughout).
const std::vector<std::pair<std::string, RegNetSpec>>& regnet_specs() {
  static const std::vector<std::pair<std::string, RegNetSpec>> specs{
      // depth=16, w_0=48, w_a=27.89, w_m=2.09, group_width=8
      {"regnet_y_400mf", {{1, 3, 6, 6}, {48, 104, 208, 440}, {8, 8, 8, 8}, true}},
      // depth=14, w_0=56, w_a=38.84, w_m=2.4, group_width=16
      {"regnet_y_800mf", {{1, 3, 8, 2}, {64, 144, 320, 784}, {16, 16, 16, 16}, true}},
      // depth=27, w_0=48, w_a=20.71, w_m=2.65, group_width=24
      {"regnet_y_1_6gf", {{2, 6, 17, 2}, {48, 120, 336, 888}, {24, 24, 24, 24}, true}},
      // depth=21, w_0=80, w_a=42.63, w_m=2.66, group_width=24
      {"regnet_y_3_2gf", {{2, 5, 13, 1}, {72, 216, 576, 1512}, {24, 24, 24, 24}, true}},
      // depth=17, w_0=192, w_a=76.82, w_m=2.19, group_width=56
      {"regnet_y_8gf", {{2, 4, 10, 1}, {224, 448, 896, 2016}, {56, 56, 56, 56}, true}},
      // depth=18, w_0=200, w_a=106.23, w_m=2.48, group_width=112
      {"regnet_y_16gf", {{2, 4, 11, 1}, {224, 448, 1232, 3024}, {112, 112, 112, 112}, true}},
      // depth=20, w_0=232, w_a=115.89, w_m=2.53, group_width=232
      {"regnet_y_32gf", {{2, 5, 12, 1}, {232, 696, 1392, 3712}, {232, 232, 232, 232}, true}},
      // depth=27, w_0=456, w_a=160.83, w_m=2.52, group_width=264
      {"regnet_y_128gf", {{2, 7, 17, 1}, {528, 1056, 2904, 7392}, {264, 264, 264, 264}, true}},
      // depth=22, w_0=24, w_a=24.48, w_m=2.54, group_width=16
      {"regnet_x_400mf", {{1, 2, 7, 12}, {32, 64, 160, 400}, {16, 16, 16, 16}, false}},
      // depth=16, w_0=56, w_a=35.73, w_m=2.28, group_width=16
      {"regnet_x_800mf", {{1, 3, 7, 5}, {64, 128, 288, 672}, {16, 16, 16, 16}, false}},
      // depth=18, w_0=80, w_a=34.01, w_m=2.25, group_width=24
      {"regnet_x_1_6gf", {{2, 4, 10, 2}, {72, 168, 408, 912}, {24, 24, 24, 24}, false}},
      // depth=25, w_0=88, w_a=26.31, w_m=2.25, group_width=48
      {"regnet_x_3_2gf", {{2, 6, 15, 2}, {96, 192, 432, 1008}, {48, 48, 48, 48}, false}},
      // depth=23, w_0=80, w_a=49.56, w_m=2.88, group_width=120 (the first stage's 80 channels cap it at 80)
      {"regnet_x_8gf", {{2, 5, 15, 1}, {80, 240, 720, 1920}, {80, 120, 120, 120}, false}},
      // depth=22, w_0=216, w_a=55.59, w_m=2.1, group_width=128
      {"regnet_x_16gf", {{2, 6, 13, 1}, {256, 512, 896, 2048}, {128, 128, 128, 128}, false}},
      // depth=23, w_0=320, w_a=69.86, w_m=2.0, group_width=168
      {"regnet_x_32gf", {{2, 7, 13, 1}, {336, 672, 1344, 2520}, {168, 168, 168, 168}, false}},
  };
  return specs;
}

RegNet::RegNet(const RegNetSpec& spec, int64_t in_channels, int64_t num_classes, double p) {
  stem = register_module("stem", std::make_shared<ConvNormAct>(
                                     ConvNormActOptions{in_channels, kStemWidth, 3, 2, 1, Activation::relu, {}}));
  trunk_output = std::make_shared<BlockSequence>();
  int64_t width = kStemWidth;
  for (size_t s = 0; s < 4; ++s) {
    auto stage = std::make_shared<BlockSequence>();
    const std::string name = "block" + std::to_string(s + 1);
    for (int64_t i = 0; i < spec.depths[s]; ++i)
      stage->add(std::make_shared<ResBottleneckBlock>(i == 0 ? width : spec.widths[s], spec.widths[s], i == 0 ? 2 : 1,
                                                      spec.group_widths[s], spec.squeeze_excitation),
                 name + "-" + std::to_string(i));
    trunk_output->add(stage, name);
    width = spec.widths[s];
  }
  register_module("trunk_output", trunk_output);
  dropout = register_module("dropout", nn::Dropout(p));
  fc = register_module("fc", nn::Linear(width, num_classes));

  // torchvision's initialisation (the squeeze-excitation biases keep Conv2d's default).
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<nn::Conv2d>()) {
      const auto k = c->options.kernel_size();
      const double fan_out = static_cast<double>((*k)[0] * (*k)[1] * c->options.out_channels());
      nn::init::normal_(c->weight, 0.0, std::sqrt(2.0 / fan_out));
    } else if (auto* b = module->as<SyncBatchNorm2d>()) {
      nn::init::ones_(b->weight);
      nn::init::zeros_(b->bias);
    } else if (auto* l = module->as<nn::Linear>()) {
      nn::init::normal_(l->weight, 0.0, 0.01);
      nn::init::zeros_(l->bias);
    }
  }
}

torch::Tensor RegNet::forward(torch::Tensor x) {
  x = trunk_output->forward(stem->forward(x)).mean({2, 3});
  return fc->forward(dropout->forward(x));
}

std::optional<LayerGraph> RegNet::inference_graph() const {
  LayerGraph g;
  const std::string x = trunk_output->describe(g, stem->describe(g, g.input, "stem"), "trunk_output");
  g.output = g.linear(g.global_avg_pool(x), "fc");  // dropout is the identity in eval mode
  return g;
}

}  // namespace trainer
