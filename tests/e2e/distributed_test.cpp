// Data-parallel training as a user runs it under torchrun or SLURM: two trainer processes with torchrun's
// variables meet over loopback (Gloo) and train like one process with the same global batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"

namespace trainer::testing {
namespace {

// Starts `world` trainer processes with torchrun's variables and waits for all; the output holds each rank's
// exit code ("rank R exit C") and its log.
// `around` runs first in the same shell, and its process ($around) is killed at the end; `env` is set for each rank.
CommandResult run_ranks(int world, const std::string& args, const fs::path& logs, int port = free_loopback_port(),
                        const std::string& around = "", const std::string& env = "") {
  std::string script = around.empty() ? "" : around + " > /dev/null 2>&1 & around=$!; ";
  for (int r = 0; r < world; ++r)
    script += env + " RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) +
              " LOCAL_RANK=" + std::to_string(r) + " LOCAL_WORLD_SIZE=" + std::to_string(world) +
              " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + TRAINER_BIN + " " + args + " > " +
              (logs / ("rank" + std::to_string(r) + ".log")).string() + " 2>&1 & p" + std::to_string(r) + "=$!; ";
  for (int r = 0; r < world; ++r)
    script += "wait $p" + std::to_string(r) + "; echo rank " + std::to_string(r) + " exit $?; cat " +
              (logs / ("rank" + std::to_string(r) + ".log")).string() + "; ";
  if (!around.empty()) script += "kill $around; ";
  return run_command("bash -c '" + script + "'");
}

// mnist_cnn for the 10 classes of write_mnist_dir.
ModelConfig mnist_cnn() {
  ModelConfig m;
  m.num_classes = 10;
  return m;
}

// A checkpoint's parameters and then its buffers (BatchNorm's running statistics), in the model's order.
std::vector<torch::Tensor> weights(const fs::path& checkpoint, const ModelConfig& m = mnist_cnn()) {
  const LoadedCheckpoint c(checkpoint);
  auto model = build_model(m, {28, 28, 1});
  c.restore_model(*model);
  auto all = model->parameters();
  for (const auto& b : model->buffers()) all.push_back(b);
  return all;
}

// Within `tolerance` of each tensor's largest magnitude (1e-5: equal to float rounding).
void expect_near(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tolerance = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].to(torch::kDouble), y = b[i].to(torch::kDouble);
    const double scale = x.abs().max().item<double>();
    EXPECT_LE((x - y).abs().max().item<double>(), tolerance * scale + 1e-7) << i;
  }
}

// 192 images in global batches of 32 (16 per rank) and an eval split of 75 (37 + 38): two ranks end with the
// weights of one process accumulating the ranks' micro-batches (batch 16, accumulate_steps 2), bit for bit: the
// same sums in the same order (each micro-batch's gradient halved, which is exact, then added), whatever CPU
// kernels round them; and they evaluate the same images. Against one process at batch 32 they would differ by
// float rounding amplified through training, which depends on the CPU (4.8e-6 on one AMD EPYC).
TEST(Distributed, TwoRanksTrainLikeOneProcessAccumulatingTheirShares) {
  TempDir dir;
  write_mnist_dir(dir / "data", 192, 75);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"run", {{"threads", 1}}}, {"data", {{"workers", 1}}}, {"train", {{"epochs", 2}, {"log_every", 3}}}});
  write_text(dir / "c.json", c.dump());
  const auto single = trainer_cli("--config " + (dir / "c.json").string() +
                                  " --set data.batch_size=16 --set train.accumulate_steps=2 -o " +
                                  (dir / "one").string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto ranks =
      run_ranks(2, "--config " + (dir / "c.json").string() + " -o " + (dir / "two").string(), dir.path());
  ASSERT_NE(ranks.output.find("rank 0 exit 0"), std::string::npos) << ranks.output;
  ASSERT_NE(ranks.output.find("rank 1 exit 0"), std::string::npos) << ranks.output;
  EXPECT_NE(ranks.output.find("data-parallel: rank 0 of 2 (torchrun launcher, gloo)"), std::string::npos)
      << ranks.output;
  EXPECT_NE(ranks.output.find("eval epoch 2: "), std::string::npos) << ranks.output;
  EXPECT_NE(ranks.output.find("/75) top5"), std::string::npos) << ranks.output;
  for (const char* epoch : {"epoch 1/2 done", "epoch 2/2 done"}) {  // the ranks' weights, compared bit for bit
    const size_t line = ranks.output.find(epoch);
    ASSERT_NE(line, std::string::npos) << ranks.output;
    EXPECT_NE(ranks.output.substr(line, ranks.output.find('\n', line) - line).find("weights identical on 2 ranks"),
              std::string::npos)
        << ranks.output;
  }
  const auto one = weights(dir / "one" / "last.pt"), two = weights(dir / "two" / "last.pt");
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
  EXPECT_EQ(LoadedCheckpoint(dir / "two" / "last.pt").meta().step, 12);
  EXPECT_EQ(LoadedCheckpoint(dir / "one" / "last.pt").meta().step, 12);
}

