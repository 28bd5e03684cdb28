// Weights move between the trainer and Python's torchvision: `trainer export` output loads into
// torchvision.models with strict names and gives the same logits, and torchvision's weights load into the
// trainer's models (as model.init_from does) with the same logits. Needs Debian's python3-torchvision
// (scripts/setup.sh installs it); skipped with a message when it is absent.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/torchvision_reference.hpp"
#include "trainer/config/load.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/optim/optimizer.hpp"

namespace trainer {
namespace {

using testing::TempDir;

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

INSTANTIATE_TEST_SUITE_P(Torchvision, Interop, ::testing::Values("resnet18", "mnist_cnn"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace trainer
