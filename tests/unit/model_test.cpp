#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "support/fixtures.hpp"
#include "trainer/models/blocks/channels.hpp"
#include "trainer/models/blocks/multihead_attention.hpp"
#include "trainer/models/blocks/stochastic_depth.hpp"
#include "trainer/models/blocks/trunc_normal.hpp"
#include "trainer/models/convnext.hpp"
#include "trainer/models/efficientnet.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/models/mobilenet_v3.hpp"
#include "trainer/models/regnet.hpp"
#include "trainer/models/resnet.hpp"
#include "trainer/models/swin.hpp"
#include "trainer/models/vit.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {
namespace {

TEST(SimpleCnn, HasTheClassicExampleLayersAndNames) {
  ModelConfig m;
  m.num_classes = 10;
  const auto model = build_model(m, {28, 28, 1});
  std::vector<std::string> names;
  int64_t count = 0;
  for (const auto& item : model->named_parameters()) {
    names.push_back(item.key());
    count += item.value().numel();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
                                             "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(model->named_parameters()["fc1.weight"].sizes(), (std::vector<int64_t>{128, 9216}));
  EXPECT_EQ(count, 1199882);  // the PyTorch example's parameter count
  EXPECT_EQ(model->forward(torch::zeros({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
}

TEST(SimpleCnn, FollowsConfiguredChannelsClassesAndSize) {
  ModelConfig m;
  m.num_classes = 10;
  m.in_channels = 3;
  m.num_classes = 4;
  const auto model = build_model(m, {12, 10, 3});
  EXPECT_EQ(model->forward(torch::zeros({2, 3, 12, 10})).sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_THROW(build_model(m, {12, 10, 1}), ConfigError);
}

TEST(ModelFactory, UnknownArchListsTheValidOnes) {
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "mnist_cnnn";
  try {
    model_row(m.arch);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "config: model.arch: unknown architecture \"mnist_cnnn\"; did you mean \"mnist_cnn\"? (valid: " +
                  join(model_names()) + ")");
  }
}

ModelConfig resnet_config(const std::string& arch, int64_t in_channels = 3, int64_t classes = 1000) {
  ModelConfig m;
  m.arch = arch;
  m.in_channels = in_channels;
  m.num_classes = classes;
  return m;
}

struct StateCounts {
  int64_t parameters = 0, entries = 0, values = 0;
};

StateCounts count_state(const torch::nn::Module& model) {
  StateCounts c;
  for (const auto& p : model.parameters()) c.parameters += p.numel();
  for (const auto& p : model.named_parameters()) c.entries++, c.values += p.value().numel();
  for (const auto& b : model.named_buffers()) c.entries++, c.values += b.value().numel();
  return c;
}

// Figures read from torchvision 0.14: sum of parameters, len(state_dict()), values in state_dict().
class ResNetCounts : public ::testing::TestWithParam<std::tuple<std::string, int64_t, int64_t, int64_t>> {};

TEST_P(ResNetCounts, MatchTorchvision) {
  const auto& [arch, parameters, entries, values] = GetParam();
  const auto model = build_model(resnet_config(arch), {224, 224, 3});
  const StateCounts c = count_state(*model);
  EXPECT_EQ(c.parameters, parameters);
  EXPECT_EQ(c.entries, entries);
  EXPECT_EQ(c.values, values);
}

INSTANTIATE_TEST_SUITE_P(Torchvision, ResNetCounts,
                         ::testing::Values(std::make_tuple("resnet18", 11689512, 122, 11699132),
                                           std::make_tuple("resnet34", 21797672, 218, 21814732),
                                           std::make_tuple("resnet50", 25557032, 320, 25610205),
                                           std::make_tuple("resnet101", 44549160, 626, 44654608),
                                           std::make_tuple("resnet152", 60192808, 932, 60344387),
                                           std::make_tuple("wide_resnet50_2", 68883240, 320, 68951517),
                                           std::make_tuple("wide_resnet101_2", 126886696, 626, 127024656),
                                           std::make_tuple("resnext50_32x4d", 25028904, 320, 25097181),
                                           std::make_tuple("resnext101_32x8d", 88791336, 626, 88994320),
                                           std::make_tuple("resnext101_64x4d", 83455272, 626, 83658256)),
                         [](const auto& info) { return std::get<0>(info.param); });

std::vector<int64_t> shape_of(const torch::nn::Module& model, const std::string& name) {
  for (const auto& p : model.named_parameters())
    if (p.key() == name) return p.value().sizes().vec();
  for (const auto& b : model.named_buffers())
    if (b.key() == name) return b.value().sizes().vec();
  return {-1};
}

TEST(ResNet, UsesTorchvisionNames) {
  const auto model = build_model(resnet_config("resnet18"), {224, 224, 3});
  EXPECT_EQ(shape_of(*model, "conv1.weight"), (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(shape_of(*model, "bn1.running_mean"), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape_of(*model, "bn1.num_batches_tracked"), (std::vector<int64_t>{}));
  EXPECT_EQ(shape_of(*model, "layer1.1.conv2.weight"), (std::vector<int64_t>{64, 64, 3, 3}));
  EXPECT_EQ(shape_of(*model, "layer2.0.downsample.0.weight"), (std::vector<int64_t>{128, 64, 1, 1}));
  EXPECT_EQ(shape_of(*model, "layer4.1.bn2.running_var"), (std::vector<int64_t>{512}));
  EXPECT_EQ(shape_of(*model, "fc.weight"), (std::vector<int64_t>{1000, 512}));
  EXPECT_EQ(shape_of(*model, "layer1.0.downsample.0.weight"), (std::vector<int64_t>{-1}));  // basic, same width

  const auto r50 = build_model(resnet_config("resnet50"), {224, 224, 3});
  EXPECT_EQ(shape_of(*r50, "layer1.0.downsample.0.weight"), (std::vector<int64_t>{256, 64, 1, 1}));
  EXPECT_EQ(shape_of(*r50, "layer3.5.conv3.weight"), (std::vector<int64_t>{1024, 256, 1, 1}));
  const auto rx = build_model(resnet_config("resnext50_32x4d"), {224, 224, 3});
  EXPECT_EQ(shape_of(*rx, "layer1.0.conv2.weight"), (std::vector<int64_t>{128, 4, 3, 3}));  // 32 groups of 4
}

TEST(ResNet, BottleneckStridesOnTheThreeByThreeConv) {
  const auto model = build_model(resnet_config("resnet50"), {224, 224, 3});
  std::map<std::string, int64_t> strides;
  for (const auto& item : model->named_modules())
    if (auto* c = item.value()->as<torch::nn::Conv2d>()) strides[item.key()] = c->options.stride()->at(0);
  EXPECT_EQ(strides.at("conv1"), 2);
  EXPECT_EQ(strides.at("layer2.0.conv1"), 1);
  EXPECT_EQ(strides.at("layer2.0.conv2"), 2);
  EXPECT_EQ(strides.at("layer2.0.conv3"), 1);
  EXPECT_EQ(strides.at("layer2.0.downsample.0"), 2);
  EXPECT_EQ(model->forward(torch::zeros({1, 3, 64, 64})).sizes(), (std::vector<int64_t>{1, 1000}));
}

TEST(ResNet, SmallStemIsAThreeByThreeStrideOneConvWithoutPooling) {
  ModelConfig m = resnet_config("resnet18", 1, 10);
  m.stem = StemKind::small;
  const auto model = build_model(m, {28, 28, 1});
  EXPECT_EQ(shape_of(*model, "conv1.weight"), (std::vector<int64_t>{64, 1, 3, 3}));
  model->eval();
  // The maps stay 28 -> 28 -> 14 -> 7 -> 4: the global pool sees 4x4, not the 1x1 of the ImageNet stem.
  EXPECT_EQ(model->forward(torch::randn({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10}));
  m.arch = "mnist_cnn";
  EXPECT_THROW(build_model(m, {28, 28, 1}), ConfigError);
}

TEST(ResNet, InitialisesLikeTorchvision) {
  torch::manual_seed(0);
  ModelConfig m = resnet_config("resnet50");
  const auto model = build_model(m, {224, 224, 3});
  const auto params = model->named_parameters();
  // Kaiming normal, fan_out, ReLU gain: std = sqrt(2 / (out_channels * k * k)).
  const auto w = params["layer4.0.conv2.weight"];  // 512 x 512 x 3 x 3
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / (512 * 9)), 0.02 * std::sqrt(2.0 / (512 * 9)));
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 1e-4);
  EXPECT_TRUE(torch::equal(params["layer3.2.bn2.weight"], torch::ones({256})));
  EXPECT_TRUE(torch::equal(params["layer3.2.bn2.bias"], torch::zeros({256})));
  EXPECT_TRUE(torch::equal(params["layer3.2.bn3.weight"], torch::ones({1024})));
  // fc keeps nn.Linear's default: uniform within 1 / sqrt(fan_in).
  EXPECT_LE(params["fc.weight"].abs().max().item<double>(), 1.0 / std::sqrt(2048.0));

  m.zero_init_residual = true;
  const auto zeroed = build_model(m, {224, 224, 3})->named_parameters();
  EXPECT_TRUE(torch::equal(zeroed["layer3.2.bn3.weight"], torch::zeros({1024})));
  EXPECT_TRUE(torch::equal(zeroed["layer3.2.bn2.weight"], torch::ones({256})));
  ModelConfig basic = resnet_config("resnet18");
  basic.zero_init_residual = true;
  const auto zeroed18 = build_model(basic, {224, 224, 3})->named_parameters();
  EXPECT_TRUE(torch::equal(zeroed18["layer2.1.bn2.weight"], torch::zeros({128})));
  EXPECT_TRUE(torch::equal(zeroed18["layer2.1.bn1.weight"], torch::ones({128})));
}

// place_model(channels_last) restrides every 4-D weight, 1x1 kernels included.
TEST(ResNet, PlaceModelConvertsWeightsToChannelsLast) {
  ModelConfig m = resnet_config("resnet18", 3, 10);
  m.stem = StemKind::small;
  const auto a = build_model(m, {32, 32, 3}), b = build_model(m, {32, 32, 3});
  place_model(*a, torch::kCPU, /*channels_last=*/false);
  place_model(*b, torch::kCPU, /*channels_last=*/true);
  EXPECT_TRUE(b->named_parameters()["layer1.0.conv1.weight"].is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_FALSE(a->named_parameters()["layer1.0.conv1.weight"].is_contiguous(torch::MemoryFormat::ChannelsLast));
  // 1x1 kernels are ambiguous by contiguity; the kernels go by suggest_memory_format().
  EXPECT_EQ(b->named_parameters()["layer2.0.downsample.0.weight"].suggest_memory_format(),
            torch::MemoryFormat::ChannelsLast);
}

// A model asking for channels_last runs in the layout resolve_layout() chose, and that gives the same logits and
// gradients as the contiguous layout: where this LibTorch's channels_last kernels are wrong (Debian 13's 2.6 with
// oneDNN 3.7 on AVX-512: this very model, 1x1 stride-2 conv on 8x8 maps), the self-check falls back.
TEST(ResNet, ChannelsLastMatchesContiguous) {
  ModelConfig m = resnet_config("resnet18", 3, 10);
  m.stem = StemKind::small;
  m.channels_last = Switch::on;
  const KernelLayout layout = resolve_layout(m, {32, 32, 3}, torch::kCPU);
  EXPECT_TRUE(layout.checked);
  EXPECT_LE(layout.error, kLayoutTolerance);
  EXPECT_EQ(layout.warning.empty(), layout.channels_last && layout.mkldnn) << layout.warning;
  torch::manual_seed(3);
  const auto a = build_model(m, {32, 32, 3});
  torch::manual_seed(3);
  const auto b = build_model(m, {32, 32, 3});
  place_model(*a, torch::kCPU, /*channels_last=*/false);
  place_model(*b, torch::kCPU, layout.channels_last);
  const auto format = layout.channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;

  const torch::Tensor x = torch::randn({4, 3, 32, 32});
  const torch::Tensor target = torch::tensor({1, 4, 7, 9});
  const torch::Tensor la = a->forward(x);
  const torch::Tensor lb = b->forward(x.contiguous(format));
  EXPECT_LT((la - lb).abs().max().item<double>(), 1e-4);
  torch::nn::functional::cross_entropy(la, target).backward();
  torch::nn::functional::cross_entropy(lb, target).backward();
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa) {
    const auto ga = item.value().grad(), gb = pb[item.key()].grad();
    EXPECT_LT((ga - gb).abs().max().item<double>(), 1e-4 * (1.0 + ga.abs().max().item<double>())) << item.key();
  }
  a->eval();
  b->eval();
  EXPECT_LT((a->forward(x) - b->forward(x.contiguous(format))).abs().max().item<double>(), 1e-4);
}

// The fallback order, with probes that stand in for kernels: as asked when right; else contiguous; else oneDNN
// off; else a TrainError naming the model. A contiguous request is never probed.
TEST(LayoutCheck, FallsBackInOrderAndSaysWhy) {
  auto probe_with = [](double channels_last, double contiguous, double no_onednn, int* calls) {
    return [=](bool cl, bool mkldnn) {
      ++*calls;
      return !mkldnn ? no_onednn : (cl ? channels_last : contiguous);
    };
  };
  int calls = 0;
  KernelLayout l = choose_layout(false, probe_with(1, 1, 1, &calls), "m");
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(l.channels_last);
  EXPECT_FALSE(l.checked);

  l = choose_layout(true, probe_with(1e-7, 1, 1, &calls), "m");
  EXPECT_TRUE(l.channels_last && l.mkldnn && l.checked && l.warning.empty());
  EXPECT_EQ(l.error, 1e-7);

  l = choose_layout(true, probe_with(1.3, 2e-7, 1, &calls), "resnet18 at 32x32 on cpu");
  EXPECT_FALSE(l.channels_last);
  EXPECT_TRUE(l.mkldnn);
  EXPECT_NE(l.warning.find(
                "wrong for resnet18 at 32x32 on cpu: relative error 1.3 against a float64 reference (tolerance 0.001)"),
            std::string::npos)
      << l.warning;
  EXPECT_NE(l.warning.find("running in the contiguous layout instead"), std::string::npos) << l.warning;

  l = choose_layout(true, probe_with(1.3, 0.5, 3e-7, &calls), "m");
  EXPECT_TRUE(l.channels_last);
  EXPECT_FALSE(l.mkldnn);
  EXPECT_NE(l.warning.find("running with oneDNN switched off"), std::string::npos) << l.warning;

  try {
    choose_layout(true, probe_with(1.3, 0.5, 0.25, &calls), "resnet50 at 224x224 on cpu");
    ADD_FAILURE() << "no candidate passes: expected a TrainError";
  } catch (const TrainError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run resnet50 at 224x224 on cpu"), std::string::npos) << e.what();
  }
}

// The real probe on this LibTorch: the contiguous layout matches the float64 reference, and probing leaves the
// default generator where it was.
TEST(LayoutCheck, ProbeLeavesTheGeneratorAlone) {
  ModelConfig m = resnet_config("resnet18", 3, 10);
  m.stem = StemKind::small;
  torch::manual_seed(11);
  const torch::Tensor expected = torch::rand({4});
  torch::manual_seed(11);
  const LayoutProbe probe = model_layout_probe(m, {16, 16, 3}, torch::kCPU);
  EXPECT_LT(probe(false, true), 1e-5);
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
  // A model with an index buffer (Swin's relative_position_index) keeps it an index in the float64 reference.
  ModelConfig swin;
  swin.arch = "swin_t";
  swin.in_channels = 3;
  swin.num_classes = 4;
  EXPECT_LT(model_layout_probe(swin, {32, 32, 3}, torch::kCPU)(true, true), 1e-5);
}

TEST(LayoutCheck, AutoFollowsTheModelRow) {
  ModelConfig m = resnet_config("resnet50", 3, 10);
  EXPECT_EQ(m.channels_last, Switch::automatic);
  EXPECT_TRUE(wants_channels_last(m, torch::Device(torch::kCUDA, 0)));
  EXPECT_FALSE(wants_channels_last(m, torch::kCPU));
  m.channels_last = Switch::on;
  EXPECT_TRUE(wants_channels_last(m, torch::kCPU));
  m.channels_last = Switch::off;
  EXPECT_FALSE(wants_channels_last(m, torch::Device(torch::kCUDA, 0)));
  ModelConfig cnn;
  cnn.num_classes = 10;
  EXPECT_FALSE(wants_channels_last(cnn, torch::Device(torch::kCUDA, 0)));
  // Every ResNet, the wide ones and the ResNeXts included, gets channels_last on CUDA by default.
  for (const auto& [name, spec] : resnet_specs()) {
    EXPECT_TRUE(wants_channels_last(resnet_config(name, 3, 10), torch::Device(torch::kCUDA, 0))) << name;
    EXPECT_FALSE(wants_channels_last(resnet_config(name, 3, 10), torch::kCPU)) << name;
  }
}

TEST(ModelFactory, EveryArchHasExactlyOneRow) {
  std::set<std::string> names;
  for (const auto& row : model_rows()) {
    EXPECT_TRUE(names.insert(row.name).second) << "two rows named " << row.name;
    EXPECT_TRUE(row.build) << row.name;
    EXPECT_EQ(&model_row(row.name), &row);
  }
  // mnist_cnn and every spec of every family
  EXPECT_EQ(names.size(), 1 + resnet_specs().size() + convnext_specs().size() + efficientnet_specs().size() +
                              mobilenet_v3_specs().size() + regnet_specs().size() + vit_specs().size() +
                              swin_specs().size());
  EXPECT_TRUE(names.count("mnist_cnn"));
  for (const auto& [name, spec] : resnet_specs()) EXPECT_TRUE(names.count(name)) << name;
  for (const auto& [name, spec] : regnet_specs()) EXPECT_TRUE(names.count(name)) << name;
  // Every torchvision family publishes weights for every variant the table has.
  for (const auto& row : model_rows()) EXPECT_EQ(row.weights.empty(), row.name == "mnist_cnn") << row.name;
}

// What a config cannot ask of a family: each a one-line config error naming the key.
TEST(ModelFactory, KeysAFamilyCannotTakeAreConfigErrors) {
  ModelConfig m;
  m.arch = "convnext_tiny";
  m.in_channels = 3;
  m.num_classes = 4;
  EXPECT_EQ(testing::error_of<ConfigError>([&] {
              build_model(m, {16, 16, 3});
            }),
            "config: data: convnext_tiny takes images of at least 32x32 pixels, got 16x16");
  m.stem = StemKind::small;
  EXPECT_EQ(testing::error_of<ConfigError>([&] {
              build_model(m, {32, 32, 3});
            }),
            "config: model.stem and model.zero_init_residual apply to ResNets; convnext_tiny has neither");
  m.stem = StemKind::imagenet;
  m.stochastic_depth = -0.5;
  EXPECT_EQ(testing::error_of<ConfigError>([&] {
              build_model(m, {32, 32, 3});
            }),
            "config: model.stochastic_depth: expected -1 (the architecture's own) or a value in [0, 0.99], got -0.5");
  m.arch = "regnet_x_400mf";
  m.stochastic_depth = 0.1;
  EXPECT_EQ(testing::error_of<ConfigError>([&] {
              build_model(m, {32, 32, 3});
            }),
            "config: model.stochastic_depth: regnet_x_400mf has no residual branches it drops; leave it at -1 or 0");
  m.stochastic_depth = 0;
  EXPECT_NO_THROW(build_model(m, {32, 32, 3}));
}

// torchvision's _make_divisible, on the values EfficientNet's and MobileNetV3's widths take (from Python).
TEST(ModelFactory, MakeDivisibleIsTorchvisions) {
  EXPECT_EQ(make_divisible(32 * 1.1, 8), 32);  // 35.2
  EXPECT_EQ(make_divisible(40 * 1.1, 8), 48);  // 44 rounds up at the half
  EXPECT_EQ(make_divisible(16 * 1.2, 8), 24);  // 16 would be more than 10% below 19.2
  EXPECT_EQ(make_divisible(320 * 1.8, 8), 576);
  EXPECT_EQ(make_divisible(9, 8), 16);  // 8 would be more than 10% below 9
  EXPECT_EQ(make_divisible(3, 8), 8);   // at least the divisor
  EXPECT_EQ(make_divisible(960 / 4, 8), 240);
}

// Stochastic depth: eval mode and p = 0 pass the branch through; in training each sample's branch is kept or zeroed
// whole, the kept ones scaled by 1 / (1 - p), the draw LibTorch's default generator's (so a seed repeats it).
TEST(ModelFactory, StochasticDepthDropsWholeSamplesAndScalesTheRest) {
  const torch::Tensor x = torch::rand({64, 3, 4, 4}) + 1;
  EXPECT_TRUE(stochastic_depth(x, 0.3, /*training=*/false).equal(x));
  EXPECT_TRUE(stochastic_depth(x, 0.0, /*training=*/true).equal(x));
  torch::manual_seed(5);
  const torch::Tensor y = stochastic_depth(x, 0.25, true);
  int64_t dropped = 0;
  for (int64_t i = 0; i < 64; ++i) {
    if (y[i].abs().max().item<float>() == 0) ++dropped;
    else EXPECT_TRUE(torch::allclose(y[i], x[i] / 0.75)) << i;
  }
  EXPECT_GT(dropped, 4);
  EXPECT_LT(dropped, 32);
  torch::manual_seed(5);
  EXPECT_TRUE(stochastic_depth(x, 0.25, true).equal(y));
  EXPECT_TRUE(stochastic_depth(x, 1.0, true).abs().max().item<float>() == 0);
  EXPECT_DOUBLE_EQ(depth_rate(0.2, 8, 16), 0.1);
  EXPECT_DOUBLE_EQ(depth_rate(0.5, 0, 35), 0.0);
}

// A row's any_input_size is what the model does: it runs at a second input size, or its forward pass fails there.
// And every family exports: its model gives the layer graph the deployment formats translate. Checked on the
// smallest model of each family (the others share their family's builder).
TEST(ModelFactory, AnyInputSizeIsWhatTheModelDoesAndEveryFamilyExports) {
  for (const std::string arch :
       {"mnist_cnn", "resnet18", "resnext50_32x4d", "wide_resnet50_2", "convnext_tiny", "efficientnet_b0",
        "efficientnet_v2_s", "mobilenet_v3_small", "regnet_x_400mf", "swin_t"}) {
    const ModelRow& row = model_row(arch);
    ModelConfig m = arch == "mnist_cnn" ? ModelConfig{} : resnet_config(arch, 1, 3);
    m.num_classes = 3;
    auto model = build_model(m, {32, 32, 1});
    model->eval();
    torch::NoGradGuard no_grad;
    EXPECT_EQ(model->forward(torch::zeros({1, 1, 32, 32})).sizes(), (std::vector<int64_t>{1, 3})) << arch;
    if (row.any_input_size)
      EXPECT_EQ(model->forward(torch::zeros({1, 1, 48, 40})).sizes(), (std::vector<int64_t>{1, 3})) << arch;
    else EXPECT_ANY_THROW(model->forward(torch::zeros({1, 1, 48, 40}))) << arch;
    EXPECT_TRUE(model->inference_graph().has_value()) << arch;
  }
}

// ViT: images cut into whole patches (a config error otherwise), sized for one input (another fails in forward),
// and torchvision's first files' MLP names (mlp.linear_1, mlp.linear_2) read as mlp.0 and mlp.3.
TEST(ModelFactory, ViTTakesWholePatchesAndItsOlderNames) {
  ModelConfig m;
  m.arch = "vit_b_32";
  m.in_channels = 3;
  m.num_classes = 4;
  EXPECT_EQ(testing::error_of<ConfigError>([&] {
              build_model(m, {48, 64, 3});
            }),
            "config: data: vit_b_32 cuts images into 32x32 patches, so their sides must be multiples of 32, got 48x64");
  EXPECT_EQ(testing::error_of<ConfigError>([&] {
              build_model(m, {16, 16, 3});
            }),
            "config: data: vit_b_32 takes images of at least 32x32 pixels, got 16x16");
  m.stochastic_depth = 0.1;
  EXPECT_EQ(testing::error_of<ConfigError>([&] {
              build_model(m, {32, 32, 3});
            }),
            "config: model.stochastic_depth: vit_b_32 has no residual branches it drops; leave it at -1 or 0");
  m.stochastic_depth = -1;
  auto model = build_model(m, {32, 64, 3});
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(torch::zeros({2, 3, 32, 64})).sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_ANY_THROW(model->forward(torch::zeros({2, 3, 64, 64})));
  EXPECT_EQ(model->named_parameters()["encoder.pos_embedding"].sizes(), (std::vector<int64_t>{1, 3, 768}));
  bool said = false;
  const auto renamed =
      model->adapted_weights({{"encoder.layers.encoder_layer_3.mlp.linear_1.weight", torch::zeros({3072, 768})},
                              {"encoder.layers.encoder_layer_3.mlp.linear_2.bias", torch::zeros({768})},
                              {"encoder.pos_embedding", torch::ones({1, 3, 768})}},
                             [&](const std::string&) { said = true; });
  ASSERT_EQ(renamed.size(), 3u);
  EXPECT_EQ(renamed[0].first, "encoder.layers.encoder_layer_3.mlp.0.weight");
  EXPECT_EQ(renamed[1].first, "encoder.layers.encoder_layer_3.mlp.3.bias");
  EXPECT_TRUE(renamed[2].second.equal(torch::ones({1, 3, 768})));  // already this model's size: as it is
  EXPECT_FALSE(said);
}

// model.head_init_scale multiplies the classifier layer's initial values (the row's head), nothing else.
TEST(ModelFactory, HeadInitScaleScalesTheClassifierOnly) {
  ModelConfig m;
  m.arch = "convnext_tiny";
  m.in_channels = 3;
  m.num_classes = 4;
  torch::manual_seed(9);
  const auto plain = build_model(m, {32, 32, 3});
  m.head_init_scale = 0.001;
  torch::manual_seed(9);
  const auto scaled = build_model(m, {32, 32, 3});
  const auto theirs = plain->named_parameters();
  size_t heads = 0;
  for (const auto& p : scaled->named_parameters()) {
    const bool head = starts_with(p.key(), "classifier.2.");
    heads += head ? 1 : 0;
    EXPECT_TRUE(p.value().equal(head ? theirs[p.key()] * 0.001 : theirs[p.key()])) << p.key();
  }
  EXPECT_EQ(heads, 2u);  // weight and bias
  EXPECT_GT(theirs["classifier.2.weight"].abs().max().item<double>(), 0.0);
}

// trunc_normal_ draws by rejection: at std 1.5 about a fifth of the first draws fall outside [-2, 2] and are drawn
// again. Every value lands inside, with the truncated normal's mean and standard deviation
// (sigma^2 (1 - 2 alpha phi(alpha) / (2 Phi(alpha) - 1)), alpha = 2 / sigma), within 6 standard errors of 200,000
// draws.
TEST(TruncNormal, DrawsTheTruncatedNormalInsideItsBounds) {
  torch::manual_seed(5);
  const double sigma = 1.5, n = 200'000;
  torch::Tensor t = torch::empty({static_cast<int64_t>(n)}, torch::kDouble);
  trunc_normal_(t, sigma);
  EXPECT_GE(t.min().item<double>(), -2.0);
  EXPECT_LE(t.max().item<double>(), 2.0);
  const double alpha = 2.0 / sigma;
  const double pdf = std::exp(-alpha * alpha / 2) / std::sqrt(2 * M_PI);
  const double mass = std::erf(alpha / std::sqrt(2.0));  // 2 Phi(alpha) - 1
  const double expected_sd = sigma * std::sqrt(1 - 2 * alpha * pdf / mass);
  // Standard errors: sd / sqrt(n) for the mean; sd / sqrt(2n) bounds the sample sd's (kurtosis below a normal's).
  EXPECT_NEAR(t.mean().item<double>(), 0.0, 6 * expected_sd / std::sqrt(n));
  EXPECT_NEAR(t.std().item<double>(), expected_sd, 6 * expected_sd / std::sqrt(2 * n));
}

// Swin takes any image size from 32 up with the same weights (each stage's map padded to whole windows, an odd
// side padded before merging), non-square ones too; below 32 is a config error.
TEST(ModelFactory, SwinTakesAnySizeFrom32) {
  for (const std::string arch : {"swin_t", "swin_v2_t"}) {
    ModelConfig m;
    m.arch = arch;
    m.in_channels = 3;
    m.num_classes = 4;
    EXPECT_EQ(testing::error_of<ConfigError>([&] {
                build_model(m, {16, 64, 3});
              }),
              "config: data: " + arch + " takes images of at least 32x32 pixels, got 16x64");
    auto model = build_model(m, {32, 32, 3});
    model->eval();
    torch::NoGradGuard no_grad;
    for (const auto& [h, w] : {std::pair<int64_t, int64_t>{32, 32}, {40, 72}, {96, 36}}) {
      const torch::Tensor logits = model->forward(torch::randn({2, 3, h, w}));
      EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 4})) << arch << " " << h << "x" << w;
      EXPECT_TRUE(logits.isfinite().all().item<bool>()) << arch;
    }
  }
}

// The attention every transformer block runs: LibTorch's fused scaled_dot_product_attention where it has one (2.x:
// the torch2 lane) equals the math written out, with and without an additive bias; and the ViT's
// MultiheadAttention equals LibTorch's own nn::MultiheadAttention (sequence-first) given the same weights. The
// tolerance: the same float32 products of 8 terms summed in another order, on values of order 1.
TEST(Attention, FusedKernelAndMathAgreeAndMultiheadAttentionIsPyTorchs) {
  torch::manual_seed(2);
  const torch::Tensor q = torch::randn({2, 3, 5, 8}), k = torch::randn({2, 3, 5, 8}), v = torch::randn({2, 3, 5, 8});
  const torch::Tensor bias = torch::randn({3, 5, 5});
  for (const auto& b : {std::optional<torch::Tensor>{}, std::optional<torch::Tensor>{bias}}) {
    const torch::Tensor fused = compat::attention(q, k, v, b, 0.0, false);
    const torch::Tensor math = compat::attention_math(q, k, v, b, 0.0, false);
    EXPECT_LT((fused - math).abs().max().item<double>(), 1e-5);
    // softmax rows sum to one: each output is a convex mix of v's rows
    EXPECT_LE(math.abs().max().item<double>(), v.abs().max().item<double>() + 1e-5);
  }
  // Swin's shifted windows: [batch, windows, heads, L, d] with a bias per window and head broadcast over the batch;
  // V2's cosine attention scales the queries itself (scale 1). The reference: the scores written out.
  const torch::Tensor q5 = torch::randn({2, 4, 3, 5, 8}), k5 = torch::randn({2, 4, 3, 5, 8});
  const torch::Tensor v5 = torch::randn({2, 4, 3, 5, 8}), bias5 = torch::randn({4, 3, 5, 5});
  const torch::Tensor expected5 =
      torch::matmul(torch::softmax(torch::matmul(q5, k5.transpose(-2, -1)) + bias5, -1), v5);
  EXPECT_LT((compat::attention(q5, k5, v5, bias5, 0.0, false, 1.0) - expected5).abs().max().item<double>(), 1e-5);
  EXPECT_LT((compat::attention_math(q5, k5, v5, bias5, 0.0, false, 1.0) - expected5).abs().max().item<double>(), 1e-5);
  MultiheadAttention mine(24, 3, 0.0);
  torch::nn::MultiheadAttention theirs(torch::nn::MultiheadAttentionOptions(24, 3));
  {
    torch::NoGradGuard no_grad;
    theirs->in_proj_weight.copy_(mine.in_proj_weight);
    theirs->in_proj_bias.normal_();
    mine.in_proj_bias.copy_(theirs->in_proj_bias);
    theirs->out_proj->weight.copy_(mine.out_proj->weight);
    mine.out_proj->bias.normal_();
    theirs->out_proj->bias.copy_(mine.out_proj->bias);
  }
  mine.eval();
  theirs->eval();
  const torch::Tensor x = torch::randn({2, 7, 24});  // [N, L, D]
  const torch::Tensor t = x.transpose(0, 1);         // [L, N, D]
  const torch::Tensor expected = std::get<0>(theirs->forward(t, t, t)).transpose(0, 1);
  EXPECT_LT((mine.forward(x) - expected).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace trainer
