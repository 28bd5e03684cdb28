// model.weights by name or address, as a fine-tuning user meets it: fetched from a loopback server into PyTorch's hub
// cache (TORCH_HOME), continued after a cut connection, refused on a wrong hash, taken from the cache without a
// network, from a mirror; every failure one line, exit 2, and nothing half-written under the cache's file name.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cctype>
#include <chrono>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "trainer/io/download.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using nlohmann::json;
using testing::read_text;
using testing::run_command;
using testing::SmallRun;
using testing::TempDir;
using testing::trainer_cli;
using testing::WeightsServer;
namespace fs = std::filesystem;

// The model the runs below train (resnet18 on 28x28 grey images), with ImageNet's 1000 classes: what a published
// file of torchvision's holds, in this test's shapes.
json resnet_model(int64_t classes) {
  return {{"arch", "resnet18"}, {"in_channels", 1}, {"stem", "small"}, {"num_classes", classes}};
}

void write_thousand_class_weights(const fs::path& path) {
  ModelConfig m;
  m.arch = "resnet18";
  m.in_channels = 1;
  m.stem = StemKind::small;
  m.num_classes = 1000;
  torch::manual_seed(11);
  write_safetensors(path, model_state(*build_model(m, {28, 28, 1})), {});
}

std::vector<uint8_t> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file named as torch.hub names its files: stem-<first 8 hex digits of its SHA-256>.pth.
std::string serve_hub_named(const WeightsServer& server, const std::string& stem) {
  const fs::path tmp = server.root() / "tmp.bin";
  write_thousand_class_weights(tmp);
  const std::string name = stem + "-" + file_sha256(tmp).substr(0, 8) + ".pth";
  fs::rename(tmp, server.root() / name);
  return name;
}

std::string with_cache(const fs::path& torch_home, const std::string& mirror = "") {
  return "env TORCH_HOME=" + torch_home.string() + (mirror.empty() ? "" : " TRAINER_WEIGHTS_MIRROR=" + mirror) + " " +
         TRAINER_BIN + " ";
}

fs::path cache_of(const fs::path& torch_home) { return torch_home / "hub" / "checkpoints"; }

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  if (fs::exists(dir))
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

int error_lines(const std::string& output) {
  int n = 0;
  for (size_t at = output.find("error:"); at != std::string::npos; at = output.find("error:", at + 1)) ++n;
  return n;
}

TEST(WeightsDownload, FetchesAnAddressIntoTheCacheAndTheRunStartsFromItWithANewHead) {
  TempDir dir;
  WeightsServer server(dir.path());
  const std::string name = serve_hub_named(server, "tiny");
  SmallRun run(json{{"model", resnet_model(10)},
                    {"data", {{"limit_train", 64}, {"limit_eval", 64}}},
                    {"optim", {{"lr", 1e-9}}},
                    {"train", {{"epochs", 1}}}});
  const auto trained = run_command(with_cache(dir / "th") + "--config " + run.config.string() + " -o " +
                                   (run.dir / "run").string() + " --set model.weights=" + server.address(name));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_EQ(bytes_of(cache_of(dir / "th") / name), bytes_of(server.root() / name));
  EXPECT_NE(trained.output.find("SHA-256 prefix " + name.substr(5, 8) + " checked"), std::string::npos)
      << trained.output;
  EXPECT_NE(trained.output.find("the weights' classifier has 1000 classes, this run 10: fc.weight, fc.bias replaced"),
            std::string::npos)
      << trained.output;
  EXPECT_NE(trained.output.find("loaded 120 tensors"), std::string::npos) << trained.output;

  // The cached file is used as it is: no server needed.
  const auto again = run_command(with_cache(dir / "th") + "weights get resnet18 http://127.0.0.1:1/" + name);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("in the cache"), std::string::npos) << again.output;
  EXPECT_EQ(files_in(cache_of(dir / "th")), std::vector<std::string>{name});
}

TEST(WeightsDownload, ACutConnectionIsContinuedFromThePartialFile) {
  TempDir dir;
  WeightsServer server(dir.path(), "--cut-first 100000");
  const std::string name = serve_hub_named(server, "cut");
  const fs::path cached = cache_of(dir / "th") / name;
  const auto first = run_command(with_cache(dir / "th") + "weights get resnet18 " + server.address(name));
  EXPECT_EQ(first.exit_code, 2) << first.output;
  EXPECT_EQ(error_lines(first.output), 1) << first.output;
  EXPECT_NE(first.output.find("100000 bytes kept in " + partial_path(cached).string()), std::string::npos)
      << first.output;
  EXPECT_FALSE(fs::exists(cached));
  EXPECT_EQ(fs::file_size(partial_path(cached)), 100000u);

  const auto second = run_command(with_cache(dir / "th") + "weights get resnet18 " + server.address(name));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(bytes_of(cached), bytes_of(server.root() / name));
  EXPECT_FALSE(fs::exists(partial_path(cached)));
  EXPECT_NE(server.requests().find("range=bytes=100000-"), std::string::npos) << server.requests();
}

