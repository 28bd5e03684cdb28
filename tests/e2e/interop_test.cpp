// Weights move between the trainer and Python's torchvision: `trainer export` output loads into
// torchvision.models with strict names and gives the same logits, and torchvision's weights load into the
// trainer's models (as model.init_from does) with the same logits. Needs Debian's python3-torchvision
// (scripts/setup.sh installs it); skipped with a message when it is absent.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/e2e_support.hpp"
#include "e2e/torchvision_reference.hpp"
#include "trainer/config/load.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/weight_files.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

const std::string kScript = std::string(TRAINER_SOURCE_DIR) + "/tests/interop/torchvision_interop.py";

testing::CommandResult python(const std::string& args) {
  return testing::run_command(std::string(TRAINER_PYTHON) + " " + kScript + " " + args);
}

#define SKIP_WITHOUT_TORCHVISION()                                  \
  if (!testing::torchvision_available())                            \
  GTEST_SKIP() << "Python torchvision not found at " TRAINER_PYTHON \
               << "; install python3-torchvision (scripts/setup.sh does) to run the interop tests"

struct Arch {
  std::string name;
  Config config;
  ImageShape input;
};

Arch arch(const std::string& name) {
  Arch a{name, {}, {}};
  a.config.data.kind = DataKind::synthetic;
  a.config.model.arch = name;
  a.config.model.num_classes = 10;
  if (name == "mnist_cnn") {
    a.input = {28, 28, 1};
  } else {
    a.config.model.in_channels = 3;
    a.config.data.synthetic.channels = 3;
    a.config.data.mean = {0.485, 0.456, 0.406};
    a.config.data.std = {0.229, 0.224, 0.225};
    a.input = {64, 64, 3};
  }
  return a;
}

// Non-trivial BatchNorm values, so a swapped or dropped buffer shows in the logits.
void randomize_batchnorm(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_modules())
    if (auto* bn = item.value()->as<torch::nn::BatchNorm2d>()) {
      bn->weight.uniform_(0.5, 1.5);
      bn->bias.normal_(0, 0.1);
      bn->running_mean.normal_(0, 0.1);
      bn->running_var.uniform_(0.5, 1.5);
      bn->num_batches_tracked.fill_(3);
    }
}

class Interop : public ::testing::TestWithParam<std::string> {};

TEST_P(Interop, ExportedWeightsGiveTheSameLogitsInTorchvision) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const Arch a = arch(GetParam());
  torch::manual_seed(11);
  auto model = build_model(a.config.model, a.input);
  randomize_batchnorm(*model);
  auto optimizer = make_optimizer(a.config.optim, *model);
  CheckpointMeta meta;
  meta.config = config_to_json(a.config);
  meta.input = a.input;
  save_checkpoint(dir / "fresh.pt", meta, {*model, *optimizer});
  const auto exported = testing::trainer_cli("export --checkpoint " + (dir / "fresh.pt").string() + " --output " +
                                             (dir / "model.safetensors").string());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  model->eval();
  const torch::Tensor x = torch::randn({2, a.input.channels, a.input.height, a.input.width});
  write_safetensors(dir / "io.safetensors", {{"input", x}, {"logits", model->forward(x).detach()}}, {});
  const auto checked =
      python("check " + a.name + " " + (dir / "model.safetensors").string() + " " + (dir / "io.safetensors").string());
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_NE(checked.output.find("max |logit difference|"), std::string::npos) << checked.output;
  std::printf("%s", checked.output.c_str());
}

TEST_P(Interop, TorchvisionWeightsGiveTheSameLogitsInTheTrainer) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const Arch a = arch(GetParam());
  const auto made =
      python("make " + a.name + " 5 " + (dir / "tv.safetensors").string() + " " + (dir / "io.safetensors").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto model = build_model(a.config.model, a.input);
  const WeightsReport r = load_weights(*model, read_safetensors(dir / "tv.safetensors").tensors, {}, "tv.safetensors");
  EXPECT_EQ(r.loaded.size(), model_state(*model).size());
  model->eval();
  const auto io = read_safetensors(dir / "io.safetensors").tensors;  // name order: input, logits
  ASSERT_EQ(io.size(), 2u);
  const double diff = (model->forward(io[0].second) - io[1].second).abs().max().item<double>();
  EXPECT_LE(diff, 1e-4);
  std::printf("%s: torchvision weights in the trainer, max |logit difference| %.3g\n", a.name.c_str(), diff);
}

