// Runs on disks that fill up or fail: every failed write is one line naming the file and the cause, exit 1,
// with the last good checkpoint and the command that resumes it; never an abort, a stack trace or a temporary
// file left behind, and the last checkpoint still loads.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>

#include "e2e/e2e_support.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/io/checkpoint.hpp"

namespace trainer {
namespace {

using testing::TempDir;

// Temporary files of atomic writes (".last.pt.tmp123") or of hard links ("best.pt.link") in `dir`.
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos || name.find(".link") != std::string::npos) out.push_back(name);
  }
  return out;
}

// The one line a failed write ends a run with.
void expect_one_line_write_error(const testing::CommandResult& r, const std::string& cause) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Exception raised from"), std::string::npos) << r.output;  // LibTorch's stack trace
  const std::regex line("(^|\n)error: cannot write [^\n]*: " + cause + "[^\n]*\n$");
  EXPECT_TRUE(std::regex_search(r.output, line)) << r.output;
}

// A small tmpfs that fills during the second checkpoint (the first one and the old last.pt beside the new one
// do not both fit). Needs root and a kernel that lets the test mount; skipped otherwise.
TEST(Durability, AFullDiskStopsTheRunWithOneLineAndTheLastCheckpointResumes) {
  testing::SmallRun run({{"train", {{"checkpoint_every_steps", 4}, {"epochs", 1}}}, {"run", {{"plot", false}}}});
  const auto probe = testing::trainer_cli("--config " + run.config.string() + " --stop-after-step 4 -o " +
                                          (run.dir / "probe").string());
  ASSERT_EQ(probe.exit_code, 0) << probe.output;
  const auto checkpoint_bytes = fs::file_size(run.dir / "probe" / "last.pt");
  const fs::path disk = run.dir / "disk";
  fs::create_directories(disk);
  const std::string options = "size=" + std::to_string(checkpoint_bytes * 3 / 2 + 256 * 1024);
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, options.c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  struct Unmount {
    fs::path at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{disk};

  const fs::path out = disk / "r";
  const auto r = testing::trainer_cli("--config " + run.config.string() + " -o " + out.string());
  expect_one_line_write_error(r, "No space left on device");
  EXPECT_NE(r.output.find("(it needs "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; the last good checkpoint is " + (out / "last.pt").string() + " (trainer --resume " +
                          (out / "last.pt").string() + ")"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(leftovers(out).empty()) << leftovers(out)[0];
  const LoadedCheckpoint last(out / "last.pt");
  EXPECT_EQ(last.meta().step, 4);
}

// A file-size limit (ulimit -f, SIGXFSZ ignored) makes writes fail at a chosen byte of whichever file crosses
// it first: the resolved config, the log, metrics or TensorBoard events (limits of a few KiB) or a checkpoint
// (up to its size), at points drawn at random.
TEST(Durability, WritesFailingAtRandomPointsEndInOneLineAndNoTemporaryFiles) {
  testing::SmallRun run({{"train", {{"checkpoint_every_steps", 3}, {"epochs", 1}}}, {"run", {{"plot", false}}}});
  const auto probe = testing::trainer_cli("--config " + run.config.string() + " --stop-after-step 3 -o " +
                                          (run.dir / "probe").string());
  ASSERT_EQ(probe.exit_code, 0) << probe.output;
  const auto checkpoint_kib = static_cast<int>(fs::file_size(run.dir / "probe" / "last.pt") / 1024);
  std::mt19937 rng(20261205);
  std::uniform_int_distribution<int> small(1, 6), large(8, checkpoint_kib - 1);
  for (int i = 0; i < 6; ++i) {
    const int limit = i % 2 ? large(rng) : small(rng);
    const fs::path out = run.dir / ("r" + std::to_string(i));
    const auto r =
        testing::run_command("bash -c \"trap '' XFSZ; ulimit -f " + std::to_string(limit) + "; " + TRAINER_BIN +
                             " --config " + run.config.string() + " -o " + out.string() + "\"");
    SCOPED_TRACE("ulimit -f " + std::to_string(limit) + " KiB");
    expect_one_line_write_error(r, "File too large");
    EXPECT_TRUE(leftovers(out).empty());
    EXPECT_FALSE(fs::exists(out / "last.pt"));  // none complete: each is larger than the limit
  }
  // An export and an evaluation report, the other kinds of file, each under a limit below its size.
  const fs::path probe_last = run.dir / "probe" / "last.pt";
  for (const std::string& command :
       {"export --checkpoint " + probe_last.string() + " -o " + (run.dir / "w.safetensors").string(),
        "eval --checkpoint " + probe_last.string() + " --predictions " + (run.dir / "p.csv").string()}) {
    const auto r =
        testing::run_command("bash -c \"trap '' XFSZ; ulimit -f 4; " + std::string(TRAINER_BIN) + " " + command + "\"");
    SCOPED_TRACE(command);
    expect_one_line_write_error(r, "File too large");
    EXPECT_TRUE(leftovers(run.dir.path()).empty());
  }
  EXPECT_FALSE(fs::exists(run.dir / "w.safetensors"));
}

// One bit flipped inside a weight tensor of a saved checkpoint (found by its bytes in the file): eval, resume and
// export all refuse it, naming the tensor, where LibTorch alone would load the changed weights in silence.
TEST(Durability, ACheckpointWithAFlippedBitIsRefusedNamingTheTensor) {
  testing::SmallRun run({{"train", {{"epochs", 1}}}, {"run", {{"plot", false}}}});
  const fs::path out = run.dir / "r";
  ASSERT_EQ(
      testing::trainer_cli("--config " + run.config.string() + " --stop-after-step 3 -o " + out.string()).exit_code, 0);
  // The bytes of fc1.weight's first 16 values, and where they sit in the file.
  const LoadedCheckpoint good(out / "last.pt");
  ASSERT_TRUE(good.has_checksums());
  torch::serialize::InputArchive archive, model, fc1;
  archive.load_from((out / "last.pt").string());
  archive.read("model", model);
  model.read("fc1", fc1);
  torch::Tensor weight;
  ASSERT_TRUE(fc1.try_read("weight", weight));
  const auto* needle = static_cast<const char*>(weight.contiguous().data_ptr());
  std::string bytes = testing::read_text(out / "last.pt");
  const size_t at = bytes.find(std::string(needle, 64));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 37] ^= 0x10;
  {
    std::ofstream f(out / "last.pt", std::ios::binary | std::ios::trunc);
    f << bytes;
  }
  const std::string refusal = (out / "last.pt").string() + ": model/fc1.weight does not match its checksum";
  for (const std::string& command :
       {"eval --checkpoint " + (out / "last.pt").string(), "--resume " + (out / "last.pt").string(),
        "export --checkpoint " + (out / "last.pt").string() + " -o " + (run.dir / "w.safetensors").string()}) {
    const auto r = testing::trainer_cli(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_NE(r.output.find(refusal), std::string::npos) << command << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(run.dir / "w.safetensors"));
}

// The same command line again continues the run: --resume auto starts a new run in an empty folder, continues
// from the newest checkpoint, passes over a damaged last.pt for the step checkpoint before it, refuses a config
// that resume refuses, and the run it finishes has the weights of a run that never stopped.
TEST(Durability, ResumeAutoContinuesFromTheNewestGoodCheckpoint) {
  testing::SmallRun run({{"train", {{"checkpoint_every_steps", 3}, {"epochs", 1}}}, {"run", {{"plot", false}}}});
  const fs::path out = run.dir / "auto", straight = run.dir / "straight";
  const std::string again = "--resume auto --config " + run.config.string() + " -o " + out.string();
  auto r = testing::trainer_cli(again + " --stop-after-step 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume auto: no run folder " + out.string() + " yet; starting a new run there"),
            std::string::npos)
      << r.output;
  // The config's run.resume auto does the same as --resume auto.
  r = testing::trainer_cli("--config " + run.config.string() + " -o " + out.string() +
                           " --set run.resume=auto --stop-after-step 9");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume auto: continuing from " + (out / "last.pt").string() + " (step 3,"),
            std::string::npos)
      << r.output;
  // last.pt (step 9) replaced by a damaged copy, a new file: step-9.pt, its hard link until now, keeps the good
  // bytes and is removed, so that the run falls back to step-6.pt.
  fs::remove(out / "step-9.pt");
  std::string bytes = testing::read_text(out / "last.pt");
  bytes[bytes.size() / 2] ^= 0x01;
  {
    std::ofstream f(out / "damaged.tmp", std::ios::binary);
    f << bytes;
  }
  fs::rename(out / "damaged.tmp", out / "last.pt");
  const auto refused = testing::trainer_cli(again + " --set optim.name=adamw");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  r = testing::trainer_cli(again);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume auto: passing over " + (out / "last.pt").string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resume auto: continuing from " + (out / "step-6.pt").string() + " (step 6,"),
            std::string::npos)
      << r.output;
  ASSERT_EQ(testing::trainer_cli("--config " + run.config.string() + " -o " + straight.string()).exit_code, 0);
  EXPECT_EQ(LoadedCheckpoint(out / "last.pt").meta().step, 16);
  ASSERT_EQ(testing::trainer_cli("export --checkpoint " + (out / "last.pt").string() + " -o " +
                                 (run.dir / "a.safetensors").string())
                .exit_code,
            0);
  ASSERT_EQ(testing::trainer_cli("export --checkpoint " + (straight / "last.pt").string() + " -o " +
                                 (run.dir / "b.safetensors").string())
                .exit_code,
            0);
  EXPECT_EQ(testing::read_text(run.dir / "a.safetensors"), testing::read_text(run.dir / "b.safetensors"));
}

// --resume auto opens the newest checkpoint first and stops at the first that passes: an older damaged file is
// never opened (each file opened used to stay in memory, weights, optimizer state and EMA, until start-up ended).
TEST(Durability, ResumeAutoOpensNoOlderCheckpointThanItNeeds) {
  testing::SmallRun run({{"train", {{"checkpoint_every_steps", 3}, {"epochs", 1}}}, {"run", {{"plot", false}}}});
  const fs::path out = run.dir / "auto";
  const std::string again = "--resume auto --config " + run.config.string() + " -o " + out.string();
  ASSERT_EQ(testing::trainer_cli(again + " --stop-after-step 9").exit_code, 0);
  ASSERT_TRUE(fs::exists(out / "step-6.pt"));
  std::string bytes = testing::read_text(out / "step-6.pt");  // its own file now: last.pt was rewritten since
  bytes[bytes.size() / 2] ^= 0x01;
  testing::write_text(out / "step-6.pt", bytes);
  const auto r = testing::trainer_cli(again + " --stop-after-step 12");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume auto: continuing from " + (out / "last.pt").string() + " (step 9,"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step-6.pt"), std::string::npos) << r.output;
}