// model.sync_batchnorm: a BatchNorm ResNet's first step on 2 ranks x 16 is one process's step on 32. Every
// BatchNorm layer's running statistics (the forward pass of all 20 layers) agree to float rounding; the weights
// to 5% of each tensor's largest value, since a BatchNorm ResNet's float32 gradients at initialisation are
// themselves only good to about 3% against float64 (measured with torchvision's resnet18 in Python) and summing
// in another order moves them as much. Without synchronisation the running statistics differ by up to 7% and
// the BatchNorm biases by 85%. The exact algorithm is tested in float64 in unit/SyncBatchNorm.
TEST(Distributed, SyncBatchNormTrainsLikeOneProcess) {
  TempDir dir;
  write_mnist_dir(dir / "data", 96, 20);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"run", {{"threads", 1}}},
                 {"data", {{"workers", 1}}},
                 {"model", {{"arch", "resnet18"}, {"stem", "small"}, {"sync_batchnorm", true}}},
                 {"train", {{"epochs", 1}, {"log_every", 1}}}});
  write_text(dir / "c.json", c.dump());
  const std::string args = "--config " + (dir / "c.json").string() + " --stop-after-step 1 -o ";
  const auto single = trainer_cli(args + (dir / "one").string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto ranks = run_ranks(2, args + (dir / "two").string(), dir.path());
  ASSERT_NE(ranks.output.find("rank 0 exit 0"), std::string::npos) << ranks.output;
  ASSERT_NE(ranks.output.find("rank 1 exit 0"), std::string::npos) << ranks.output;
  EXPECT_NE(ranks.output.find("model.sync_batchnorm: 20 BatchNorm layers take their statistics over 2 ranks"),
            std::string::npos)
      << ranks.output;
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "resnet18";
  m.stem = StemKind::small;
  const auto a = weights(dir / "one" / "last.pt", m), b = weights(dir / "two" / "last.pt", m);
  const size_t parameters = build_model(m, {28, 28, 1})->parameters().size();
  ASSERT_EQ(a.size(), parameters + 60);  // running mean, variance and batch count of 20 layers
  expect_near({a.begin() + parameters, a.end()}, {b.begin() + parameters, b.end()});
  expect_near({a.begin(), a.begin() + parameters}, {b.begin(), b.begin() + parameters}, 5e-2);
}

// Runs `trainer ARGS` in the background under bash, waits until `log` shows `marker`, then runs `then` (with the
// trainer's pid in $p) and reports "exit CODE" of the trainer.
CommandResult run_until(const std::string& args, const fs::path& log, const std::string& marker,
                        const std::string& then) {
  return run_command("bash -c '" + std::string(TRAINER_BIN) + " " + args + " > " + log.string() +
                     " 2>&1 & p=$!; for i in $(seq 600); do grep -q \"" + marker + "\" " + log.string() +
                     " && break; sleep 0.1; done; " + then + "; wait $p; echo exit $?; cat " + log.string() + "'");
}

