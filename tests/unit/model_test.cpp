#include <gtest/gtest.h>

#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

TEST(SimpleCnn, HasTheClassicExampleLayersAndNames) {
  ModelConfig m;
  const auto model = build_model(m, {28, 28, 1});
  std::vector<std::string> names;
  int64_t count = 0;
  for (const auto& item : model->named_parameters()) {
    names.push_back(item.key());
    count += item.value().numel();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                              "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(model->named_parameters()["fc1.weight"].sizes(), (std::vector<int64_t>{128, 9216}));
  EXPECT_EQ(count, 1199882);  // the PyTorch example's parameter count
  EXPECT_EQ(model->forward(torch::zeros({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
}

TEST(SimpleCnn, FollowsConfiguredChannelsClassesAndSize) {
  ModelConfig m;
  m.in_channels = 3;
  m.num_classes = 4;
  const auto model = build_model(m, {12, 10, 3});
  EXPECT_EQ(model->forward(torch::zeros({2, 3, 12, 10})).sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_THROW(build_model(m, {12, 10, 1}), ConfigError);
}

TEST(ModelFactory, UnknownArchListsTheValidOnes) {
  ModelConfig m;
  m.arch = "mnist_cnnn";
  try {
    check_model_arch(m);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "config: model.arch: unknown architecture \"mnist_cnnn\"; did you mean \"mnist_cnn\"? (valid: mnist_cnn)");
  }
}

}  // namespace
}  // namespace trainer
