// fit() driven in-process: what a run leaves behind when libtorch fails inside a step, and the rule for the
// epoch's last partial batch (data/loader/last_batch.hpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/fixtures.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/loader/last_batch.hpp"
#include "trainer/engine/fit.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/classifier.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

Config dropout_run(const fs::path& data) {
  return resolve_config(
      nlohmann::json{{"run", {{"seed", 5}, {"threads", 1}, {"tensorboard", false}, {"plot", false}}},
                     {"data", {{"kind", "mnist"}, {"root", data.string()}, {"batch_size", 8}, {"workers", 0}}},
                     {"model", {{"arch", "mnist_cnn"}, {"dropout", 0.3}}},
                     {"train", {{"epochs", 1}, {"accumulate_steps", 2}, {"log_every", 1}}}});
}

Session session_in(const Config& c, const fs::path& dir) {
  fs::create_directories(dir);
  return make_session(c, dir, make_run_logs(dir), nullptr);
}

// A libtorch error in the backward pass of step 3's second micro-batch: last.pt holds step 2 exactly as a run
// stopped after step 2 saves it (weights, optimizer, data position, generators), so --resume redoes step 3.
TEST(FitFailure, ALibTorchErrorInAStepSavesTheLastCompletedStep) {
  TempDir dir;
  testing::write_mnist_dir(dir / "data", 64, 16);
  const Config c = dropout_run(dir / "data");
  {
    Session straight = session_in(c, dir / "straight");
    FitLimits limits;
    limits.step = 2;
    fit(straight, limits);
  }
  Session failing = session_in(c, dir / "failing");
  int backward_passes = 0;
  failing.model->parameters()[0].register_hook(
      [&](const torch::Tensor&) { TORCH_CHECK(++backward_passes != 6, "injected kernel failure"); });
  std::string message;
  try {
    fit(failing);
  } catch (const TrainError& e) {
    message = e.message();
  }
  EXPECT_NE(message.find("libtorch failed in step 3 (epoch 1): injected kernel failure"), std::string::npos) << message;
  EXPECT_NE(message.find("failing/last.pt at step 2: resume with trainer --resume"), std::string::npos) << message;

  const LoadedCheckpoint a(dir / "straight" / "last.pt"), b(dir / "failing" / "last.pt");
  EXPECT_EQ(b.meta().step, 2);
  EXPECT_EQ(b.meta().batch_in_epoch, 4);
  EXPECT_EQ(a.meta().batch_in_epoch, b.meta().batch_in_epoch);
  auto model_a = build_model(failing.config.model, {28, 28, 1}),  // num_classes as resolved from the data
      model_b = build_model(failing.config.model, {28, 28, 1});
  a.restore_model(*model_a);
  b.restore_model(*model_b);
  for (size_t i = 0; i < model_a->parameters().size(); ++i)
    EXPECT_TRUE(torch::equal(model_a->parameters()[i], model_b->parameters()[i])) << i;
  a.restore_rng();
  const auto draws_a = torch::rand({16});
  b.restore_rng();
  EXPECT_TRUE(torch::equal(draws_a, torch::rand({16})));
}

TEST(LastBatch, AutoDropsOnlyWhatTheModelCannotTrainOn) {
  DataConfig d;
  d.batch_size = 8;
  EXPECT_FALSE(last_batch_rule(48, d, 1, true).drop);
  EXPECT_TRUE(last_batch_rule(48, d, 1, true).note.empty());  // no partial batch: nothing to say
  const LastBatch one = last_batch_rule(49, d, 1, true);
  EXPECT_TRUE(one.drop);
  EXPECT_EQ(one.note,
            "the last batch of each epoch holds 1 of 49 training images, and a model with BatchNorm needs "
            "2 images per process to train: it is dropped (data.drop_last auto)");
  EXPECT_FALSE(last_batch_rule(49, d, 1, false).drop);  // no BatchNorm: one image trains
  EXPECT_FALSE(last_batch_rule(50, d, 1, true).drop);
  EXPECT_TRUE(last_batch_rule(51, d, 2, true).drop);  // 3 images over 2 processes: one gets 1
  EXPECT_FALSE(last_batch_rule(52, d, 2, true).drop);
  EXPECT_TRUE(last_batch_rule(49, d, 2, false).drop);  // 1 image over 2 processes: one gets none

  d.drop_last = Switch::on;
  EXPECT_TRUE(last_batch_rule(50, d, 1, false).drop);
  d.drop_last = Switch::off;
  EXPECT_FALSE(last_batch_rule(50, d, 1, true).drop);
  EXPECT_NE(testing::error_of<ConfigError>([&] {
              last_batch_rule(49, d, 1, true);
            }).find("data.drop_last: false keeps a last batch too small to train on"),
            std::string::npos);
  d.drop_last = Switch::automatic;
  EXPECT_NE(testing::error_of<ConfigError>([&] {
              last_batch_rule(1, d, 1, true);
            }).find("data.batch_size: 8 leaves a single batch"),
            std::string::npos);
}

TEST(LastBatch, BatchNormIsFoundInResNetsOnly) {
  ModelConfig m;
  m.num_classes = 10;
  EXPECT_FALSE(has_batch_norm(*build_model(m, {28, 28, 1})));
  m.arch = "resnet18";
  EXPECT_TRUE(has_batch_norm(*build_model(m, {28, 28, 1})));
}

}  // namespace
}  // namespace trainer
