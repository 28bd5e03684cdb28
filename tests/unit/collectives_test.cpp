// c10d through Collectives: two ranks as two threads of this process, meeting over loopback (Gloo, TCPStore).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <csignal>
#include <thread>

#include "support/fixtures.hpp"
#include "trainer/distributed/collectives.hpp"
#include "trainer/distributed/grad_reducer.hpp"
#include "trainer/distributed/replica_check.hpp"
#include "trainer/distributed/stop_vote.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/sync_batch_norm.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

World loopback(int64_t rank, int64_t size, int port) {
  World w;
  w.rank = rank;
  w.size = size;
  w.master_addr = "127.0.0.1";
  w.port = port;
  return w;
}

TEST(Collectives, TwoRanksSumAndBroadcastOverLoopback) {
  const int port = testing::free_loopback_port();
  std::vector<torch::Tensor> sums(2), broadcasts(2);
  auto rank = [&](int64_t r) {
    Collectives group(loopback(r, 2, port), CollectivesOptions{std::chrono::seconds(20)});
    std::vector<torch::Tensor> t{torch::arange(5, torch::kFloat) * (r + 1),
                                 torch::full({2, 2}, r + 1.0, torch::kDouble)};
    group.all_reduce_sum(t);
    sums[r] = torch::cat({t[0], t[1].flatten().to(torch::kFloat)});
    std::vector<torch::Tensor> b{torch::full({3}, static_cast<int64_t>(10 + r), torch::kInt64)};
    group.broadcast(b, /*root=*/1);
    broadcasts[r] = b[0];
    group.barrier();
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  const auto expected = torch::cat({torch::arange(5, torch::kFloat) * 3, torch::full({4}, 3.0f)});
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(sums[r], expected)) << r;
    EXPECT_TRUE(torch::equal(broadcasts[r], torch::full({3}, 11, torch::kInt64))) << r;
  }
}

