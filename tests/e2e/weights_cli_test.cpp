// `trainer export` and model.init_from through the command line, as a fine-tuning user runs them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/e2e_support.hpp"
#include "trainer/config/load.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"

namespace trainer {
namespace {

using nlohmann::json;
using testing::SmallRun;
using testing::trainer_cli;
namespace fs = std::filesystem;

std::string export_cmd(const fs::path& checkpoint, const fs::path& output) {
  return "export --checkpoint " + checkpoint.string() + " --output " + output.string();
}

double max_difference(const NamedTensors& a, const NamedTensors& b) {
  std::map<std::string, torch::Tensor> bm(b.begin(), b.end());
  double worst = 0;
  for (const auto& [name, t] : a) {
    if (!bm.count(name)) return INFINITY;
    worst = std::max(worst, (t.to(torch::kDouble) - bm[name].to(torch::kDouble)).abs().max().item<double>());
  }
  return a.size() == b.size() ? worst : INFINITY;
}

TEST(Export, WritesTheCheckpointWeightsUnderTorchvisionNamesWithMetadata) {
  SmallRun run(json{{"train", {{"epochs", 1}}}});
  const fs::path out = run.dir / "run";
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + out.string()).exit_code, 0);
  const auto exported = trainer_cli(export_cmd(out / "last.pt", run.dir / "w.safetensors"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("8 tensors, 1199882 values"), std::string::npos) << exported.output;

  const TensorFile file = read_safetensors(run.dir / "w.safetensors");
  const LoadedCheckpoint checkpoint(out / "last.pt");
  const Config c = resolve_config(checkpoint.meta().config);
  auto model = build_model(c.model, {28, 28, 1});
  checkpoint.restore_model(*model);
  EXPECT_EQ(max_difference(file.tensors, model_state(*model)), 0.0);
  EXPECT_EQ(file.metadata.at("arch"), "mnist_cnn");
  EXPECT_EQ(file.metadata.at("num_classes"), "10");
  EXPECT_EQ(file.metadata.at("input_shape"), "[1,28,28]");
  EXPECT_EQ(file.metadata.at("mean"), "[0.1307]");
  EXPECT_EQ(file.metadata.at("std"), "[0.3081]");
  EXPECT_EQ(json::parse(file.metadata.at("class_names")).size(), 10u);
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_EQ(json::parse(file.metadata.at("config"))["model"]["arch"], "mnist_cnn");
}

TEST(Export, MisuseIsOneLineAndExit2) {
  SmallRun run;
  const auto missing = trainer_cli(export_cmd(run.dir / "none.pt", run.dir / "w.safetensors"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("checkpoint: " + (run.dir / "none.pt").string() + ": no such file"), std::string::npos)
      << missing.output;
  const auto no_output = trainer_cli("export --checkpoint x.pt");
  EXPECT_EQ(no_output.exit_code, 2);
  EXPECT_NE(no_output.output.find("--output"), std::string::npos) << no_output.output;
  EXPECT_FALSE(fs::exists(run.dir / "w.safetensors"));
}

// A run started from exported weights begins where the first run ended (an lr of 1e-9 leaves them in place).
TEST(InitFrom, ANewRunStartsFromTheGivenWeights) {
  SmallRun run(json{{"train", {{"epochs", 1}}}});
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "a").string()).exit_code, 0);
  ASSERT_EQ(trainer_cli(export_cmd(run.dir / "a" / "last.pt", run.dir / "a.safetensors")).exit_code, 0);
  const auto b = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "b").string() +
                             " --set model.init_from=" + (run.dir / "a.safetensors").string() + " --set optim.lr=1e-9");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("a.safetensors: loaded 8 tensors (1199882 values)"), std::string::npos) << b.output;
  ASSERT_EQ(trainer_cli(export_cmd(run.dir / "b" / "last.pt", run.dir / "b.safetensors")).exit_code, 0);
  const auto a_weights = read_safetensors(run.dir / "a.safetensors").tensors;
  EXPECT_LT(max_difference(read_safetensors(run.dir / "b.safetensors").tensors, a_weights), 1e-6);
  // Resuming takes the checkpoint's weights, so init_from may change (say, the file moved); model.arch may not.
  const auto resumed = trainer_cli("--resume " + (run.dir / "b" / "last.pt").string() +
                                   " --set train.epochs=2 --set model.init_from=moved.safetensors");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("model.init_from: "), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("loaded 8 tensors"), std::string::npos) << resumed.output;

  // Without init_from the same settings start elsewhere: the comparison above can fail.
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "c").string() +
                        " --set optim.lr=1e-9 --set run.seed=8")
                .exit_code,
            0);
  ASSERT_EQ(trainer_cli(export_cmd(run.dir / "c" / "last.pt", run.dir / "c.safetensors")).exit_code, 0);
  EXPECT_GT(max_difference(read_safetensors(run.dir / "c.safetensors").tensors, a_weights), 1e-3);
}

