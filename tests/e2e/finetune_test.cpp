// Fine-tuning on a folder of one's own photos: a validation split held out of the class folders (kept by resume
// and eval, apart from run.seed), frozen layers lifted at an epoch with an exact resume across it, and the
// imbalanced-class knobs as a run reports them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/e2e_support.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"

namespace trainer {
namespace {

using nlohmann::json;
using testing::read_text;
using testing::SmallRun;
using testing::TempDir;
using testing::trainer_cli;
using testing::write_text;
namespace fs = std::filesystem;

// my_photos/<class>/*: three classes of 8 images, no train/ or val/ folder.
struct PhotoRun {
  TempDir dir;
  fs::path config;
  explicit PhotoRun(json overrides = json::object()) {
    testing::write_image_folder(dir / "tmp", {3, 8, 1, true});
    fs::rename(dir / "tmp" / "train", dir / "my_photos");
    json c = testing::small_folder_config(dir / "my_photos");
    c.merge_patch(json{{"data", {{"val_fraction", 0.25}, {"split_seed", 5}}}, {"train", {{"epochs", 1}}}});
    c.merge_patch(overrides);
    config = dir / "config.json";
    write_text(config, c.dump(2));
  }
  testing::CommandResult train(const std::string& out, const std::string& extra = "") const {
    return trainer_cli("--config " + config.string() + " -o " + (dir / out).string() + " " + extra);
  }
  json val_files(const std::string& out) const {
    return json::parse(read_text(dir / out / "config.resolved.json"))["data"]["val_files"];
  }
};

TEST(ValFraction, HoldsOutAStratifiedSplitThatRunSeedResumeAndEvalKeep) {
  PhotoRun run;
  const auto a = run.train("a");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("data.val_fraction 0.25: 6 images held out for validation (data.split_seed 5)"),
            std::string::npos)
      << a.output;
  EXPECT_NE(a.output.find("(18 images, 3 classes"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("/6) top5"), std::string::npos) << a.output;  // the eval line counts the 6
  const json held = run.val_files("a");
  ASSERT_EQ(held.size(), 6u);
  std::map<std::string, int> per_class;
  for (const auto& f : held) ++per_class[f.get<std::string>().substr(0, 2)];
  EXPECT_EQ(per_class, (std::map<std::string, int>{{"n0", 2}, {"n1", 2}, {"n2", 2}}));

  // Another run.seed holds out the same images; another split_seed others.
  ASSERT_EQ(run.train("b", "--set run.seed=9").exit_code, 0);
  EXPECT_EQ(run.val_files("b"), held);
  ASSERT_EQ(run.train("c", "--set data.split_seed=6").exit_code, 0);
  EXPECT_NE(run.val_files("c"), held);

  // New photos after the run started go to training; the recorded split stays as it was.
  cv::imwrite((run.dir / "my_photos" / "n0" / "new.JPEG").string(), testing::class_image(0, 40, 40, 7));
  const auto resumed = trainer_cli("--resume " + (run.dir / "a" / "last.pt").string() + " --set train.epochs=2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(run.val_files("a"), held);
  EXPECT_NE(resumed.output.find("(19 images, 3 classes"), std::string::npos) << resumed.output;
  // The same with the config file given again, which names no files: the run's record still decides.
  const auto again = trainer_cli("--resume " + (run.dir / "a" / "last.pt").string() + " --config " +
                                 run.config.string() + " --set train.epochs=3");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(run.val_files("a"), held);
  const auto eval = trainer_cli("eval --checkpoint " + (run.dir / "a" / "best.pt").string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find(": 6 images"), std::string::npos) << eval.output;
  EXPECT_NE(eval.output.find("balanced accuracy"), std::string::npos) << eval.output;

  // A held-out image that disappeared: the split cannot be kept, one line, exit 2.
  fs::remove(run.dir / "my_photos" / held[0].get<std::string>());
  const auto gone = trainer_cli("eval --checkpoint " + (run.dir / "a" / "best.pt").string());
  EXPECT_EQ(gone.exit_code, 2) << gone.output;
  EXPECT_NE(gone.output.find("held out for validation by this run"), std::string::npos) << gone.output;
}

TEST(ValFraction, AClassTooSmallToSplitIsOneLine) {
  PhotoRun run;
  for (int i = 1; i < 8; ++i)
    fs::remove(run.dir / "my_photos" / "n2" / ("img" + std::to_string(i) + (i % 2 ? ".png" : ".JPEG")));
  const auto r = run.train("a");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.val_fraction: class \"n2\" has 1 image"), std::string::npos) << r.output;
}

TEST(ImbalancedClasses, BalancedSamplingAndClassWeightsAreSaidAndTrain) {
  PhotoRun run(json{{"data", {{"sampler", "balanced"}}}, {"train", {{"class_weights", "balanced"}}}});
  fs::remove(run.dir / "my_photos" / "n1" / "img7.png");  // 7 images of n1, 8 of the others
  const auto r = run.train("a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // n1 keeps 5 of its 7 for training, the others 6 of 8: weights 17 / (3 x 6) and 17 / (3 x 5).
  EXPECT_NE(r.output.find("train.class_weights balanced: from 0.944 (the most frequent class) to 1.133"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" balanced "), std::string::npos) << r.output;
}

std::map<std::string, torch::Tensor> weights_of(const fs::path& checkpoint) {
  const LoadedCheckpoint ck(checkpoint);
  auto model = build_model(resolve_config(ck.meta().config).model, {28, 28, 1});
  ck.restore_model(*model);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model->named_parameters()) out[p.key()] = p.value().clone();
  return out;
}

TEST(Freeze, TheHeadTrainsFirstThenAllAndAResumeAcrossTheUnfreezeIsExact) {
  SmallRun run(json{{"model", {{"freeze", {"conv1.*", "conv2.*"}}}},
                    {"optim", {{"lr_mult", {{"fc2.*", 10}}}}},
                    {"train", {{"epochs", 2}, {"unfreeze_at_epoch", 1}}}});
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  const auto a = trainer_cli("--config " + run.config.string() + " -o " + straight.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("model.freeze: 18816 values frozen (0 BatchNorm layers keep their statistics) for the "
                          "first 1 epoch(s)"),
            std::string::npos)
      << a.output;
  EXPECT_NE(a.output.find("model.freeze lifted after epoch 1: every layer trains"), std::string::npos) << a.output;

  const auto b1 = trainer_cli("--config " + run.config.string() + " -o " + split.string() + " --stop-after-epoch 1");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  // After the frozen epoch the convolutions are still the initial ones (the run's seed builds them).
  ModelConfig m;
  m.num_classes = 10;
  torch::manual_seed(3);
  auto initial = build_model(m, {28, 28, 1});
  auto after_one = weights_of(split / "last.pt");
  EXPECT_TRUE(torch::equal(after_one["conv1.weight"], initial->named_parameters()["conv1.weight"]));
  EXPECT_TRUE(torch::equal(after_one["conv2.bias"], initial->named_parameters()["conv2.bias"]));
  EXPECT_FALSE(torch::equal(after_one["fc1.weight"], initial->named_parameters()["fc1.weight"]));

  const auto b2 = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  auto x = weights_of(straight / "last.pt"), y = weights_of(split / "last.pt");
  for (const auto& [name, t] : x) EXPECT_TRUE(torch::equal(t, y[name])) << name;
  EXPECT_FALSE(torch::equal(x["conv1.weight"], initial->named_parameters()["conv1.weight"]));
}

}  // namespace
}  // namespace trainer
