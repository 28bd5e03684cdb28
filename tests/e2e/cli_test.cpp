#include <gtest/gtest.h>

#include <torch/version.h>

#include <regex>

#include "e2e/e2e_support.hpp"
#include "trainer/config/load.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/checkpoint.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;
using nlohmann::json;

TEST(Cli, VersionNamesLibTorchAndDevices) {
  const auto r = trainer_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("trainer 0."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("LibTorch " TORCH_VERSION), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CUDA"), std::string::npos) << r.output;
}

TEST(Cli, HelpListsCommandsAndOptions) {
  const auto r = trainer_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"--config", "--resume", "--set", "--smoke", "--output-dir", "eval"})
    EXPECT_NE(r.output.find(word), std::string::npos) << word;
  const auto e = trainer_cli("eval --help");
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_NE(e.output.find("--checkpoint"), std::string::npos);
}

TEST(Cli, UsageErrorsExitWith2) {
  const auto flag = trainer_cli("--no-such-flag");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.output.find("--no-such-flag"), std::string::npos) << flag.output;
  EXPECT_EQ(trainer_cli("").exit_code, 2);
  const auto eval = trainer_cli("eval");
  EXPECT_EQ(eval.exit_code, 2);
  EXPECT_NE(eval.output.find("--checkpoint"), std::string::npos) << eval.output;
  // An existing config, so the malformed --set is what stops the run.
  const auto set = trainer_cli("--config " TRAINER_SOURCE_DIR "/configs/mnist_cnn.json --set optim.lr");
  EXPECT_EQ(set.exit_code, 2);
  EXPECT_EQ(set.output, "error: usage: --set expects KEY=VALUE (for example optim.lr=0.1), got \"optim.lr\"\n");
  // 0 processes is a mistake, not one process.
  const auto none = trainer_cli("--config " TRAINER_SOURCE_DIR "/configs/mnist_cnn.json --nproc-per-node 0");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.output, "error: usage: --nproc-per-node 0: expected a number of processes >= 1\n");
  // More processes than the machine holds (cores on the CPU): refused before any starts.
  const auto many = trainer_cli("--config " TRAINER_SOURCE_DIR
                                "/configs/mnist_cnn.json --set run.device=cpu "
                                "--nproc-per-node 100000");
  EXPECT_EQ(many.exit_code, 2);
  EXPECT_NE(many.output.find("error: usage: --nproc-per-node 100000: this machine has "), std::string::npos)
      << many.output;
}

TEST(Cli, BadConfigIsOneLineAndExit2) {
  SmallRun run;
  const auto r = trainer_cli("--config " + run.config.string() + " --set optim.lr=-1 -o " + (run.dir / "r").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "error: config: optim.lr: expected a number > 0, got -1\n");
  const auto typo =
      trainer_cli("--config " + run.config.string() + " --set train.epoch=3 -o " + (run.dir / "r").string());
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("train.epoch: unknown key; did you mean \"epochs\"?"), std::string::npos) << typo.output;
  const auto names = trainer_cli("--config " + run.config.string() + " --set 'data.class_names=[\"a\",\"b\"]' -o " +
                                 (run.dir / "r").string());
  EXPECT_EQ(names.exit_code, 2);
  EXPECT_EQ(names.output, "error: config: data.class_names: expected model.num_classes (10) names, got 2\n");
  const auto arch =
      trainer_cli("--config " + run.config.string() + " --set model.arch=resnet9 -o " + (run.dir / "r").string());
  EXPECT_EQ(arch.exit_code, 2);
  EXPECT_NE(arch.output.find("valid: mnist_cnn"), std::string::npos) << arch.output;
}