TEST(WeightsDownload, AServerThatIgnoresTheRangeSendsTheFileAgainFromItsStart) {
  TempDir dir;
  WeightsServer server(dir.path(), "--cut-first 100000 --ignore-range");
  const std::string name = serve_hub_named(server, "whole");
  const fs::path cached = cache_of(dir / "th") / name;
  EXPECT_EQ(run_command(with_cache(dir / "th") + "weights get resnet18 " + server.address(name)).exit_code, 2);
  const auto second = run_command(with_cache(dir / "th") + "weights get resnet18 " + server.address(name));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(bytes_of(cached), bytes_of(server.root() / name));
}

// A file larger than DownloadOptions::max_bytes (8 GiB by default) is refused as it arrives, with and without a
// partial file to continue: a hostile address cannot fill the disk.
TEST(WeightsDownload, AFileLargerThanTheCapIsRefusedAndNothingIsKept) {
  TempDir dir;
  WeightsServer server(dir.path());
  write_thousand_class_weights(server.root() / "big.pth");
  const auto size = static_cast<int64_t>(fs::file_size(server.root() / "big.pth"));
  DownloadOptions options;
  options.max_bytes = size - 1;
  try {
    download_file(server.address("big.pth"), dir / "big.pth", options);
    FAIL() << "a file over the cap was downloaded";
  } catch (const DownloadError& e) {
    EXPECT_NE(std::string(e.what()).find("is larger than " + std::to_string(size - 1) + " bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "big.pth"));
  EXPECT_FALSE(fs::exists(partial_path(dir / "big.pth")));
  options.max_bytes = size;
  download_file(server.address("big.pth"), dir / "big.pth", options);
  EXPECT_EQ(bytes_of(dir / "big.pth"), bytes_of(server.root() / "big.pth"));
}

TEST(WeightsDownload, AWrongHashIsOneLineAndLeavesNothingInTheCache) {
  TempDir dir;
  WeightsServer server(dir.path());
  write_thousand_class_weights(server.root() / "tiny-deadbeef.pth");
  const auto r = run_command(with_cache(dir / "th") + "weights get resnet18 " + server.address("tiny-deadbeef.pth"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(error_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find(server.address("tiny-deadbeef.pth") + ": the file's SHA-256 is"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("put the file at " + (cache_of(dir / "th") / "tiny-deadbeef.pth").string()),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(files_in(cache_of(dir / "th")).empty());
}

// model.weights_sha256 (weights get --sha256): the whole digest, checked on the download (a file that only shares
// the name's prefix is not kept), on the file in the cache (kept: it is the user's) and on a local file.
TEST(WeightsDownload, APinnedSha256IsCheckedOnTheDownloadTheCacheAndALocalFile) {
  TempDir dir;
  WeightsServer server(dir.path());
  const std::string name = serve_hub_named(server, "tiny");
  const std::string digest = file_sha256(server.root() / name);
  std::string other = digest;
  other.back() = other.back() == '0' ? '1' : '0';  // the same prefix, another file
  const std::string get = with_cache(dir / "th") + "weights get resnet18 " + server.address(name) + " --sha256 ";
  const auto refused = run_command(get + other);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_EQ(error_lines(refused.output), 1) << refused.output;
  EXPECT_NE(refused.output.find("error: download: " + server.address(name) + ": the file's SHA-256 is " + digest +
                                ", but model.weights_sha256 pins " + other +
                                " (a damaged or different file; nothing "
                                "was kept)"),
            std::string::npos)
      << refused.output;
  EXPECT_TRUE(files_in(cache_of(dir / "th")).empty());

  std::string upper = digest;  // as PowerShell's Get-FileHash prints it
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const auto fetched = run_command(get + upper);
  ASSERT_EQ(fetched.exit_code, 0) << fetched.output;
  EXPECT_NE(fetched.output.find(name + ": "), std::string::npos);
  EXPECT_NE(fetched.output.find(", SHA-256 checked"), std::string::npos) << fetched.output;
  EXPECT_EQ(files_in(cache_of(dir / "th")), std::vector<std::string>{name});

  const auto cached = run_command(get + other);
  EXPECT_EQ(cached.exit_code, 2) << cached.output;
  EXPECT_EQ(error_lines(cached.output), 1) << cached.output;
  EXPECT_NE(cached.output.find("error: weights: " + (cache_of(dir / "th") / name).string() +
                               ": the file's SHA-256 is " + digest + ", but model.weights_sha256 pins " + other +
                               " (a damaged or different file; delete it to download it again)"),
            std::string::npos)
      << cached.output;
  EXPECT_EQ(files_in(cache_of(dir / "th")), std::vector<std::string>{name});

  const auto local = trainer_cli("weights get resnet18 " + (server.root() / name).string() + " --sha256 " + other);
  EXPECT_EQ(local.exit_code, 2) << local.output;
  EXPECT_NE(local.output.find("error: weights: " + (server.root() / name).string() + ": the file's SHA-256 is"),
            std::string::npos)
      << local.output;
  const auto bad = trainer_cli("weights get resnet18 " + (server.root() / name).string() + " --sha256 " + name);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--sha256: expected 64 hex digits"), std::string::npos) << bad.output;
}

TEST(WeightsDownload, ARefusedConnectionOrAMissingFileIsOneLineAndLeavesNothing) {
  TempDir dir;
  WeightsServer server(dir.path());
  for (const std::string& address : {std::string("http://127.0.0.1:1/x-0123abcd.pth"), server.address("gone.pth")}) {
    const auto r = run_command(with_cache(dir / "th") + "weights get resnet18 " + address);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(error_lines(r.output), 1) << r.output;
    EXPECT_NE(r.output.find("error: download: " + address), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("put the file at " + cache_of(dir / "th").string()), std::string::npos) << r.output;
    EXPECT_TRUE(files_in(cache_of(dir / "th")).empty()) << address;
  }
  EXPECT_NE(server.requests().find("GET /gone.pth"), std::string::npos);
}

TEST(WeightsDownload, ANameIsFetchedFromTheMirrorAndCheckedAgainstItsPublishedHash) {
  TempDir dir;
  WeightsServer server(dir.path());
  fs::create_directories(server.root() / "mirror");
  write_thousand_class_weights(server.root() / "mirror" / "resnet18-f37072fd.pth");  // not torchvision's bytes
  const auto r = run_command(with_cache(dir / "th", server.address("mirror/")) + "weights get resnet18 IMAGENET1K_V1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(server.requests().find("GET /mirror/resnet18-f37072fd.pth"), std::string::npos) << server.requests();
  EXPECT_NE(r.output.find("but its name says it starts with f37072fd"), std::string::npos) << r.output;
  EXPECT_TRUE(files_in(cache_of(dir / "th")).empty());
}

TEST(WeightsDownload, ANameInTheCacheTrainsWithoutANetwork) {
  TempDir dir;
  fs::create_directories(cache_of(dir / "th"));
  // As a Python user's earlier torchvision download would have left it (these are this test's shapes).
  write_thousand_class_weights(cache_of(dir / "th") / "resnet18-f37072fd.pth");
  SmallRun run(json{
      {"model", resnet_model(10)}, {"data", {{"limit_train", 64}, {"limit_eval", 64}}}, {"train", {{"epochs", 1}}}});
  const auto r = run_command(with_cache(dir / "th", "http://127.0.0.1:1/") + "--config " + run.config.string() +
                             " -o " + (run.dir / "run").string() + " --set model.weights=IMAGENET1K_V1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resnet18-f37072fd.pth: in the cache"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fc.weight, fc.bias replaced"), std::string::npos) << r.output;
}

TEST(WeightsCommand, ListsTheNamesFilesAndSizesAndRefusesUnknownNames) {
  TempDir dir;
  const auto list = run_command(with_cache(dir / "th") + "weights list resnet50");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("IMAGENET1K_V1              resnet50-0676ba61.pth"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("IMAGENET1K_V2 *            resnet50-11ad3fa6.pth"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("80.86%     232/224"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("102.2 MB"), std::string::npos) << list.output;
  EXPECT_EQ(list.output.find("resnet18"), std::string::npos) << list.output;

  const auto unknown = run_command(with_cache(dir / "th") + "weights get resnet50 IMAGENET1K_V3");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("resnet50 has no published weights named IMAGENET1K_V3 (torchvision's: "
                                "IMAGENET1K_V1, IMAGENET1K_V2, DEFAULT)"),
            std::string::npos)
      << unknown.output;
  const auto none = run_command(with_cache(dir / "th") + "weights get mnist_cnn IMAGENET1K_V1");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("torchvision publishes none for mnist_cnn"), std::string::npos) << none.output;
  EXPECT_TRUE(files_in(cache_of(dir / "th")).empty());
}

}  // namespace
}  // namespace trainer
