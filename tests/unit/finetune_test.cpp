// Fine-tuning's model-side knobs: optim.lr_mult's parameter groups and model.freeze's frozen layers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "trainer/data/loader/epoch_sampler.hpp"
#include "trainer/data/sources/holdout_split.hpp"
#include "trainer/engine/mix.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/frozen_layers.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

ClassifierPtr mnist_cnn() {
  ModelConfig m;
  m.num_classes = 10;
  torch::manual_seed(0);
  return build_model(m, {28, 28, 1});
}

std::vector<std::string> names_in(const torch::optim::OptimizerParamGroup& group, const torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& p : group.params())
    for (const auto& item : model.named_parameters())
      if (item.value().is_same(p)) names.push_back(item.key());
  return names;
}

TEST(LrMult, EachMultiplierHasItsGroupsAndTheLongestPatternWins) {
  auto model = mnist_cnn();
  OptimConfig o;
  o.weight_decay = 1e-4;
  o.lr_mult = {{"fc*", 2.0}, {"fc2.*", 10.0}};
  auto opt = make_optimizer(o, *model);
  const auto mult = lr_multipliers(o, *model);
  ASSERT_EQ(mult, (std::vector<double>{1, 1, 2, 2, 10, 10}));
  auto& groups = opt->param_groups();
  ASSERT_EQ(groups.size(), 6u);
  EXPECT_EQ(names_in(groups[0], *model), (std::vector<std::string>{"conv1.weight", "conv2.weight"}));
  EXPECT_EQ(names_in(groups[1], *model), (std::vector<std::string>{"conv1.bias", "conv2.bias"}));
  EXPECT_EQ(names_in(groups[4], *model), (std::vector<std::string>{"fc2.weight"}));
  EXPECT_EQ(names_in(groups[5], *model), (std::vector<std::string>{"fc2.bias"}));
  set_learning_rate(*opt, 0.1, mult);
  const std::vector<double> expected{0.1, 0.1, 0.2, 0.2, 1.0, 1.0};
  for (size_t k = 0; k < groups.size(); ++k) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(groups[k].options());
    EXPECT_DOUBLE_EQ(options.lr(), expected[k]) << k;
    EXPECT_DOUBLE_EQ(options.weight_decay(), k % 2 == 0 ? 1e-4 : 0.0) << k;
  }
  // Without lr_mult: the two groups every run had.
  EXPECT_EQ(make_optimizer(OptimConfig{}, *model)->param_groups().size(), 2u);

  o.lr_mult = {{"head.*", 10.0}};
  EXPECT_THROW(make_optimizer(o, *model), ConfigError);
  o.lr_mult = {{"fc2.*", -1.0}};
  EXPECT_THROW(make_optimizer(o, *model), ConfigError);
}

