// TensorBoard event files, read back by an independent decoder (tests/interop/read_tensorboard.py: its own
// CRC-32C and protobuf parsing): every metrics row must be there with its step, tags and float32 values.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "e2e/e2e_support.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;
using nlohmann::json;

const std::string kReader = std::string(TRAINER_SOURCE_DIR) + "/tests/interop/read_tensorboard.py";

std::vector<fs::path> event_files(const fs::path& run_dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(run_dir / "tb"))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
  return files;
}

json read_events(const fs::path& file) {
  const auto r = run_command(std::string(TRAINER_PYTHON) + " " + kReader + " " + file.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json::array();
}

std::vector<json> jsonl_rows(const fs::path& file) {
  std::vector<json> rows;
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  return rows;
}

// (step, tag) -> value over all scalar events of one decoded file.
std::multimap<std::pair<int64_t, std::string>, double> scalars(const json& events) {
  std::multimap<std::pair<int64_t, std::string>, double> out;
  for (const auto& e : events)
    if (e.contains("values"))
      for (const auto& [tag, v] : e["values"].items()) out.emplace(std::make_pair(e["step"].get<int64_t>(), tag), v);
  return out;
}

TEST(TensorBoard, EventFileHoldsEveryMetricsRow) {
  SmallRun run;
  const fs::path out = run.dir / "r";
  const auto r = trainer_cli("--config " + run.config.string() + " -o " + out.string() +
                             " --set train.ema.enabled=true --set train.clip_grad_norm=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto files = event_files(out);
  ASSERT_EQ(files.size(), 1u);
  const json decoded = read_events(files[0]);
  ASSERT_EQ(decoded.size(), 1u);
  const json& events = decoded[0]["events"];
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["file_version"], "brain.Event:2");
  EXPECT_GT(events[0]["wall_time"].get<double>(), 1.7e9);

  const auto tb = scalars(events);
  size_t expected = 0;
  std::set<std::string> kinds;
  for (const json& row : jsonl_rows(out / "metrics.jsonl")) {
    const std::string kind = row["kind"];
    kinds.insert(kind);
    const int64_t step = row["step"];
    for (const auto& [column, value] : row.items()) {
      if (column == "kind" || column == "epoch" || column == "step") continue;
      const auto range = tb.equal_range({step, kind + "/" + column});
      bool found = false;
      for (auto it = range.first; it != range.second; ++it)
        found = found || it->second == static_cast<double>(static_cast<float>(value.get<double>()));
      EXPECT_TRUE(found) << kind << "/" << column << " at step " << step << " = " << value;
      ++expected;
    }
    if (row.contains("data_wait_s") && row.contains("compute_s")) {
      const double share =
          row["data_wait_s"].get<double>() / (row["data_wait_s"].get<double>() + row["compute_s"].get<double>());
      const auto it = tb.find({step, kind + "/data_wait_share"});
      ASSERT_NE(it, tb.end()) << kind << " step " << step;
      EXPECT_EQ(it->second, static_cast<double>(static_cast<float>(share)));
      ++expected;
    }
  }
  EXPECT_EQ(tb.size(), expected);  // nothing more than the rows
  EXPECT_EQ(kinds, (std::set<std::string>{"train", "epoch", "eval", "eval_ema"}));
  for (const char* tag : {"train/loss", "train/lr", "train/top1", "train/images_per_s", "train/grad_norm",
                          "train/data_wait_share", "eval/top1", "eval/top5", "eval/loss", "eval_ema/top1"}) {
    bool present = false;
    for (const auto& kv : tb) present = present || kv.first.second == tag;
    EXPECT_TRUE(present) << tag;
  }

  // The decoder really checks: one flipped payload byte is a CRC failure.
  std::string bytes = read_text(files[0]);
  bytes[bytes.size() / 2] ^= 0x01;
  write_text(run.dir / "broken.tfevents", bytes);
  const auto broken =
      run_command(std::string(TRAINER_PYTHON) + " " + kReader + " " + (run.dir / "broken.tfevents").string());
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.output.find("CRC mismatch"), std::string::npos) << broken.output;
}

TEST(TensorBoard, ResumeKeepsOneFileWithoutRepeatedSteps) {
  SmallRun run;
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + straight.string()).exit_code, 0);
  ASSERT_EQ(
      trainer_cli("--config " + run.config.string() + " -o " + split.string() + " --stop-after-step 24").exit_code, 0);
  const auto resumed = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;

  const auto files = event_files(split);
  ASSERT_EQ(files.size(), 1u);  // the first part folded into the resumed run's file
  const auto a = scalars(read_events(event_files(straight)[0])[0]["events"]);
  const auto b = scalars(read_events(files[0])[0]["events"]);
  ASSERT_EQ(a.size(), b.size());
  // Same (step, tag) pairs in the same order, and the same training numbers (the resume is exact, and step 24
  // ends a log interval); speeds and waits are timings, and the resumed epoch's "epoch/" row summarises only
  // what the second process trained, as in metrics.jsonl.
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    ASSERT_EQ(ia->first, ib->first);
    const std::string& tag = ia->first.second;
    if (tag.rfind("epoch/", 0) == 0) continue;
    if (tag.find("loss") != std::string::npos || tag.find("top") != std::string::npos ||
        tag.find("/lr") != std::string::npos) {
      EXPECT_EQ(ia->second, ib->second) << tag << " at step " << ia->first.first;
    }
  }
}

TEST(TensorBoard, OffWritesNoEventFiles) {
  SmallRun run;
  const fs::path out = run.dir / "r";
  ASSERT_EQ(trainer_cli("--config " + run.config.string() + " -o " + out.string() +
                        " --set run.tensorboard=false --set train.epochs=1")
                .exit_code,
            0);
  EXPECT_FALSE(fs::exists(out / "tb"));
}

}  // namespace
}  // namespace trainer
