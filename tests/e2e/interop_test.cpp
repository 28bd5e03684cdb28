// Weights move between the trainer and Python's torchvision: `trainer export` output loads into
// torchvision.models with strict names and gives the same logits, and torchvision's weights load into the
// trainer's models (as model.init_from does) with the same logits. Needs Debian's python3-torchvision
// (scripts/setup.sh installs it); skipped with a message when it is absent.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "e2e/e2e_support.hpp"
#include "e2e/torchvision_reference.hpp"
#include "trainer/config/load.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/weight_files.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/blocks/layer_norm_2d.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/sync_batch_norm.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

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
    const int64_t patch = model_row(name).min_size;  // a ViT's patch (its sides a multiple of it), else <= 32
    a.input = {64 / patch * patch, 64 / patch * patch, 3};
  }
  return a;
}

// Non-trivial norm values (and ConvNeXt's layer scales, 1e-6 at the start), so a swapped or dropped buffer or a
// wrong block shows in the logits; as torchvision_interop.py's `make` does.
void randomize_norms(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_modules()) {
    if (auto* bn = item.value()->as<SyncBatchNorm2d>()) {
      bn->weight.uniform_(0.5, 1.5);
      bn->bias.normal_(0, 0.1);
      bn->running_mean.normal_(0, 0.1);
      bn->running_var.uniform_(1.0, 2.0);  // at most 1.5x per layer: deep variants stay finite
      bn->num_batches_tracked.fill_(3);
    } else if (item.value()->as<torch::nn::LayerNorm>() || item.value()->as<LayerNorm2d>()) {
      item.value()->named_parameters()["weight"].uniform_(0.5, 1.5);
      item.value()->named_parameters()["bias"].normal_(0, 0.1);
    }
  }
  for (auto& p : model.named_parameters()) {
    if (ends_with(p.key(), "layer_scale")) p.value().uniform_(0.1, 0.3);
    // ViT's zero-initialised class token and head would make every logit 0.
    if (p.key() == "class_token" || starts_with(p.key(), "heads.head.")) p.value().normal_(0, 0.02);
    // Swin's zero biases would hide V2's zeroed key third; its logit scales partly above their cap of log(100).
    if (ends_with(p.key(), "qkv.bias")) p.value().normal_(0, 0.1);
    if (ends_with(p.key(), "logit_scale")) p.value().uniform_(1.5, 5.0);
  }
}

class Interop : public ::testing::TestWithParam<std::string> {};

TEST_P(Interop, ExportedWeightsGiveTheSameLogitsInTorchvision) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const Arch a = arch(GetParam());
  torch::manual_seed(11);
  auto model = build_model(a.config.model, a.input);
  randomize_norms(*model);
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
  const torch::Tensor logits = model->forward(x).detach();
  // 1e-4 is an absolute bound on logits of moderate size (the randomised norms must not blow the network up).
  const double largest = logits.abs().max().item<double>();
  ASSERT_TRUE(std::isfinite(largest) && largest < 100) << a.name << ": largest logit " << largest;
  std::printf("%s: largest |logit| %.3g\n", a.name.c_str(), largest);
  write_safetensors(dir / "io.safetensors", {{"input", x}, {"logits", logits}}, {});
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

// A ViT's weights for one image size run at another: the position embedding resized as torchvision's
// interpolate_embeddings resizes it (64 px weights, 4x4 patches, in a 96 px model, 6x6), the same logits.
TEST(ViTResize, PositionEmbeddingResizedAsTorchvisionDoes) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const auto made =
      python("resize vit_b_16 5 64 96 " + (dir / "tv.safetensors").string() + " " + (dir / "io.safetensors").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  Arch a = arch("vit_b_16");
  a.input = {96, 96, 3};
  auto model = build_model(a.config.model, a.input);
  std::vector<std::string> said;
  const auto tensors = model->adapted_weights(read_safetensors(dir / "tv.safetensors").tensors,
                                              [&](const std::string& s) { said.push_back(s); });
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "encoder.pos_embedding: a 4x4 patch grid in the file, resized to this model's 6x6 (bicubic, as "
            "torchvision's interpolate_embeddings)");
  load_weights(*model, tensors, {}, "tv.safetensors");
  model->eval();
  const auto io = read_safetensors(dir / "io.safetensors").tensors;
  const double diff = (model->forward(io[0].second) - io[1].second).abs().max().item<double>();
  EXPECT_LE(diff, 1e-4);
  // A size that is not a multiple of the patch is a one-line config error.
  a.input = {100, 96, 3};
  try {
    build_model(a.config.model, a.input);
    ADD_FAILURE() << "built a ViT for 100x96 images";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "config: data: vit_b_16 cuts images into 16x16 patches, so their sides must be multiples of 16, got "
                 "100x96");
  }
}

// Swin at a size of its own: 32x80 pads each stage's map to whole windows, shifts the windows along one side only
// (along the other one window covers the map), and merges an odd side (5 columns) with torchvision's padding. V1
// here (window 7), V2 in Interop (window 8, at 64x64); the window code is one.
TEST(SwinShapes, TorchvisionWeightsGiveTheSameLogitsAtAnySize) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const auto made =
      python("make swin_t 5 " + (dir / "tv.safetensors").string() + " " + (dir / "io.safetensors").string() + " 32x80");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto model = build_model(arch("swin_t").config.model, {32, 80, 3});
  load_weights(*model, read_safetensors(dir / "tv.safetensors").tensors, {}, "tv.safetensors");
  model->eval();
  const auto io = read_safetensors(dir / "io.safetensors").tensors;  // name order: input, logits
  ASSERT_EQ(io[0].second.sizes(), (std::vector<int64_t>{2, 3, 32, 80}));
  const double diff = (model->forward(io[0].second) - io[1].second).abs().max().item<double>();
  EXPECT_LE(diff, 1e-4);
  std::printf("swin_t at 32x80: max |logit difference| %.3g\n", diff);
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