// optim.layer_decay over a ConvNeXt-Tiny: 18 CNBlocks, the stem and 3 downsampling layers are 22 blocks below
// the classifier; block k of 22 (from 0) learns at layer_decay^(22 - k), the classifier at 1. optim.no_decay takes
// the layer scales (3-D, so decayed by dimension) out of weight decay by name.
TEST(LayerDecay, EachBlockTakesTheFactorOnceMoreFromTheClassifierDown) {
  ModelConfig m;
  m.arch = "convnext_tiny";
  m.in_channels = 3;
  m.num_classes = 5;
  auto model = build_model(m, {32, 32, 3});
  OptimConfig o;
  o.weight_decay = 0.05;
  o.layer_decay = 0.5;
  o.no_decay = {"*.layer_scale"};
  const BlockOf& block_of = model_row("convnext_tiny").block_of;
  std::map<std::string, double> lr_of, decay_of;
  for (const auto& g : param_groups(o, *model, block_of))
    for (const auto& p : g.parameters)
      for (const auto& item : model->named_parameters())
        if (item.value().is_same(p)) {
          lr_of[item.key()] = g.lr_mult;
          decay_of[item.key()] = g.weight_decay;
        }
  ASSERT_EQ(lr_of.size(), model->named_parameters().size());
  EXPECT_DOUBLE_EQ(lr_of.at("classifier.2.weight"), 1.0);
  EXPECT_DOUBLE_EQ(lr_of.at("classifier.0.weight"), 1.0);                // the head's norm: the classifier
  EXPECT_DOUBLE_EQ(lr_of.at("features.7.2.block.5.weight"), 0.5);        // the last block
  EXPECT_DOUBLE_EQ(lr_of.at("features.7.0.layer_scale"), 0.125);         // three below the classifier
  EXPECT_DOUBLE_EQ(lr_of.at("features.6.1.weight"), 0.0625);             // the last downsampling layer
  EXPECT_DOUBLE_EQ(lr_of.at("features.0.0.weight"), std::pow(0.5, 22));  // the stem
  EXPECT_DOUBLE_EQ(lr_of.at("features.0.1.bias"), std::pow(0.5, 22));
  EXPECT_DOUBLE_EQ(decay_of.at("features.1.0.block.3.weight"), 0.05);
  EXPECT_DOUBLE_EQ(decay_of.at("features.1.0.layer_scale"), 0.0);
  EXPECT_DOUBLE_EQ(decay_of.at("features.1.0.block.2.weight"), 0.0);  // a LayerNorm: 1-D
  EXPECT_EQ(lr_multipliers(o, *model, block_of).size(), param_groups(o, *model, block_of).size());

  o.no_decay = {"*.gamma"};
  EXPECT_THROW(param_groups(o, *model, block_of), ConfigError);
  o.no_decay.clear();
  EXPECT_THROW(param_groups(o, *model), ConfigError);  // no block order
}

// Every family's blocks come in depth order: the stem first, the classifier last, each block's parameters together.
TEST(LayerDecay, EveryFamilyNumbersItsBlocksFromTheStem) {
  for (const std::string arch :
       {"resnet18", "convnext_tiny", "efficientnet_b0", "efficientnet_v2_s", "mobilenet_v3_small", "regnet_y_400mf",
        "vit_b_32", "swin_v2_t"}) {
    ModelConfig m;
    m.arch = arch;
    m.in_channels = 3;
    m.num_classes = 5;
    const auto model = build_model(m, {32, 32, 3});
    const BlockOf& block_of = model_row(arch).block_of;
    ASSERT_TRUE(block_of) << arch;
    std::vector<std::string> order;
    for (const auto& item : model->named_parameters()) {
      const std::string block = block_of(item.key());
      if (order.empty() || order.back() != block) {
        EXPECT_EQ(std::count(order.begin(), order.end(), block), 0) << arch << ": " << block << " comes back";
        order.push_back(block);
      }
    }
    EXPECT_EQ(order.back(), "") << arch;
    EXPECT_GE(order.size(), 10u) << arch;  // resnet18: stem, 8 blocks, classifier
  }
  EXPECT_EQ(model_row("efficientnet_b0").block_of("features.2.1.block.3.1.weight"), "features.2.1");
  EXPECT_EQ(model_row("efficientnet_b0").block_of("features.8.0.weight"), "features.8");
  EXPECT_EQ(model_row("regnet_y_400mf").block_of("trunk_output.block2.block2-1.f.se.fc1.bias"),
            "trunk_output.block2.block2-1");
  EXPECT_EQ(model_row("resnet18").block_of("bn1.weight"), "stem");
  // ViT: the embedding first, each encoder layer a block, the final LayerNorm with the head (BEiT's numbering).
  EXPECT_EQ(model_row("vit_b_16").block_of("class_token"), "stem");
  EXPECT_EQ(model_row("vit_b_16").block_of("encoder.pos_embedding"), "stem");
  EXPECT_EQ(model_row("vit_b_16").block_of("encoder.layers.encoder_layer_11.mlp.3.bias"),
            "encoder.layers.encoder_layer_11");
  EXPECT_EQ(model_row("vit_b_16").block_of("encoder.ln.weight"), "");
  // Swin: ConvNeXt's layout (stem, each block, each patch merging), the final LayerNorm with the head.
  EXPECT_EQ(model_row("swin_t").block_of("features.0.2.weight"), "features.0");
  EXPECT_EQ(model_row("swin_t").block_of("features.5.3.attn.relative_position_bias_table"), "features.5.3");
  EXPECT_EQ(model_row("swin_t").block_of("features.6.reduction.weight"), "features.6");
  EXPECT_EQ(model_row("swin_t").block_of("norm.weight"), "");
  EXPECT_EQ(model_row("swin_t").block_of("head.bias"), "");
  EXPECT_FALSE(model_row("mnist_cnn").block_of);
}

