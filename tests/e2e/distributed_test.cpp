// Data-parallel training as a user runs it under torchrun or SLURM: two trainer processes with torchrun's
// variables meet over loopback (Gloo) and train like one process with the same global batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "e2e/e2e_support.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"

namespace trainer::testing {
namespace {

// Starts `world` trainer processes with torchrun's variables and waits for all; the output holds each rank's
// exit code ("rank R exit C") and its log.
CommandResult run_ranks(int world, const std::string& args, const fs::path& logs) {
  const int port = free_loopback_port();
  std::string script;
  for (int r = 0; r < world; ++r)
    script += "RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) + " LOCAL_RANK=" +
              std::to_string(r) + " LOCAL_WORLD_SIZE=" + std::to_string(world) +
              " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + TRAINER_BIN + " " + args + " > " +
              (logs / ("rank" + std::to_string(r) + ".log")).string() + " 2>&1 & p" + std::to_string(r) + "=$!; ";
  for (int r = 0; r < world; ++r)
    script += "wait $p" + std::to_string(r) + "; echo rank " + std::to_string(r) + " exit $?; cat " +
              (logs / ("rank" + std::to_string(r) + ".log")).string() + "; ";
  return run_command("bash -c '" + script + "'");
}

std::vector<torch::Tensor> weights(const fs::path& checkpoint) {
  const LoadedCheckpoint c(checkpoint);
  ModelConfig m;
  auto model = build_model(m, {28, 28, 1});
  c.restore_model(*model);
  return model->parameters();
}

// 200 images in global batches of 32 (the last one 8: 4 per rank) and an eval split of 75 (37 + 38): two ranks
// end with the weights of one process to float rounding, and evaluate the same images.
TEST(Distributed, TwoRanksTrainLikeOneProcessWithTheGlobalBatch) {
  TempDir dir;
  write_mnist_dir(dir / "data", 200, 75);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"run", {{"threads", 1}}}, {"data", {{"workers", 1}}}, {"train", {{"epochs", 2}, {"log_every", 3}}}});
  write_text(dir / "c.json", c.dump());
  const auto single = trainer_cli("--config " + (dir / "c.json").string() + " -o " + (dir / "one").string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto ranks = run_ranks(2, "--config " + (dir / "c.json").string() + " -o " + (dir / "two").string(), dir.path());
  ASSERT_NE(ranks.output.find("rank 0 exit 0"), std::string::npos) << ranks.output;
  ASSERT_NE(ranks.output.find("rank 1 exit 0"), std::string::npos) << ranks.output;
  EXPECT_NE(ranks.output.find("data-parallel: rank 0 of 2 (torchrun launcher)"), std::string::npos) << ranks.output;
  EXPECT_NE(ranks.output.find("eval epoch 2: "), std::string::npos) << ranks.output;
  EXPECT_NE(ranks.output.find("/75) top5"), std::string::npos) << ranks.output;

  const auto a = weights(dir / "one" / "last.pt"), b = weights(dir / "two" / "last.pt");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = a[i].abs().max().item<double>();
    EXPECT_LT((a[i] - b[i]).abs().max().item<double>(), 1e-5 * scale + 1e-7) << i;
  }
  EXPECT_EQ(LoadedCheckpoint(dir / "two" / "last.pt").meta().step, LoadedCheckpoint(dir / "one" / "last.pt").meta().step);
}

}  // namespace
}  // namespace trainer::testing
