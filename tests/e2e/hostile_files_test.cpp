// Files from strangers, each crafted as issue 48 describes (tests/interop/hostile_files.py edits a checkpoint this
// suite trains; the rest are written whole), given to the real command: each gets exit 2, exactly one `error:`
// line naming the file or key, nothing written anywhere, and the commands together stay under 1 GB of memory.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <iterator>

#include "e2e/e2e_support.hpp"
#include "support/fixtures.hpp"

namespace trainer {
namespace {

using testing::TempDir;

// Every path under `dir` with its size, but the run folder's (`runs`, where a training command logs its error):
// what a command must leave as it was.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().string().rfind((dir / "runs").string(), 0) != 0)
      out.push_back(e.path().string() + (e.is_regular_file() ? " " + std::to_string(e.file_size()) : ""));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(HostileFiles, EachGetsOneLineAndExitTwoAndWritesNothing) {
  if (testing::run_command(std::string(TRAINER_PYTHON) + " -c 'import torch'").exit_code != 0)
    GTEST_SKIP() << "Python's torch not found at " TRAINER_PYTHON << " (Debian: python3-torch) to craft the files";
  TempDir dir;
  const nlohmann::json config = {
      {"run", {{"seed", 1}, {"threads", 1}, {"name", "good"}}},
      {"data",
       {{"kind", "synthetic"},
        {"batch_size", 16},
        {"workers", 1},
        {"root", ""},
        {"synthetic", {{"train_size", 32}, {"eval_size", 16}, {"height", 28}, {"width", 28}, {"channels", 1}}}}},
      {"model", {{"arch", "mnist_cnn"}, {"in_channels", 1}, {"num_classes", 10}}},
      {"train", {{"epochs", 1}}}};
  testing::write_text(dir / "c.json", config.dump());
  const auto trained = trainer_cli("--config " + (dir / "c.json").string() + " -o " + (dir / "good").string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const fs::path h = dir / "hostile";
  std::string onnx;  // an export of the checkpoint, for the ONNX edits, where the build and Python have ONNX
#ifdef TRAINER_ONNX
  if (testing::run_command(std::string(TRAINER_PYTHON) + " -c 'import onnx'").exit_code == 0) {
    const auto exported =
        trainer_cli("export --checkpoint " + (dir / "good" / "last.pt").string() + " -o " + (dir / "m.onnx").string());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    onnx = (dir / "m.onnx").string();
  }
#endif
  const auto crafted =
      testing::run_command(std::string(TRAINER_PYTHON) + " " + TRAINER_SOURCE_DIR + "/tests/interop/hostile_files.py " +
                           (dir / "good" / "last.pt").string() + " " + h.string() + " " + onnx);
  ASSERT_EQ(crafted.exit_code, 0) << crafted.output;

  const std::string train = "--config " + (dir / "c.json").string() + " -o " + (dir / "runs").string() + " ";
  const auto eval = [&](const char* file) { return "eval --checkpoint " + (h / file).string(); };
  std::vector<std::pair<std::string, std::string>> cases{
      {eval("upper_pkl.pt"), "record archive/data.PKL: a tensor reaching past the end of storage 0"},
      {eval("twice.pt"), "record archive/Data.pkl is named twice (names compare without regard to case)"},
      {eval("code_upper.pt"), "record archive/code/__torch__/evil.PY: line 2 is not a class attribute"},
      {eval("deep.pt"), "values nested more than 256 deep"},
      {eval("cycle.pt"), "a container changed after it was placed in another"},
      {eval("custom_class.pt"), "a class no trainer checkpoint names (__torch__.torch.classes.quantized."},
      {eval("threads.pt"), "run.threads: expected a number in [0, 1024], got 100000"},
      {eval("run_name.pt"), "run.name: expected a folder name (no /, \\ or ..), got \"../../escape\""},
      {"--resume " + (h / "huge_record.pt").string(), "record archive/data.pkl declares 4294967294 bytes but stores"},
      {eval("huge_record.pt"), "record archive/data.pkl declares 4294967294 bytes but stores"},
      {train + "--set model.init_from=" + (h / "broadcast.pth").string(),
       "broadcast.pth: a tensor holds more elements than its storage (a broadcast view"},
      {train + "--set model.init_from=" + (h / "deep.safetensors").string(),
       "deep.safetensors: header is not valid JSON ([json.exception.parse_error.101] parse error: syntax error: "
       "values nested more than 64 deep)"},
      {"--config " + (h / "deep_config.json").string(),
       "deep_config.json: invalid JSON: parse error: syntax error: "
       "values nested more than 64 deep"},
      {train + "--set run.name=../escape", "run.name: expected a folder name"},
      {"predict --model " + (h / "code_upper.pt").string() + " x.png",
       "code_upper.pt: a torchscript file is a program, and LibTorch runs its code as it loads; give --trust-model"},
  };
  if (!onnx.empty()) {
    cases.push_back({"predict --model " + (h / "short_raw.onnx").string() + " x.png",
                     "short_raw.onnx: not an ONNX model trainer export writes, or damaged (tensor \""});
    cases.push_back({"predict --model " + (h / "more_scores.onnx").string() + " x.png",
                     "more_scores.onnx: the model gives scores of shape [1, 10] for one image, but its metadata says "
                     "num_classes 5"});
  }
  const auto before = listing(dir.path());
  for (const auto& [args, message] : cases) {
    const auto r = trainer_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    // A training command logs its start first; the error is its last line, and the only one.
    const size_t last = r.output.rfind('\n', r.output.size() - 2);
    const std::string error = r.output.substr(last == std::string::npos ? 0 : last + 1);
    EXPECT_EQ(error.rfind("error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_NE(error.find(message), std::string::npos) << args << "\n" << r.output;
    const std::string lines = "\n" + r.output;
    EXPECT_EQ(lines.find("\nerror: "), lines.rfind("\nerror: ")) << args << "\n" << r.output;
    std::vector<std::string> written;
    const auto after = listing(dir.path());
    std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(written));
    EXPECT_EQ(after.size(), before.size()) << args;
    EXPECT_TRUE(written.empty()) << args << ": wrote " << written.front();
  }
  // The largest of every process this test waited for (the training run, Python with torch, each command).
  rusage usage{};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &usage), 0);
  EXPECT_LT(usage.ru_maxrss, 1024L * 1024) << "KiB";
}

}  // namespace
}  // namespace trainer