ClassifierPtr small_resnet() {
  ModelConfig m;
  m.arch = "resnet18";
  m.in_channels = 1;
  m.stem = StemKind::small;
  m.num_classes = 5;
  torch::manual_seed(0);
  return build_model(m, {28, 28, 1});
}

TEST(Freeze, FrozenParametersTakeNoStepAndTheirBatchNormKeepsItsStatistics) {
  auto model = small_resnet();
  FrozenLayers frozen(*model, {"conv1.*", "bn1.*", "layer1.*"});
  frozen.set(true);
  OptimConfig o;
  o.weight_decay = 0.1;  // a frozen weight must not decay either
  auto opt = make_optimizer(o, *model);
  auto params = model->named_parameters();
  auto buffers = model->named_buffers();
  const auto conv1 = params["conv1.weight"].clone(), block = params["layer1.0.conv1.weight"].clone();
  const auto fc = params["fc.weight"].clone(), stem_mean = buffers["bn1.running_mean"].clone();
  const auto layer2_mean = buffers["layer2.0.bn1.running_mean"].clone();

  model->train();
  frozen.keep_norms_in_eval();
  EXPECT_FALSE(model->named_modules()["bn1"]->is_training());
  EXPECT_FALSE(model->named_modules()["layer1.1.bn2"]->is_training());
  EXPECT_TRUE(model->named_modules()["layer2.0.bn1"]->is_training());
  const auto loss =
      torch::nn::functional::cross_entropy(model->forward(torch::randn({4, 1, 28, 28})), torch::tensor({0, 1, 2, 3}));
  loss.backward();
  opt->step();
  EXPECT_FALSE(params["conv1.weight"].grad().defined());
  EXPECT_TRUE(torch::equal(params["conv1.weight"], conv1));
  EXPECT_TRUE(torch::equal(params["layer1.0.conv1.weight"], block));
  EXPECT_TRUE(torch::equal(buffers["bn1.running_mean"], stem_mean));
  EXPECT_FALSE(torch::equal(params["fc.weight"], fc));
  EXPECT_FALSE(torch::equal(buffers["layer2.0.bn1.running_mean"], layer2_mean));

  frozen.set(false);
  model->train();
  frozen.keep_norms_in_eval();
  EXPECT_TRUE(model->named_modules()["bn1"]->is_training());
  EXPECT_TRUE(params["conv1.weight"].requires_grad());

  EXPECT_THROW(FrozenLayers(*model, {"layer9.*"}), ConfigError);
}

