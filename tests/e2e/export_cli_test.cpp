// `trainer export` to the deployment formats and `trainer predict --model`, through the command line as a
// deployer runs them: every format from one checkpoint, predictions equal to the checkpoint's, the EMA weights
// with --ema, the files opened by Python's onnx checker, torch.jit.load and torchvision (skipped with a message
// when absent), and each mistake a one-line error with exit code 2 that leaves no file behind.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

#include "e2e/e2e_support.hpp"
#include "support/serialize_model.hpp"
#include "trainer/config/load.hpp"
#include "trainer/deploy/export_format.hpp"
#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/vit.hpp"
#include "trainer/optim/optimizer.hpp"

namespace trainer {
namespace {

using nlohmann::json;
using testing::trainer_cli;

// One resnet18 run (imagenet stem, 3x32x32 synthetic images, dropout, channels_last, EMA) shared by the suite.
class ExportCli : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const json config = {
        {"run", {{"name", "deploy"}, {"seed", 5}, {"threads", 2}, {"plot", false}, {"tensorboard", false}}},
        {"data",
         {{"kind", "synthetic"},
          {"batch_size", 16},
          {"eval_batch_size", 32},
          {"workers", 1},
          {"mean", {0.485, 0.456, 0.406}},
          {"std", {0.229, 0.224, 0.225}},
          {"synthetic", {{"train_size", 96}, {"eval_size", 32}, {"height", 32}, {"width", 32}, {"channels", 3}}}}},
        {"model",
         {{"arch", "resnet18"}, {"in_channels", 3}, {"num_classes", 10}, {"dropout", 0.2}, {"channels_last", "true"}}},
        {"optim", {{"lr", 0.02}}},
        {"train", {{"epochs", 1}, {"ema", {{"enabled", true}, {"decay", 0.9}}}}}};
    testing::write_text(*dir_ / "deploy.json", config.dump());
    const auto r = trainer_cli("--config " + (*dir_ / "deploy.json").string() + " -o " + (*dir_ / "run").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    cv::Mat image(40, 52, CV_8UC3);
    for (int i = 0; i < 3; ++i) {
      cv::randu(image, 0, 255);
      cv::imwrite((*dir_ / ("img" + std::to_string(i) + ".png")).string(), image);
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static fs::path checkpoint() { return *dir_ / "run" / "last.pt"; }
  static std::string images() {
    return (*dir_ / "img0.png").string() + " " + (*dir_ / "img1.png").string() + " " + (*dir_ / "img2.png").string();
  }
  static testing::CommandResult export_to(const fs::path& output, const std::string& extra = "") {
    return trainer_cli("export --checkpoint " + checkpoint().string() + " -o " + output.string() + " " + extra);
  }

  static testing::TempDir* dir_;
};
testing::TempDir* ExportCli::dir_ = nullptr;

json predictions(const std::string& source) {
  const auto r = trainer_cli("predict " + source + " " + ExportCli::images() + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output.substr(r.output.find('{')))["predictions"];
}

TEST_F(ExportCli, EachFormatRunsAndPredictsAsTheCheckpoint) {
  const json reference = predictions("--checkpoint " + checkpoint().string());
  ASSERT_EQ(reference.size(), 3u);
  size_t runnable = 0;
  for (const ExportFormat& f : export_formats()) {
    if (!f.open || !f.available) continue;
    ++runnable;
    const std::string name = "m" + f.extensions.front();
    const auto r = export_to(*dir_ / name);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("checked: runs: its logits match the checkpoint's"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("metadata: "), std::string::npos) << r.output;
    const json got = predictions("--model " + (*dir_ / name).string() + (f.runs_code ? " --trust-model" : ""));
    ASSERT_EQ(got.size(), reference.size()) << name;
    for (size_t i = 0; i < got.size(); ++i)
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(got[i]["top"][k]["class"], reference[i]["top"][k]["class"])
            << name << " image " << i << " rank " << k;
        EXPECT_NEAR(got[i]["top"][k]["prob"].get<double>(), reference[i]["top"][k]["prob"].get<double>(), 1e-5) << name;
      }
  }
#ifdef TRAINER_ONNX
  EXPECT_EQ(runnable, 2u);  // ONNX and TorchScript
#endif
  EXPECT_GE(runnable, 1u);
  const auto weights = export_to(*dir_ / "m.safetensors");
  ASSERT_EQ(weights.exit_code, 0) << weights.output;
  EXPECT_NE(weights.output.find("weights only"), std::string::npos) << weights.output;
  // bench predict times the same files: as many timed passes as asked, at the batch asked.
  const auto bench = trainer_cli("bench predict --model " + (*dir_ / "m.pt").string() +
                                 " --trust-model --batch 3 --warmup 1 --runs 4 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const json timing = json::parse(bench.output.substr(bench.output.find('{')));
  EXPECT_EQ(timing["ms"].size(), 4u);
  EXPECT_EQ(timing["batch"], 3);
  EXPECT_EQ(timing["arch"], "resnet18");
}

// The logits of a model rebuilt from the checkpoint (raw or EMA weights), as eval and eval --ema build it.
torch::Tensor checkpoint_logits(const fs::path& path, bool ema, const torch::Tensor& x) {
  const LoadedCheckpoint checkpoint(path);
  const Config c = config_for_checkpoint(checkpoint, "", {}).config;
  auto model = build_model(c.model, checkpoint.meta().input);
  if (ema) EXPECT_TRUE(checkpoint.restore_ema(*model));
  else checkpoint.restore_model(*model);
  model->eval();
  torch::NoGradGuard no_grad;
  return model->forward(x);
}

TEST_F(ExportCli, EmaExportsTheEmaWeights) {
  const auto r = export_to(*dir_ / "ema.ts.pt", "--ema");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("EMA weights"), std::string::npos) << r.output;
  torch::jit::ExtraFilesMap extra{{"metadata.json", ""}};
  torch::jit::Module module = torch::jit::load((*dir_ / "ema.ts.pt").string(), torch::kCPU, extra);
  EXPECT_EQ(json::parse(extra["metadata.json"])["weights"], "ema");
  torch::manual_seed(3);
  const auto x = torch::randn({4, 3, 32, 32});
  torch::NoGradGuard no_grad;
  const auto got = module.forward({x}).toTensor();
  EXPECT_LT((got - checkpoint_logits(checkpoint(), /*ema=*/true, x)).abs().max().item<double>(), 1e-5);
  EXPECT_GT((got - checkpoint_logits(checkpoint(), /*ema=*/false, x)).abs().max().item<double>(), 1e-3)
      << "the EMA and raw weights should differ after a few steps at decay 0.9";
}

void write_floats(const fs::path& path, const torch::Tensor& t) {
  const auto c = t.contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
}

// The Python side of the deploy checks (check_export.py) and an ONNX-enabled build, or the test is skipped.
#ifdef TRAINER_ONNX
#define SKIP_IF_NO_ONNX_BUILD()
#else
#define SKIP_IF_NO_ONNX_BUILD() GTEST_SKIP() << "this build has no ONNX export"
#endif
#define SKIP_WITHOUT_PYTHON_DEPLOY_TOOLS()                                                                        \
  if (testing::run_command(std::string(TRAINER_PYTHON) + " -c 'import onnx, torch, torchvision'").exit_code != 0) \
    GTEST_SKIP() << "Python's onnx, torch or torchvision not found at " TRAINER_PYTHON                            \
                 << "; install python3-onnx and python3-torchvision (scripts/setup.sh does)";                     \
  SKIP_IF_NO_ONNX_BUILD()

TEST_F(ExportCli, PythonOpensTheFiles) {
  SKIP_WITHOUT_PYTHON_DEPLOY_TOOLS();
  ASSERT_EQ(export_to(*dir_ / "py.onnx").exit_code, 0);
  const auto fixed = export_to(*dir_ / "py3.onnx", "--batch 3 --opset 13");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
  ASSERT_EQ(export_to(*dir_ / "py.ts.pt").exit_code, 0);
  torch::manual_seed(4);
  const auto x = torch::randn({3, 3, 32, 32});
  write_floats(*dir_ / "x.f32", x);
  write_floats(*dir_ / "logits.f32", checkpoint_logits(checkpoint(), false, x));
  const auto r = testing::run_command(
      std::string(TRAINER_PYTHON) + " " + TRAINER_SOURCE_DIR + "/tests/interop/check_export.py --input " +
      (*dir_ / "x.f32").string() + " --shape 3,3,32,32 --expected " + (*dir_ / "logits.f32").string() +
      " --classes 10 --onnx " + (*dir_ / "py.onnx").string() + " --onnx " + (*dir_ / "py3.onnx").string() +
      " --torchscript " + (*dir_ / "py.ts.pt").string() + " --torchvision resnet18");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json out = json::parse(r.output.substr(r.output.rfind("{\"onnx\"")));
  ASSERT_EQ(out["onnx"].size(), 2u);
  EXPECT_EQ(out["onnx"][0]["checker"], "ok");
  EXPECT_EQ(out["onnx"][0]["input_dims"], json({"batch", 3, 32, 32}));
  EXPECT_EQ(out["onnx"][0]["opset"], 17);
  EXPECT_EQ(out["onnx"][1]["input_dims"], json({3, 3, 32, 32}));
  EXPECT_EQ(out["onnx"][1]["opset"], 13);
  for (const std::string key : {"arch", "class_names", "mean", "std", "input_shape", "epoch", "step", "producer"}) {
    EXPECT_NE(std::find(out["onnx"][0]["metadata_keys"].begin(), out["onnx"][0]["metadata_keys"].end(), key),
              out["onnx"][0]["metadata_keys"].end())
        << key;
    EXPECT_TRUE(out["torchscript_metadata"].contains(key)) << key;
  }
  EXPECT_EQ(out["torchscript_metadata"]["arch"], "resnet18");
  EXPECT_EQ(out["torchscript_metadata"]["mean"], "[0.485,0.456,0.406]");
  EXPECT_LT(out["torchscript_max_diff"].get<double>(), 1e-4);
  EXPECT_LT(out["torchvision_max_diff"].get<double>(), 1e-4);
  // ONNX Runtime, what deployers run the file with: where it is installed (the torch2 lane installs it and sets
  // TRAINER_REQUIRE_ONNXRUNTIME, so there its absence fails).
  if (out["onnxruntime"].is_null()) {
    EXPECT_EQ(std::getenv("TRAINER_REQUIRE_ONNXRUNTIME"), nullptr)
        << "onnxruntime is not importable by " TRAINER_PYTHON;
    std::printf("ONNX Runtime not installed for %s: its check is left to the torch2 lane\n", TRAINER_PYTHON);
  } else {
    for (const auto& file : out["onnx"]) EXPECT_LT(file["onnxruntime_max_diff"].get<double>(), 1e-4) << file.dump();
    std::printf("ONNX Runtime %s: max |logit difference| %.3g (dynamic batch), %.3g (batch 3)\n",
                out["onnxruntime"].get<std::string>().c_str(), out["onnx"][0]["onnxruntime_max_diff"].get<double>(),
                out["onnx"][1]["onnxruntime_max_diff"].get<double>());
  }
}

std::set<std::string> folder_listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.insert(e.path().string());
  return names;
}

TEST_F(ExportCli, MistakesAreOneLineErrorsAndLeaveNoFile) {
  const fs::path d = *dir_ / "mistakes";
  fs::create_directories(d / "taken.onnx");  // a folder where the file would go
  testing::write_text(d / "broken.onnx", "this is not protobuf");
  testing::write_text(d / "broken.ts.pt", "PK this is not a zip archive");
  ASSERT_EQ(export_to(d / "w.safetensors").exit_code, 0);
  // A checkpoint without EMA weights: a small mnist_cnn run.
  const json small = {{"run", {{"threads", 2}, {"plot", false}, {"tensorboard", false}}},
                      {"data",
                       {{"kind", "synthetic"},
                        {"batch_size", 16},
                        {"workers", 1},
                        {"synthetic", {{"train_size", 32}, {"eval_size", 16}, {"height", 12}, {"width", 12}}}}},
                      {"model", {{"arch", "mnist_cnn"}, {"num_classes", 10}}},
                      {"train", {{"epochs", 1}}}};
  testing::write_text(*dir_ / "small.json", small.dump());
  ASSERT_EQ(trainer_cli("--config " + (*dir_ / "small.json").string() + " -o " + (*dir_ / "small").string()).exit_code,
            0);
  const std::string ck = " --checkpoint " + checkpoint().string();
  const std::string out = " -o " + (d / "out.onnx").string();
  const std::vector<std::pair<std::string, std::string>> cases{
      {"export" + ck + out + " --format onx", "unknown format \"onx\"; did you mean \"onnx\"?"},
      {"export" + ck + " -o " + (d / "out.xyz").string(), "cannot tell the format from the extension \".xyz\""},
      {"export --checkpoint " + (*dir_ / "small" / "last.pt").string() + " -o " + (d / "s.ts.pt").string() + " --ema",
       "holds no EMA weights"},
      {"export" + ck + " -o " + (d / "missing" / "out.onnx").string(), "does not exist"},
      {"export" + ck + " -o " + (d / "taken.onnx").string() + " --format torchscript", "taken.onnx: Is a directory"},
      {"export" + ck + out + " --opset 12", "--opset: 12 is outside 13.."},
      {"export" + ck + out + " --batch 0", "--batch: expected dynamic or a batch size > 0, got \"0\""},
      {"export" + ck + " -o " + (d / "o.ts.pt").string() + " --opset 13", "apply to --format onnx, not torchscript"},
      {"predict --model " + (d / "broken.onnx").string() + " " + images(), "broken.onnx: not an ONNX model"},
      {"predict --trust-model --model " + (d / "broken.ts.pt").string() + " " + images(),
       "broken.ts.pt: not a TorchScript archive"},
      // A TorchScript file is a program: refused before a byte of it is read, unless trusted.
      {"predict --model " + (d / "broken.ts.pt").string() + " " + images(),
       "broken.ts.pt: a torchscript file is a program, and LibTorch runs its code as it loads; give --trust-model"},
      {"bench predict --model " + (d / "broken.ts.pt").string(), "give --trust-model"},
      {"predict --model " + (d / "w.safetensors").string() + " " + images(), "holds weights only"},
      {"predict --model " + (d / "broken.onnx").string() + ck + " " + images(), "either --checkpoint FILE or --model"},
  };
  const auto before = folder_listing(d);
  for (const auto& [args, message] : cases) {
#ifndef TRAINER_ONNX
    if (args.find("onnx") != std::string::npos && args.find("--format torchscript") == std::string::npos) continue;
#endif
    const auto r = trainer_cli(args);
    // A write that fails is exit 1 (issue of the disk, not of the command line); the other mistakes exit 2.
    const int expected = message.find("Is a directory") != std::string::npos ? 1 : 2;
    EXPECT_EQ(r.exit_code, expected) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_EQ(folder_listing(d), before) << args << ": left a file behind";
  }
}

// Every torchvision family's files as a deployer opens them: the ONNX file passes onnx's full checker (and runs in
// ONNX Runtime where it is installed: required in the torch2 lane), the TorchScript archive loads with
// torch.jit.load and gives the checkpoint's logits, and its state_dict() loads strictly into torchvision's model.
TEST(ExportFamilies, PythonOpensEveryFamilysFiles) {
  SKIP_WITHOUT_PYTHON_DEPLOY_TOOLS();
  testing::TempDir dir;
  // ConvNeXt: LayerNorm as convolutions, GELU as Erf; EfficientNet: SiLU, sigmoid squeeze-excitation; MobileNetV3:
  // HardSwish, hardsigmoid squeeze-excitation; Swin V2: windows, rolls and cosine attention as Reshape, Transpose,
  // Slice, Concat and MatMul. RegNet's layers are a subset of these, Swin V1's and the ViT's of Swin V2's (the
  // ViT's 88M parameters would make this test's files 700 MB: unit/Export runs a small one).
  for (const std::string arch : {"convnext_tiny", "efficientnet_b0", "mobilenet_v3_small", "swin_v2_t"}) {
    Config c;
    c.data.kind = DataKind::synthetic;
    c.data.synthetic.channels = 3;
    c.data.mean = {0.485, 0.456, 0.406};
    c.data.std = {0.229, 0.224, 0.225};
    c.model.arch = arch;
    c.model.in_channels = 3;
    c.model.num_classes = 10;
    // 64 px: at 32 efficientnet_b0's last stage is 1x1, where OpenCV 4.10 gets a padded depthwise 3x3 wrong.
    const ImageShape input{64, 64, 3};
    torch::manual_seed(3);
    auto model = build_model(c.model, input);
    {
      torch::NoGradGuard no_grad;  // weights off their start (ConvNeXt's layer scales are 1e-6 there)
      for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.05);
    }
    auto optimizer = make_optimizer(c.optim, *model);
    CheckpointMeta meta;
    meta.config = config_to_json(c);
    meta.input = input;
    const fs::path ck = dir / (arch + ".pt");
    save_checkpoint(ck, meta, {*model, *optimizer});
    for (const std::string ext : {".onnx", ".ts.pt"}) {
      const auto r = trainer_cli("export --checkpoint " + ck.string() + " -o " + (dir / (arch + ext)).string());
      ASSERT_EQ(r.exit_code, 0) << arch << ": " << r.output;
    }
    model->eval();
    torch::manual_seed(4);
    const auto x = torch::randn({2, 3, 64, 64});
    write_floats(dir / "x.f32", x);
    write_floats(dir / "logits.f32", model->forward(x).detach());
    const auto r = testing::run_command(
        std::string(TRAINER_PYTHON) + " " + TRAINER_SOURCE_DIR + "/tests/interop/check_export.py --input " +
        (dir / "x.f32").string() + " --shape 2,3,64,64 --expected " + (dir / "logits.f32").string() +
        " --classes 10 --onnx " + (dir / (arch + ".onnx")).string() + " --torchscript " +
        (dir / (arch + ".ts.pt")).string() + " --torchvision " + arch);
    ASSERT_EQ(r.exit_code, 0) << arch << ": " << r.output;
    const json out = json::parse(r.output.substr(r.output.rfind("{\"onnx\"")));
    EXPECT_EQ(out["onnx"][0]["checker"], "ok") << arch;
    EXPECT_LT(out["torchscript_max_diff"].get<double>(), 1e-4) << arch;
    EXPECT_LT(out["torchvision_max_diff"].get<double>(), 1e-4) << arch;
    if (out["onnxruntime"].is_null()) {
      EXPECT_EQ(std::getenv("TRAINER_REQUIRE_ONNXRUNTIME"), nullptr) << "onnxruntime is not importable";
    } else {
      EXPECT_LT(out["onnx"][0]["onnxruntime_max_diff"].get<double>(), 1e-4) << arch;
      std::printf("%s: ONNX Runtime %s, max |logit difference| %.3g\n", arch.c_str(),
                  out["onnxruntime"].get<std::string>().c_str(), out["onnx"][0]["onnxruntime_max_diff"].get<double>());
    }
    std::printf("%s: TorchScript in Python %.3g, its state dict in torchvision %.3g\n", arch.c_str(),
                out["torchscript_max_diff"].get<double>(), out["torchvision_max_diff"].get<double>());
  }
}