// The built-in launcher: SIGTERM mid-epoch stops both ranks after the same step, rank 0 saves, exit 143; the
// resumed 2-rank run ends bit-identical to a straight one, dropout included (the checkpoint holds both ranks'
// generator states, and the ranks draw different masks), and the checkpoint also resumes on 1 process.
TEST(Distributed, LauncherStopsAllRanksOnSigtermAndTheRunResumesExactly) {
  TempDir dir;
  write_mnist_dir(dir / "data", 256, 64);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"run", {{"threads", 1}}},
                 {"data", {{"workers", 1}, {"batch_size", 16}}},
                 {"model", {{"dropout", 0.3}}},
                 {"train", {{"epochs", 3}, {"log_every", 1}}}});
  write_text(dir / "c.json", c.dump());
  const std::string config = "--config " + (dir / "c.json").string();
  const auto straight = trainer_cli(config + " --nproc-per-node 2 -o " + (dir / "straight").string());
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("data-parallel: rank 0 of 2 (torchrun launcher, gloo)"), std::string::npos);

  const auto stopped = run_until(config + " --nproc-per-node 2 -o " + (dir / "stopped").string(), dir / "stopped.log",
                                 "epoch 1 step 3/", "kill -TERM $p");
  ASSERT_NE(stopped.output.find("exit 143"), std::string::npos) << stopped.output;
  ASSERT_NE(stopped.output.find("stopped by SIGTERM after step"), std::string::npos) << stopped.output;
  const int64_t step = LoadedCheckpoint(dir / "stopped" / "last.pt").meta().step;
  EXPECT_GT(step, 2);
  EXPECT_LT(step, 48);
  const auto generators = LoadedCheckpoint(dir / "stopped" / "last.pt").rank_generators();
  ASSERT_TRUE(generators.has_value());
  ASSERT_EQ(generators->ranks(), 2);
  EXPECT_FALSE(torch::equal(generators->cpu[0], generators->cpu[1]));

  fs::copy(dir / "stopped", dir / "one_rank", fs::copy_options::recursive);
  const auto resumed = trainer_cli("--resume " + (dir / "stopped" / "last.pt").string() + " --nproc-per-node 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto a = weights(dir / "straight" / "last.pt"), b = weights(dir / "stopped" / "last.pt");
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;

  const auto single = trainer_cli("--resume " + (dir / "one_rank" / "last.pt").string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(LoadedCheckpoint(dir / "one_rank" / "last.pt").meta().step, 48);
}

// More ranks than cores on the CPU: a warning, and the run trains (a 3-rank world on a 2-core box is how a run
// that resumes on another world size is tested); it was refused.
TEST(Distributed, MoreRanksThanCoresWarnsAndTrains) {
  TempDir dir;
  write_mnist_dir(dir / "data", 96, 32);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"run", {{"threads", 1}, {"device", "cpu"}}},
                 {"data", {{"workers", 0}, {"batch_size", 24}}},
                 {"train", {{"epochs", 1}}}});
  write_text(dir / "c.json", c.dump());
  const auto n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) + 1;
  const auto r = trainer_cli("--config " + (dir / "c.json").string() + " --nproc-per-node " + std::to_string(n) +
                             " -o " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--nproc-per-node " + std::to_string(n) + ": more processes than this machine's"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(LoadedCheckpoint(dir / "run" / "last.pt").meta().step, 4);
}

// kill -9 of one rank: the launcher stops the other and exits 1 naming the rank, well within the timeout.
TEST(Distributed, ARankKilledEndsTheLaunchNamingIt) {
  TempDir dir;
  write_mnist_dir(dir / "data", 256, 64);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"run", {{"threads", 1}, {"dist_timeout_s", 60}}},
                 {"data", {{"workers", 1}, {"batch_size", 16}}},
                 {"train", {{"epochs", 50}, {"log_every", 1}}}});
  write_text(dir / "c.json", c.dump());
  const auto r =
      run_until("--config " + (dir / "c.json").string() + " --nproc-per-node 2 -o " + (dir / "run").string(),
                dir / "run.log", "epoch 1 step 2/", "kill -KILL $(cut -d\" \" -f2 /proc/$p/task/$p/children)");
  EXPECT_NE(r.output.find("exit 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error: train: rank 1 of 2 was killed by signal 9"), std::string::npos) << r.output;
}