TEST(BalancedSampler, EveryClassIsDrawnAsOftenAndTheOrderIsAFunctionOfSeedAndEpoch) {
  // 90 images of class 0, 10 of class 1.
  auto members = std::make_shared<ClassMembers>(2);
  for (size_t i = 0; i < 100; ++i) (*members)[i < 90 ? 0 : 1].push_back(i);
  size_t rare = 0, draws = 0;
  for (int64_t epoch = 0; epoch < 50; ++epoch) {
    const auto order = EpochSampler::epoch_order(100, 7, epoch, true, 1, members.get());
    ASSERT_EQ(order.size(), 100u);
    for (const size_t i : order) rare += i >= 90, ++draws;
  }
  EXPECT_NEAR(static_cast<double>(rare) / static_cast<double>(draws), 0.5, 0.03);
  EXPECT_EQ(EpochSampler::epoch_order(100, 7, 3, true, 1, members.get()),
            EpochSampler::epoch_order(100, 7, 3, true, 1, members.get()));
  EXPECT_NE(EpochSampler::epoch_order(100, 7, 3, true, 1, members.get()),
            EpochSampler::epoch_order(100, 7, 4, true, 1, members.get()));
  // Through the sampler, as a loader takes it: the batches are the order's, whatever the rank split.
  SamplerOptions o;
  o.size = 100;
  o.batch_size = 10;
  o.seed = 7;
  o.epoch = 3;
  o.balanced = members;
  EpochSampler whole(o);
  const auto first = *whole.next(10);
  const auto order = EpochSampler::epoch_order(100, 7, 3, true, 1, members.get());
  EXPECT_EQ(first, std::vector<size_t>(order.begin(), order.begin() + 10));
}

TEST(ClassWeights, WeighEachImagesLossByItsClass) {
  torch::manual_seed(0);
  const auto logits = torch::randn({6, 3});
  const auto labels = torch::tensor({0, 0, 0, 0, 1, 2});
  const auto weights = torch::tensor({0.5f, 2.0f, 2.0f});
  const MixedBatch batch{torch::Tensor(), labels, {}, 1.0, false};
  const auto per_image = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  const auto w = weights.index_select(0, labels);
  const double expected = ((per_image * w).sum() / w.sum()).item<double>();
  EXPECT_NEAR(mixed_cross_entropy(logits, batch, 0.0, weights).item<double>(), expected, 1e-6);
  EXPECT_NEAR(mixed_cross_entropy(logits, batch, 0.0).item<double>(), per_image.mean().item<double>(), 1e-6);
}

FileList photos(const std::vector<int>& per_class) {
  FileList files;
  for (size_t c = 0; c < per_class.size(); ++c)
    for (int i = 0; i < per_class[c]; ++i)
      files.add("c" + std::to_string(c) + "/p" + std::to_string(i) + ".jpg", static_cast<int64_t>(c));
  return files;
}

TEST(HoldoutSplit, IsStratifiedDisjointAndAFunctionOfItsSeedAndTheNames) {
  const FileList files = photos({10, 5, 2});
  const std::vector<std::string> names{"a", "b", "c"};
  const auto held = choose_holdout(files, names, 0.2, 1);
  std::map<char, int> per_class;
  for (const auto& f : held) ++per_class[f[1]];
  EXPECT_EQ(per_class, (std::map<char, int>{{'0', 2}, {'1', 1}, {'2', 1}}));  // at least 1, at most n - 1
  EXPECT_EQ(choose_holdout(files, names, 0.2, 1), held);
  EXPECT_NE(choose_holdout(files, names, 0.2, 2), held);
  const HoldoutLists lists = split_holdout(files, held, "photos");
  EXPECT_EQ(lists.val.size(), held.size());
  EXPECT_EQ(lists.train.size() + lists.val.size(), files.size());
  std::set<std::string> val;
  for (size_t i = 0; i < lists.val.size(); ++i) val.insert(lists.val.path(i));
  for (size_t i = 0; i < lists.train.size(); ++i) EXPECT_FALSE(val.count(lists.train.path(i))) << lists.train.path(i);
  // More photos in one class leave the choice in the others as it was.
  const auto more = choose_holdout(photos({11, 5, 2}), names, 0.2, 1);
  for (const auto& f : held)
    if (f[1] != '0') {
      EXPECT_NE(std::find(more.begin(), more.end(), f), more.end()) << f;
    }

  EXPECT_THROW(choose_holdout(photos({3, 1}), names, 0.2, 1), DataError);
  EXPECT_THROW(split_holdout(files, {"c9/gone.jpg"}, "photos"), DataError);
  EXPECT_THROW(split_holdout(files, {held[0], held[0]}, "photos"), DataError);
}

}  // namespace
}  // namespace trainer