// One training step from the same weights, in torchvision and in the trainer: train-mode BatchNorm (each family's
// momentum), stochastic depth and dropout drawn from the same seeded generator (the same calls in the same order),
// so the loss, every gradient and every running statistic agree (they come out equal: without the stochastic
// depth draws the loss differs by 1-30%). The tolerance: the same float32 sums taken in another order (LibTorch's
// kernels from Python and from C++ may split a reduction over threads differently).
class TrainStep : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainStep, LossGradientsAndRunningStatisticsEqualTorchvisions) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const Arch a = arch(GetParam());
  const auto stepped =
      python("step " + a.name + " 5 " + (dir / "tv.safetensors").string() + " " + (dir / "step.safetensors").string());
  ASSERT_EQ(stepped.exit_code, 0) << stepped.output;
  auto model = build_model(a.config.model, a.input);  // dropout and stochastic depth: the arch's own
  load_weights(*model, read_safetensors(dir / "tv.safetensors").tensors, {}, "tv.safetensors");
  std::map<std::string, torch::Tensor> theirs;
  for (auto& [name, t] : read_safetensors(dir / "step.safetensors").tensors) theirs[name] = t;
  model->train();
  torch::manual_seed(6);
  const torch::Tensor loss =
      torch::nn::functional::cross_entropy(model->forward(theirs.at("input")), theirs.at("target"));
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), theirs.at("loss").item<double>(), 1e-5 * theirs.at("loss").abs().item<double>());
  double worst = 0;
  for (const auto& p : model->named_parameters()) {
    const torch::Tensor& g = theirs.at("grad." + p.key());
    const double scale = g.abs().max().item<double>() + 1e-12;
    const double diff = (p.value().grad() - g).abs().max().item<double>() / scale;
    EXPECT_LT(diff, 1e-4) << p.key();
    worst = std::max(worst, diff);
  }
  size_t buffers = 0;
  for (const auto& item : model->named_buffers()) {  // running statistics (the parameters take no step)
    ++buffers;
    const std::string& name = item.key();
    const torch::Tensor& t = item.value();
    const torch::Tensor& s = theirs.at("state." + name);
    EXPECT_LE((t.to(torch::kDouble) - s.to(torch::kDouble)).abs().max().item<double>(),
              1e-5 * (s.to(torch::kDouble).abs().max().item<double>() + 1))
        << name;
  }
  EXPECT_EQ(theirs.size(), 3 + model->named_parameters().size() + buffers);  // input, target, loss, grads, buffers
  std::printf("%s: loss %.6f vs %.6f, worst relative gradient difference %.3g\n", a.name.c_str(), loss.item<double>(),
              theirs.at("loss").item<double>(), worst);
}

INSTANTIATE_TEST_SUITE_P(Torchvision, TrainStep,
                         ::testing::Values("convnext_tiny", "efficientnet_b0", "mobilenet_v3_small", "regnet_y_400mf",
                                           "vit_b_16", "swin_v2_t"),
                         [](const auto& info) { return info.param; });

// Every row of the model table but mnist_cnn is a torchvision model: the same state-dict names, in the same order,
// with the same shapes, variants whose widths no logit test reaches included. Those over 100M parameters (nine,
// ~35 s of initialisation on 2 cores) only with TRAINER_TEST_LARGE_MODELS=1.
TEST(TorchvisionNames, EveryArchHasTorchvisionsKeysAndShapesInOrder) {
  SKIP_WITHOUT_TORCHVISION();
  TempDir dir;
  const bool large = std::getenv("TRAINER_TEST_LARGE_MODELS") != nullptr;
  std::string archs;
  size_t count = 0;
  for (const auto& row : model_rows())
    if (row.name != "mnist_cnn" && (large || row.weights.empty() || row.weights.front().num_params <= 100'000'000)) {
      archs += " " + row.name;
      ++count;
    }
  const auto listed = python("keys " + (dir / "keys.json").string() + archs);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const auto expected = nlohmann::json::parse(testing::read_text(dir / "keys.json"));
  for (const auto& [name, keys] : expected.items()) {
    const Arch a = arch(name);
    const auto model = build_model(a.config.model, a.input);
    const NamedTensors state = model_state(*model);
    ASSERT_EQ(state.size(), keys.size()) << name;
    for (size_t i = 0; i < state.size(); ++i) {
      ASSERT_EQ(state[i].first, keys[i][0].get<std::string>()) << name << " key " << i;
      ASSERT_EQ(state[i].second.sizes().vec(), keys[i][1].get<std::vector<int64_t>>()) << name << " " << state[i].first;
    }
  }
  EXPECT_EQ(expected.size(), count);
  EXPECT_GE(count, 44u);  // 53 rows but mnist_cnn, 9 of them over 100M parameters
}

INSTANTIATE_TEST_SUITE_P(Torchvision, Interop,
                         ::testing::Values("resnet18", "mnist_cnn", "convnext_tiny", "efficientnet_b0",
                                           "efficientnet_v2_s", "mobilenet_v3_small", "regnet_y_400mf", "vit_b_32",
                                           "swin_v2_t"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace trainer