// A ResNet's export keeps its integer buffers integer, so the file starts another run (model.weights) as it is.
TEST(Export, KeepsIntegerBuffersSoTheFileStartsANewRun) {
  SmallRun run(json{{"model", {{"arch", "resnet18"}, {"in_channels", 1}, {"stem", "small"}}},
                    {"data", {{"limit_train", 64}, {"limit_eval", 64}}},
                    {"train", {{"epochs", 1}}}});
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "a").string()).exit_code, 0);
  ASSERT_EQ(trainer_cli(export_cmd(run.dir / "a" / "last.pt", run.dir / "a.safetensors")).exit_code, 0);
  const TensorFile file = read_safetensors(run.dir / "a.safetensors");
  for (const auto& [name, t] : file.tensors)
    if (name.find("num_batches_tracked") != std::string::npos) {
      EXPECT_EQ(t.scalar_type(), torch::kLong) << name;
    }
  const auto started = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "b").string() +
                                   " --set model.weights=" + (run.dir / "a.safetensors").string());
  ASSERT_EQ(started.exit_code, 0) << started.output;
  EXPECT_NE(started.output.find("loaded 122 tensors"), std::string::npos) << started.output;
}

TEST(InitFrom, AMismatchedHeadFailsListingKeysAndExcludingItWorksInTheSameFolder) {
  SmallRun run(json{{"train", {{"epochs", 1}}}});
  ASSERT_EQ(
      trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "a").string() + " --set model.num_classes=12")
          .exit_code,
      0);
  ASSERT_EQ(trainer_cli(export_cmd(run.dir / "a" / "last.pt", run.dir / "a.safetensors")).exit_code, 0);
  const std::string start = "--config " + run.config.string() + " -o " + (run.dir / "b").string() +
                            " --set model.init_from=" + (run.dir / "a.safetensors").string();
  const auto strict = trainer_cli(start);
  EXPECT_EQ(strict.exit_code, 2);
  EXPECT_NE(strict.output.find("error: weights: " + (run.dir / "a.safetensors").string() +
                               " does not fit the model: 2 mismatched (fc2.weight: [12, 128] in the file, [10, 128] "
                               "in the model, fc2.bias: [12] in the file, [10] in the model)"),
            std::string::npos)
      << strict.output;
  EXPECT_FALSE(fs::exists(run.dir / "b" / "last.pt"));

  const auto excluded = trainer_cli(start + " --set 'model.init_exclude=[\"fc2.*\"]'");
  ASSERT_EQ(excluded.exit_code, 0) << excluded.output;
  EXPECT_NE(excluded.output.find("loaded 6 tensors"), std::string::npos) << excluded.output;
  EXPECT_NE(excluded.output.find("2 excluded, kept as initialised (fc2.weight, fc2.bias)"), std::string::npos)
      << excluded.output;

  const auto absent = trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "c").string() +
                                  " --set model.init_from=" + (run.dir / "nothing.safetensors").string());
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_NE(absent.output.find("nothing.safetensors: no such file"), std::string::npos) << absent.output;
}

}  // namespace
}  // namespace trainer
