#include <gtest/gtest.h>

#include "e2e/e2e_support.hpp"
#include "trainer/config/load.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;
using nlohmann::json;

ClassifierPtr load_weights(const fs::path& checkpoint) {
  const LoadedCheckpoint ck(checkpoint);
  const Config c = parse_config(ck.meta().config);
  auto model = build_model(c.model, {28, 28, 1});
  ck.restore_model(*model);
  return model;
}

// Rows without their timing columns, which are the only values allowed to differ.
std::vector<json> metric_rows(const fs::path& run_dir) {
  std::vector<json> rows;
  std::istringstream lines(read_text(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    json row = json::parse(line);
    for (const char* timing : {"images_per_s", "data_wait_s", "compute_s"}) row.erase(timing);
    rows.push_back(row);
  }
  return rows;
}

// 2 epochs straight vs 1 epoch, stop, resume for the 2nd: identical weights, optimizer state and metrics.
TEST(Resume, IsBitIdenticalToAnUninterruptedRun) {
  SmallRun run(json{{"model", {{"dropout", 0.2}}}});  // dropout: the RNG state must be restored too
  const fs::path straight = run.dir / "straight", split = run.dir / "split";
  const auto a = trainer_cli("--config " + run.config.string() + " -o " + straight.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto b1 = trainer_cli("--config " + run.config.string() + " -o " + split.string() + " --stop-after-epoch 1");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  ASSERT_EQ(LoadedCheckpoint(split / "last.pt").meta().epoch, 1);
  const auto b2 = trainer_cli("--resume " + (split / "last.pt").string());
  ASSERT_EQ(b2.exit_code, 0) << b2.output;

  const LoadedCheckpoint ca(straight / "last.pt"), cb(split / "last.pt");
  EXPECT_EQ(cb.meta().epoch, 2);
  EXPECT_EQ(ca.meta().step, cb.meta().step);
  EXPECT_EQ(ca.meta().best_top1, cb.meta().best_top1);
  EXPECT_EQ(ca.meta().config, cb.meta().config);
  const auto ma = load_weights(straight / "last.pt"), mb = load_weights(split / "last.pt");
  const auto pb = mb->named_parameters();
  for (const auto& item : ma->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key() << " differs after resume";
  EXPECT_EQ(metric_rows(straight), metric_rows(split));
  EXPECT_GE(metric_rows(split).size(), 4u);
}

}  // namespace
}  // namespace trainer