TEST(Cli, MissingDataIsExit2NamingTheFolder) {
  SmallRun run;
  const auto r = trainer_cli("--config " + run.config.string() + " --set data.root=" + (run.dir / "nowhere").string() +
                             " -o " + (run.dir / "r").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("error: data: " + (run.dir / "nowhere").string()), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(Cli, TrainEvalResumeEndToEnd) {
  SmallRun run;
  const fs::path out = run.dir / "run";
  const auto train = trainer_cli("--config " + run.config.string() + " -o " + out.string());
  ASSERT_EQ(train.exit_code, 0) << train.output;
  for (const char* file : {"last.pt", "best.pt", "config.resolved.json", "train.log", "metrics.csv", "metrics.jsonl"})
    EXPECT_TRUE(fs::exists(out / file)) << file;
  const json resolved = json::parse(read_text(out / "config.resolved.json"));
  EXPECT_EQ(resolved["train"]["epochs"], 2);
  EXPECT_EQ(resolved["run"]["name"], "config");

  // The generated classes are easy: well above the 10% of chance after 2 epochs.
  const auto eval =
      trainer_cli("eval --checkpoint " + (out / "best.pt").string() + " --output " + (run.dir / "eval.json").string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const json result = json::parse(read_text(run.dir / "eval.json"));
  EXPECT_EQ(result["images"], 256);
  EXPECT_GT(result["top1"].get<double>(), 0.5) << eval.output;
  EXPECT_GE(result["top5"].get<double>(), result["top1"].get<double>());

  // The eval row in metrics.jsonl agrees with what eval computes from best.pt.
  double logged_top1 = -1;
  std::istringstream lines(read_text(out / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const json row = json::parse(line);
    if (row["kind"] == "eval") logged_top1 = std::max(logged_top1, row["top1"].get<double>());
  }
  EXPECT_DOUBLE_EQ(logged_top1, result["top1"].get<double>());

  // A finished run has nothing to do; more epochs continue it.
  const auto again = trainer_cli("--resume " + (out / "last.pt").string());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to do"), std::string::npos) << again.output;
  const auto more = trainer_cli("--resume " + (out / "last.pt").string() + " --set train.epochs=3");
  ASSERT_EQ(more.exit_code, 0) << more.output;
  EXPECT_NE(more.output.find("train.epochs: 2 -> 3"), std::string::npos) << more.output;
  EXPECT_NE(more.output.find("epoch 3/3 done"), std::string::npos) << more.output;
}

TEST(Cli, RefusesToOverwriteARunAndSaysHowToResume) {
  SmallRun run(json{{"train", {{"epochs", 1}}}, {"data", {{"limit_train", 64}, {"limit_eval", 100}}}});
  const fs::path out = run.dir / "run";
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + out.string()).exit_code, 0);
  const auto before = read_text(out / "last.pt");
  const auto r = trainer_cli("--config " + run.config.string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("already holds a run; continue it with `trainer --resume " + (out / "last.pt").string()),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_text(out / "last.pt"), before);
}

TEST(Cli, ResumeWithAnotherModelIsRefused) {
  SmallRun run(json{{"train", {{"epochs", 1}}}, {"data", {{"limit_train", 64}, {"limit_eval", 100}}}});
  const fs::path out = run.dir / "run";
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + out.string()).exit_code, 0);
  const auto r =
      trainer_cli("--resume " + (out / "last.pt").string() + " --set model.num_classes=12 --set train.epochs=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("cannot continue with model.num_classes: 10 -> 12"), std::string::npos) << r.output;
  const auto e = trainer_cli("eval --checkpoint " + (out / "last.pt").string() + " --set model.dropout=0.5");
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.output.find("cannot be evaluated with model.dropout: -1.0 -> 0.5"), std::string::npos) << e.output;
  // An evaluation reads only the model: a config with another optimizer (the one a sweep shares) is fine.
  const auto other = trainer_cli("eval --checkpoint " + (out / "last.pt").string() + " --set optim.name=adamw");
  EXPECT_EQ(other.exit_code, 0) << other.output;
}