// A stop request on one rank stops both after the same step, one step after the ballot it was cast in, with the
// same signal on both (SIGTERM over SIGINT); a ballot of no requests goes on.
TEST(StopVote, BothRanksDecideTheSameStepOneBallotLater) {
  const int port = testing::free_loopback_port();
  // Per rank and step: the signal pending there. Rank 1 is signalled (SIGTERM) from step 2 on; rank 0 from step 5
  // with SIGINT.
  const std::vector<std::vector<int>> own{{0, 0, 0, 0, 0, 2, 2}, {0, 0, 15, 15, 15, 15, 15}};
  std::vector<std::vector<int>> decided(2);
  std::vector<std::vector<bool>> saves(2);
  auto rank = [&](int64_t r) {
    Collectives group(loopback(r, 2, port), CollectivesOptions{std::chrono::seconds(20)});
    StopVote vote(group);
    for (size_t step = 0; step < own[r].size(); ++step) {
      // Rank 0's clock says a timed checkpoint is due at step 1: both save at step 2.
      const StopVote::Decision d = vote.cast(own[r][step], r == 0 && step == 1);
      decided[r].push_back(d.stop);
      saves[r].push_back(d.save);
    }
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  EXPECT_EQ(decided[0], (std::vector<int>{0, 0, 0, 15, 15, 15, 15}));
  EXPECT_EQ(decided[1], (std::vector<int>{0, 0, 0, 15, 15, 15, 15}));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(saves[r], (std::vector<bool>{false, false, true, false, false, false, false}));
}

// SIGINT on one rank and SIGTERM on another: all three ranks stop with SIGTERM (exit 143). Averaged, the two
// signals made 8 (SIGFPE) on the third rank, which then exited 136.
TEST(StopVote, MixedSignalsGiveEveryRankTheSameOne) {
  const int port = testing::free_loopback_port();
  const std::vector<std::vector<int>> own{{0, SIGINT, SIGINT}, {0, SIGTERM, SIGTERM}, {0, 0, 0}};
  std::vector<std::vector<int>> decided(3);
  auto rank = [&](int64_t r) {
    Collectives group(loopback(r, 3, port), CollectivesOptions{std::chrono::seconds(20)});
    StopVote vote(group);
    for (int s : own[r]) decided[r].push_back(vote.cast(s, false).stop);
  };
  std::thread one(rank, 1), two(rank, 2);
  rank(0);
  one.join();
  two.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(decided[r], (std::vector<int>{0, 0, SIGTERM})) << "rank " << r;
}

// 2 ranks x 8 images (each in 2 accumulated micro-batches of 4) give the gradient of 1 process x 16 images,
// with buckets small enough that several all-reduces run during backward.
TEST(GradReducer, TwoRanksAverageToTheFullBatchGradient) {
  ModelConfig m;  // mnist_cnn: no BatchNorm, no dropout
  m.num_classes = 10;
  torch::manual_seed(4);
  const auto x = torch::randn({16, 1, 12, 12});
  const auto y = torch::randint(0, 10, {16});
  torch::manual_seed(1);
  auto reference = build_model(m, {12, 12, 1});
  torch::nn::functional::cross_entropy(reference->forward(x), y).backward();
  std::vector<ClassifierPtr> models;
  for (int r = 0; r < 2; ++r) {
    torch::manual_seed(1);
    models.push_back(build_model(m, {12, 12, 1}));
  }
  const int port = testing::free_loopback_port();
  std::vector<int64_t> buckets(2);
  auto rank = [&](int64_t r) {
    Collectives group(loopback(r, 2, port), CollectivesOptions{std::chrono::seconds(20)});
    GradReducer reducer(models[r]->parameters(), group, /*bucket_bytes=*/16 << 10);
    buckets[r] = reducer.buckets();
    for (int64_t micro = 0; micro < 2; ++micro) {
      const int64_t first = r * 8 + micro * 4;
      reducer.arm(micro == 1);
      const auto loss = torch::nn::functional::cross_entropy(models[r]->forward(x.slice(0, first, first + 4)),
                                                             y.slice(0, first, first + 4));
      (loss / 2.0).backward();
    }
    reducer.finish();
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  EXPECT_GT(buckets[0], 2);
  const auto expected = reference->parameters();
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_TRUE(torch::allclose(models[r]->parameters()[i].grad(), expected[i].grad(), 1e-5, 1e-7)) << r << " " << i;
  for (size_t i = 0; i < expected.size(); ++i)  // both ranks hold the very same average
    EXPECT_TRUE(torch::equal(models[0]->parameters()[i].grad(), models[1]->parameters()[i].grad())) << i;
}

TEST(Collectives, APortInUseIsAUsageErrorNamingIt) {
  testing::LoopbackListener taken;
  const std::string message = testing::error_of<UsageError>(
      [&] { Collectives group(loopback(0, 2, taken.port), CollectivesOptions{std::chrono::seconds(5)}); });
  EXPECT_NE(message.find("usage: distributed: rank 0 cannot listen on 127.0.0.1:" + std::to_string(taken.port)),
            std::string::npos)
      << message;
}

TEST(Collectives, ARankThatNeverComesEndsTheWaitWithAnError) {
  const int port = testing::free_loopback_port();
  const std::string message = testing::error_of<TrainError>(
      [&] { Collectives group(loopback(0, 2, port), CollectivesOptions{std::chrono::seconds(2)}); });
  EXPECT_NE(message.find("train: distributed: rank 0 of 2 could not meet the others at 127.0.0.1:" +
                         std::to_string(port) + " within 2 s"),
            std::string::npos)
      << message;
}

// model.sync_batchnorm, in float64 so that only the algorithm is compared (a BatchNorm ResNet's float32 gradients
// are themselves only good to about 1e-3 against float64): 2 ranks x 8 images (channels_last on one of them) give
// the outputs, input gradients, running statistics and summed parameter gradients of one BatchNorm2d over all 16.
TEST(SyncBatchNorm, TwoRanksNormaliseLikeOneBatch) {
  torch::manual_seed(3);
  const auto x = torch::randn({16, 4, 3, 5}, torch::kDouble) * 3 + 2;
  const auto r = torch::randn({16, 4, 3, 5}, torch::kDouble);  // the loss is sum(y * r)
  const auto weight = torch::rand({4}, torch::kDouble) + 0.5, bias = torch::randn({4}, torch::kDouble);
  auto make = [&] {
    SyncBatchNorm2d bn(4);
    bn->to(torch::kDouble);
    torch::NoGradGuard no_grad;
    bn->weight.copy_(weight);
    bn->bias.copy_(bias);
    return bn;
  };
  SyncBatchNorm2d reference = make();
  const auto x_all = x.clone().requires_grad_();
  const auto y_all = reference->forward(x_all);
  (y_all * r).sum().backward();

  const int port = testing::free_loopback_port();
  std::vector<SyncBatchNorm2d> ranks{make(), make()};
  std::vector<torch::Tensor> inputs(2), outputs(2);
  auto rank = [&](int64_t k) {
    Collectives group(loopback(k, 2, port), CollectivesOptions{std::chrono::seconds(20)});
    EXPECT_EQ(sync_batch_norm(*ranks[k], [&](const std::vector<torch::Tensor>& t) { group.all_reduce_sum(t); }), 1);
    auto mine = x.slice(0, 8 * k, 8 * k + 8).clone();
    if (k == 1) mine = mine.contiguous(torch::MemoryFormat::ChannelsLast);
    inputs[k] = mine.requires_grad_();
    outputs[k] = ranks[k]->forward(inputs[k]);
    (outputs[k] * r.slice(0, 8 * k, 8 * k + 8)).sum().backward();
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  auto near = [](const torch::Tensor& a, const torch::Tensor& b) { return torch::allclose(a, b, 1e-10, 1e-12); };
  EXPECT_TRUE(near(torch::cat({outputs[0], outputs[1]}), y_all));
  EXPECT_TRUE(near(torch::cat({inputs[0].grad(), inputs[1].grad()}), x_all.grad()));
  EXPECT_TRUE(near(ranks[0]->weight.grad() + ranks[1]->weight.grad(), reference->weight.grad()));
  EXPECT_TRUE(near(ranks[0]->bias.grad() + ranks[1]->bias.grad(), reference->bias.grad()));
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(near(ranks[k]->running_mean, reference->running_mean)) << k;
    EXPECT_TRUE(near(ranks[k]->running_var, reference->running_var)) << k;
    EXPECT_EQ(ranks[k]->num_batches_tracked.item<int64_t>(), 1) << k;
  }
  EXPECT_TRUE(outputs[1].is_contiguous(torch::MemoryFormat::ChannelsLast));
}

// The whole network, in float64: resnet18 (small stem) on 2 ranks x 8 images of 16 x 16 with synchronised
// BatchNorm gives the summed parameter gradients of one batch of 16 (each rank's loss is its share of the mean).
TEST(SyncBatchNorm, ResNetGradientsOfTwoRanksAreThoseOfOneBatch) {
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "resnet18";
  m.stem = StemKind::small;
  torch::manual_seed(5);
  const auto x = torch::randn({16, 1, 16, 16}, torch::kDouble);
  const auto y = torch::randint(0, 10, {16});
  auto make = [&] {
    torch::manual_seed(1);
    auto model = build_model(m, {16, 16, 1});
    model->to(torch::kDouble);
    return model;
  };
  auto reference = make();
  torch::nn::functional::cross_entropy(reference->forward(x), y).backward();
  std::vector<ClassifierPtr> models{make(), make()};
  const int port = testing::free_loopback_port();
  auto rank = [&](int64_t k) {
    Collectives group(loopback(k, 2, port), CollectivesOptions{std::chrono::seconds(20)});
    sync_batch_norm(*models[k], [&](const std::vector<torch::Tensor>& t) { group.all_reduce_sum(t); });
    const auto mine = x.slice(0, 8 * k, 8 * k + 8);
    (torch::nn::functional::cross_entropy(models[k]->forward(mine), y.slice(0, 8 * k, 8 * k + 8)) / 2.0).backward();
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  for (const auto& p : reference->named_parameters()) {
    const auto sum = models[0]->named_parameters()[p.key()].grad() + models[1]->named_parameters()[p.key()].grad();
    const double scale = p.value().grad().abs().max().item<double>();
    EXPECT_LE((sum - p.value().grad()).abs().max().item<double>(), 1e-9 * scale) << p.key();
  }
}

// The per-epoch replica check: two ranks with the same weights agree; one bit flipped on rank 1 (0.0 -> -0.0,
// equal as numbers) is found.
TEST(ReplicaCheck, FindsARankWhoseWeightsDifferByOneBit) {
  const std::vector<torch::Tensor> weights{torch::zeros({3, 4}), torch::arange(10, torch::kDouble),
                                           torch::ones({2}, torch::kHalf)};
  EXPECT_EQ(bit_checksum(weights), bit_checksum({weights[0].clone(), weights[1].clone(), weights[2].clone()}));
  auto flipped = weights[0].clone();
  flipped[1][2] = -0.0;
  EXPECT_NE(bit_checksum(weights), bit_checksum({flipped, weights[1], weights[2]}));
  const int port = testing::free_loopback_port();
  std::vector<int64_t> same(2), differing(2);
  auto rank = [&](int64_t k) {
    Collectives group(loopback(k, 2, port), CollectivesOptions{std::chrono::seconds(20)});
    same[k] = ranks_differing_from_rank0(group, weights);
    differing[k] = ranks_differing_from_rank0(
        group, k == 1 ? std::vector<torch::Tensor>{flipped, weights[1], weights[2]} : weights);
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  EXPECT_EQ(same, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(differing, (std::vector<int64_t>{1, 1}));
}

// run.dist_backend: auto is Gloo on the CPU and NCCL on CUDA where the build has it; nccl on the CPU, or in a
// build without NCCL, is a usage error naming the key.
TEST(Collectives, TheBackendFollowsTheDevice) {
  EXPECT_EQ(resolve_backend(DistBackend::automatic, torch::kCPU), DistBackend::gloo);
  EXPECT_EQ(resolve_backend(DistBackend::gloo, torch::Device(torch::kCUDA, 0)), DistBackend::gloo);
  EXPECT_EQ(resolve_backend(DistBackend::automatic, torch::Device(torch::kCUDA, 0)),
            nccl_available() ? DistBackend::nccl : DistBackend::gloo);
  const std::string on_cpu = testing::error_of<UsageError>([] { resolve_backend(DistBackend::nccl, torch::kCPU); });
  EXPECT_NE(on_cpu.find("run.dist_backend nccl needs CUDA, but the run is on cpu"), std::string::npos) << on_cpu;
  if (!nccl_available()) {
    const std::string missing =
        testing::error_of<UsageError>([] { resolve_backend(DistBackend::nccl, torch::Device(torch::kCUDA, 0)); });
    EXPECT_NE(missing.find("this trainer was built without NCCL"), std::string::npos) << missing;
  }
}

}  // namespace
}  // namespace trainer