// --max-restarts: a rank killed with kill -9 at three random points (checkpoints every step); each time the launcher
// stops the other, starts both again from the newest good checkpoint (--resume auto) and says so; the run ends with the
// weights of a run that was never killed, bit for bit.
TEST(Distributed, KilledRanksAreRestartedAndTheRunEndsAsIfNeverKilled) {
  TempDir dir;
  write_mnist_dir(dir / "data", 256, 64);
  auto c = small_run_config(dir / "data");
  c.merge_patch({{"run", {{"threads", 1}, {"dist_timeout_s", 30}, {"plot", false}}},
                 {"data", {{"workers", 1}, {"batch_size", 16}}},
                 {"train", {{"epochs", 2}, {"log_every", 1}, {"checkpoint_every_steps", 1}}}});
  write_text(dir / "c.json", c.dump());
  const std::string config = "--config " + (dir / "c.json").string();
  const auto straight = trainer_cli(config + " --nproc-per-node 2 -o " + (dir / "straight").string());
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  // Each marker: wait for the step's line, then kill -9 one child of the launcher (a rank).
  // Three steps drawn at random (seeded, so a failure repeats), apart enough that each restart has passed the
  // previous one.
  std::mt19937 rng(20261205);
  std::vector<int> steps;
  for (int lo : {2, 12, 22}) steps.push_back(std::uniform_int_distribution<int>(lo, lo + 7)(rng));
  std::string kills;
  for (int step : steps)
    kills += "for i in $(seq 600); do grep -q \"step " + std::to_string(step) + "/\" " + (dir / "killed.log").string() +
             " && break; sleep 0.1; done; kill -KILL $(cut -d\" \" -f1 /proc/$p/task/$p/children); ";
  SCOPED_TRACE("killed after steps " + std::to_string(steps[0]) + ", " + std::to_string(steps[1]) + ", " +
               std::to_string(steps[2]));
  const auto killed =
      run_command("bash -c '" + std::string(TRAINER_BIN) + " " + config + " --nproc-per-node 2 --max-restarts 3 -o " +
                  (dir / "killed").string() + " > " + (dir / "killed.log").string() + " 2>&1 & p=$!; " + kills +
                  "wait $p; echo exit $?; cat " + (dir / "killed.log").string() + "'");
  ASSERT_NE(killed.output.find("exit 0"), std::string::npos) << killed.output;
  EXPECT_NE(killed.output.find("restart 3 of 3, from the run's newest good checkpoint"), std::string::npos)
      << killed.output;
  EXPECT_NE(killed.output.find("resume auto: continuing from"), std::string::npos) << killed.output;
  const auto a = weights(dir / "straight" / "last.pt"), b = weights(dir / "killed" / "last.pt");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
  EXPECT_EQ(LoadedCheckpoint(dir / "killed" / "last.pt").meta().step, 32);
}

// PyTorch's own launcher (python3-torch ships torch.distributed.run): its agent serves the store and the
// trainer's ranks join it as clients. Debian's torchrun cannot start any process: 1.13 on Python 3.11 fails in its
// redirect handling (AttributeError), and 2.6 asks for a libuv store its build lacks. There the agent's part is
// played by Python's TCPStore (classic server), with the variables torchrun would set.
TEST(Distributed, TorchrunStartsTheRanks) {
  const std::string python = TRAINER_PYTHON;
  if (run_command(python + " -c 'import torch.distributed.run'").exit_code != 0)
    GTEST_SKIP() << "torch.distributed.run not found for " << python << " (Debian: python3-torch)";
  TempDir dir;
  write_mnist_dir(dir / "data", 128, 32);
  auto c = small_run_config(dir / "data");
  c.merge_patch(
      {{"run", {{"threads", 1}, {"dist_timeout_s", 60}}}, {"data", {{"workers", 1}}}, {"train", {{"epochs", 1}}}});
  write_text(dir / "c.json", c.dump());
  const std::string args = "--config " + (dir / "c.json").string() + " -o " + (dir / "run").string();
  const int port = free_loopback_port();
  const bool torchrun_works = run_command(python + " -m torch.distributed.run --nproc_per_node 1 --master_port " +
                                          std::to_string(port) + " --no_python /bin/true")
                                  .exit_code == 0;
  CommandResult r;
  if (torchrun_works) {
    r = run_command(python + " -m torch.distributed.run --nproc_per_node 2 --master_port " + std::to_string(port) +
                    " --no_python " + TRAINER_BIN + " " + args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  } else {
    write_text(dir / "agent.py",
               "import datetime, sys, time\n"
               "import torch.distributed as d\n"
               "store = (\"127.0.0.1\", int(sys.argv[1]), 3, True, datetime.timedelta(seconds=60), False)\n"
               "try:\n"
               "    s = d.TCPStore(*store, use_libuv=False)  # torch >= 2.1 (its builds may lack libuv)\n"
               "except TypeError:\n"
               "    s = d.TCPStore(*store)\n"
               "time.sleep(120)\n");
    r = run_ranks(2, args, dir.path(), port, python + " " + (dir / "agent.py").string() + " " + std::to_string(port),
                  "TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=0");
    ASSERT_NE(r.output.find("rank 0 exit 0"), std::string::npos) << r.output;
    ASSERT_NE(r.output.find("rank 1 exit 0"), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find("data-parallel: rank 0 of 2 (torchrun launcher, gloo)"), std::string::npos) << r.output;
  EXPECT_EQ(LoadedCheckpoint(dir / "run" / "last.pt").meta().step, 4);
}

}  // namespace
}  // namespace trainer::testing