TEST(Cli, SmokeRunsTheWholePipeline) {
  SmallRun run;
  const fs::path out = run.dir / "smoke";
  const auto r = trainer_cli("--config " + run.config.string() + " --smoke -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("smoke test passed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval " + (out / "best.pt").string()), std::string::npos) << r.output;
  const json resolved = json::parse(read_text(out / "config.resolved.json"));
  EXPECT_EQ(resolved["data"]["limit_train"], 4 * 32);
}

TEST(Cli, NonFiniteLossStopsTheRunAndWritesNoCheckpoint) {
  SmallRun run(json{{"train", {{"epochs", 1}, {"log_every", 1}}}, {"data", {{"limit_train", 128}}}});
  const fs::path out = run.dir / "run";
  const auto r = trainer_cli("--config " + run.config.string() + " --set optim.lr=1e30 -o " + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: train: the training loss is -nan at step 2; no checkpoint was written yet"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no checkpoint was written yet"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out / "last.pt"));
}

// With clipping the gradient norm stays on the device between log lines; a non-finite one is still caught at
// the interval's end, named with the interval's steps, and nothing is saved.
TEST(Cli, NonFiniteGradientNormIsCaughtAtTheLogInterval) {
  SmallRun run(
      json{{"train", {{"epochs", 1}, {"log_every", 3}, {"clip_grad_norm", 1.0}}}, {"data", {{"limit_train", 128}}}});
  const fs::path out = run.dir / "run";
  const auto r = trainer_cli("--config " + run.config.string() + " --set optim.lr=1e30 -o " + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: train: the gradient norm is "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" in steps 1-3; no checkpoint was written yet"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out / "last.pt"));
}

// 49 images in batches of 8 leave one image for the last batch, which a BatchNorm model cannot train on at this
// size: auto drops it and says so; false is refused before training starts.
TEST(Cli, TheLastBatchOfOneImageIsDroppedForABatchNormModel) {
  TempDir dir;
  write_mnist_dir(dir / "data", 49, 16);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"model", {{"arch", "resnet18"}}}, {"data", {{"batch_size", 8}}}, {"train", {{"epochs", 1}}}});
  write_text(dir / "c.json", c.dump());
  const auto r = trainer_cli("--config " + (dir / "c.json").string() + " -o " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the last batch of each epoch holds 1 of 49 training images, and a model with BatchNorm "
                          "needs 2 images per process to train: it is dropped (data.drop_last auto)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("training 1 epochs x 6 steps"), std::string::npos) << r.output;
  EXPECT_EQ(LoadedCheckpoint(dir / "run" / "last.pt").meta().step, 6);

  const auto refused = trainer_cli("--config " + (dir / "c.json").string() + " --set data.drop_last=false -o " +
                                   (dir / "run2").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("error: config: data.drop_last: false keeps a last batch too small to train on"),
            std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(dir / "run2" / "last.pt"));
}

TEST(Cli, SyntheticDataNeedsNoFiles) {
  TempDir dir;
  const json config = {{"run", {{"threads", 2}}},
                       {"data",
                        {{"kind", "synthetic"},
                         {"batch_size", 16},
                         {"eval_batch_size", 32},
                         {"workers", 1},
                         {"mean", {0.25}},
                         {"std", {0.3}},
                         {"synthetic", {{"train_size", 96}, {"eval_size", 48}, {"height", 12}, {"width", 12}}}}},
                       {"model", {{"num_classes", 3}}},
                       {"train", {{"epochs", 2}}}};
  write_text(dir / "synthetic.json", config.dump());
  const auto r = trainer_cli("--config " + (dir / "synthetic.json").string() + " -o " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("synthetic (96 images, 12x12x1)"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("eval epoch 2: .* \\(([0-9]+)/48\\)"))) << r.output;
  EXPECT_GT(std::stoi(m[1]), 24) << "3 easy classes, chance is 16/48: " << r.output;
}

TEST(Cli, EveryShippedConfigParsesAndValidates) {
  size_t seen = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(TRAINER_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".json" || entry.path().filename() == "schema.json") continue;
    ++seen;
    EXPECT_EQ(json::parse(read_text(entry.path())).value("$schema", ""), "schema.json") << entry.path();
    EXPECT_NO_THROW(resolve_config(entry.path(), {})) << entry.path();
  }
  EXPECT_GE(seen, 6u);
}

}  // namespace
}  // namespace trainer