// torchvision's published weights are torch.save files of the state dict (ResNet50_Weights.IMAGENET1K_V1 is
// resnet50-0676ba61.pth): one written by Debian's torch loads as it is, with torchvision's logits.
TEST(PthInterop, TorchvisionResnet50StateDictFileGivesTheSameLogits) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const Arch a = arch("resnet50");
  const auto made =
      python("make resnet50 7 " + (dir / "resnet50.pth").string() + " " + (dir / "io.safetensors").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto model = build_model(a.config.model, a.input);
  const NamedTensors state = read_weights_file(dir / "resnet50.pth");
  EXPECT_EQ(state.size(), model_state(*model).size());
  const WeightsReport r = load_weights(*model, state, {}, "resnet50.pth");
  EXPECT_EQ(r.loaded.size(), model_state(*model).size());
  model->eval();
  const auto io = read_safetensors(dir / "io.safetensors").tensors;  // name order: input, logits
  ASSERT_EQ(io.size(), 2u);
  const double diff = (model->forward(io[0].second) - io[1].second).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5);
  std::printf("resnet50: torchvision's .pth in the trainer, max |logit difference| %.3g\n", diff);
}

// What is not a plain state dict in torch.save's current format is one line naming the file and what to do.
TEST(PthInterop, OtherPickledFilesAreOneLineErrors) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"legacy",
       "PyTorch's legacy format (torch.save before 1.6, or with _use_new_zipfile_serialization=False), "
       "which is not read; re-save it in Python: torch.save(torch.load(path), path)"},
      {"tar", "PyTorch's legacy format (torch.save before 1.6"},
      {"class", "holds a Python object of class argparse.Namespace, which is not read"},
      {"truncated", "truncated or damaged ("}};
  for (const auto& [kind, expected] : cases) {
    const fs::path file = dir / (kind + ".pth");
    ASSERT_EQ(python("unreadable " + kind + " " + file.string()).exit_code, 0) << kind;
    std::string message;
    try {
      read_weights_file(file);
    } catch (const WeightsError& e) {
      message = e.what();
    }
    EXPECT_EQ(message.rfind("weights: " + file.string() + ": ", 0), 0u) << kind << ": " << message;
    EXPECT_NE(message.find(expected), std::string::npos) << kind << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << kind << ": " << message;
  }
  // Neither safetensors nor PyTorch's: the formats that are read are named.
  testing::write_text(dir / "notes.pth", "these are not weights at all");
  std::string message;
  try {
    read_weights_file(dir / "notes.pth");
  } catch (const WeightsError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("notes.pth: not a weights file this trainer reads (safetensors, or PyTorch's torch.save zip"),
            std::string::npos)
      << message;
}

// The way a fine-tuning user starts: model.init_from naming the .pth as it was downloaded.
TEST(PthInterop, InitFromReadsAPthFileOnTheCommandLine) {
  SKIP_WITHOUT_TORCHVISION();
  testing::SmallRun run(nlohmann::json{{"train", {{"epochs", 1}}}});
  ASSERT_EQ(python("make mnist_cnn 5 " + (run.dir / "tv.pth").string() + " " + (run.dir / "io.safetensors").string())
                .exit_code,
            0);
  const std::string start = "--config " + run.config.string() + " -o ";
  const auto loaded = testing::trainer_cli(start + (run.dir / "a").string() +
                                           " --set model.init_from=" + (run.dir / "tv.pth").string());
  EXPECT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_NE(loaded.output.find("tv.pth: loaded 8 tensors (1199882 values)"), std::string::npos) << loaded.output;

  ASSERT_EQ(python("unreadable class " + (run.dir / "class.pth").string()).exit_code, 0);
  const auto refused = testing::trainer_cli(start + (run.dir / "b").string() +
                                            " --set model.init_from=" + (run.dir / "class.pth").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("error: weights: " + (run.dir / "class.pth").string() +
                                ": holds a Python object of class argparse.Namespace"),
            std::string::npos)
      << refused.output;
}

INSTANTIATE_TEST_SUITE_P(Torchvision, Interop, ::testing::Values("resnet18", "mnist_cnn", "resnext101_64x4d"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace trainer