// train.checkpoint_every_minutes: a wall-clock checkpoint beside the step and epoch ones (here due after every
// step); off by default.
TEST(Durability, TimedCheckpointsAreWrittenMidEpoch) {
  testing::SmallRun run({{"train", {{"epochs", 1}, {"checkpoint_every_minutes", 1e-7}}}, {"run", {{"plot", false}}}});
  const auto r = testing::trainer_cli("--config " + run.config.string() + " -o " + (run.dir / "r").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string log = testing::read_text(run.dir / "r" / "train.log");
  size_t saves = 0;
  for (size_t at = log.find("saved "); at != std::string::npos; at = log.find("saved ", at + 1)) ++saves;
  EXPECT_GE(saves, 10u) << log;  // 16 steps: one each, but the last (the epoch end saves it)
}

// The training folder deleted mid-run (an unmounted network share): every read fails, the bad-image share
// passes data.max_bad_fraction, and the run stops with that data error (exit 2) after saving its last completed
// step.
TEST(Durability, DataThatGoesAwayStopsTheRunAfterSavingTheLastStep) {
  TempDir dir;
  testing::write_image_folder(dir / "imagenet", {3, 8, 2, true});
  const nlohmann::json c = {{"run", {{"seed", 4}, {"threads", 1}, {"plot", false}}},
                            {"data",
                             {{"kind", "imagenet"},
                              {"root", (dir / "imagenet").string()},
                              {"batch_size", 4},
                              {"workers", 1},
                              {"prefetch", 1},
                              {"augment", {{"image_size", 16}}}}},
                            {"model", {{"arch", "mnist_cnn"}, {"in_channels", 3}}},
                            {"train", {{"epochs", 200}, {"log_every", 1}}}};
  testing::write_text(dir / "c.json", c.dump());
  const fs::path out = dir / "r", log = dir / "r.log";
  const auto r = testing::run_command("bash -c '" + std::string(TRAINER_BIN) + " --config " +
                                      (dir / "c.json").string() + " -o " + out.string() + " > " + log.string() +
                                      " 2>&1 & p=$!; for i in $(seq 600); do grep -q \"epoch 3 step\" " + log.string() +
                                      " && break; sleep 0.1; done; rm -rf " + (dir / "imagenet" / "train").string() +
                                      "; wait $p; echo exit $?; cat " + log.string() + "'");
  EXPECT_NE(r.output.find("exit 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error: data: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("could not be read, more than data.max_bad_fraction"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; saved " + (out / "last.pt").string() + " at step "), std::string::npos) << r.output;
  EXPECT_GT(LoadedCheckpoint(out / "last.pt").meta().step, 12);  // past epoch 2's 6 steps each
}

}  // namespace
}  // namespace trainer