// The ViT's ONNX graph (tokens as [N, D, 1, L], attention as MatMul and Softmax) in Python's tools. Its published
// variants would make 350 MB files here, so a small ViT of the same code (2 layers of 48 features in 3 heads, 8x8
// patches of 32x40 images) is serialized as export does: onnx's full checker passes, and ONNX Runtime (the torch2
// lane requires it) gives the model's logits.
TEST(ExportFamilies, PythonRunsASmallViTsOnnxFile) {
  SKIP_WITHOUT_PYTHON_DEPLOY_TOOLS();
  testing::TempDir dir;
  const ImageShape input{32, 40, 3};
  torch::manual_seed(3);
  VisionTransformer model(ViTSpec{8, 2, 3, 48, 96}, "vit_small_test", input, 10, 0.0);
  {
    torch::NoGradGuard no_grad;  // the class token and head start at zero
    for (auto& p : model.parameters()) p.add_(torch::randn_like(p) * 0.1);
  }
  model.eval();
  const std::string bytes =
      testing::serialize_model(format_for_output("onnx", ""), model, input, {{"arch", "vit_small_test"}}, 10);
  std::ofstream(dir / "vit.onnx", std::ios::binary) << bytes;
  const auto x = torch::randn({2, 3, 32, 40});
  write_floats(dir / "x.f32", x);
  {
    torch::NoGradGuard no_grad;
    write_floats(dir / "logits.f32", model.forward(x));
  }
  const auto r = testing::run_command(std::string(TRAINER_PYTHON) + " " + TRAINER_SOURCE_DIR +
                                      "/tests/interop/check_export.py --input " + (dir / "x.f32").string() +
                                      " --shape 2,3,32,40 --expected " + (dir / "logits.f32").string() +
                                      " --classes 10 --onnx " + (dir / "vit.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json out = json::parse(r.output.substr(r.output.rfind("{\"onnx\"")));
  EXPECT_EQ(out["onnx"][0]["checker"], "ok");
  if (out["onnxruntime"].is_null()) {
    EXPECT_EQ(std::getenv("TRAINER_REQUIRE_ONNXRUNTIME"), nullptr) << "onnxruntime is not importable";
  } else {
    EXPECT_LT(out["onnx"][0]["onnxruntime_max_diff"].get<double>(), 1e-4);
    std::printf("small ViT: ONNX Runtime %s, max |logit difference| %.3g\n",
                out["onnxruntime"].get<std::string>().c_str(), out["onnx"][0]["onnxruntime_max_diff"].get<double>());
  }
}

}  // namespace
}  // namespace trainer
