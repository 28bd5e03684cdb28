#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "trainer/data/batch_dataset.hpp"
#include "trainer/data/epoch_sampler.hpp"
#include "trainer/data/loaders.hpp"
#include "trainer/data/synthetic.hpp"

namespace trainer {
namespace {

std::vector<std::vector<size_t>> drain(EpochSampler sampler) {
  std::vector<std::vector<size_t>> batches;
  while (auto b = sampler.next(0)) batches.push_back(*b);
  return batches;
}

TEST(EpochSampler, OrderIsAPermutationAndAPureFunctionOfSeedAndEpoch) {
  const auto a = EpochSampler::epoch_order(1000, 7, 3, true);
  EXPECT_EQ(a, EpochSampler::epoch_order(1000, 7, 3, true));
  EXPECT_NE(a, EpochSampler::epoch_order(1000, 7, 4, true));
  EXPECT_NE(a, EpochSampler::epoch_order(1000, 8, 3, true));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> identity(1000);
  std::iota(identity.begin(), identity.end(), size_t{0});
  EXPECT_EQ(sorted, identity);
  EXPECT_EQ(EpochSampler::epoch_order(1000, 7, 3, false), identity);
}

TEST(EpochSampler, BatchesCoverTheEpochInOrder) {
  const auto batches = drain(EpochSampler({10, 4, 1, 0, true, false, 0}));
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].size(), 2u);
  std::vector<size_t> flat;
  for (const auto& b : batches) flat.insert(flat.end(), b.begin(), b.end());
  EXPECT_EQ(flat, EpochSampler::epoch_order(10, 1, 0, true));
  EXPECT_EQ(EpochSampler({10, 4, 1, 0, true, false, 0}).batches_per_epoch(), 3u);
}

TEST(EpochSampler, DropLastSkipsThePartialBatch) {
  EpochSampler sampler({10, 4, 1, 0, true, true, 0});
  EXPECT_EQ(sampler.batches_per_epoch(), 2u);
  EXPECT_EQ(drain(sampler).size(), 2u);
}

TEST(EpochSampler, StartBatchResumesMidEpoch) {
  const auto full = drain(EpochSampler({50, 8, 5, 2, true, false, 0}));
  const auto tail = drain(EpochSampler({50, 8, 5, 2, true, false, 3}));
  ASSERT_EQ(tail.size(), full.size() - 3);
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail[i], full[i + 3]);
}

// Data-parallel ranks each take a contiguous share of every global batch; in rank order the shares are the
// single-process batches, the partial last one included (13 = 5 + 4 + 4 over 3 ranks).
TEST(EpochSampler, RankSharesMakeUpTheGlobalBatches) {
  EXPECT_EQ(batch_share(13, 0, 3).first, 0u);
  EXPECT_EQ(batch_share(13, 0, 3).count, 5u);
  EXPECT_EQ(batch_share(13, 1, 3).first, 5u);
  EXPECT_EQ(batch_share(13, 2, 3).first, 9u);
  EXPECT_EQ(batch_share(13, 2, 3).count, 4u);
  const auto global = drain(EpochSampler({61, 16, 9, 4, true, false, 1}));
  std::vector<std::vector<std::vector<size_t>>> ranks;
  for (size_t r = 0; r < 3; ++r) {
    SamplerOptions o{61, 16, 9, 4, true, false, 1};
    o.rank = r;
    o.world = 3;
    ranks.push_back(drain(EpochSampler(o)));
    ASSERT_EQ(ranks.back().size(), global.size());
  }
  for (size_t b = 0; b < global.size(); ++b) {
    std::vector<size_t> joined;
    for (const auto& r : ranks) joined.insert(joined.end(), r[b].begin(), r[b].end());
    EXPECT_EQ(joined, global[b]) << b;
  }
  EXPECT_EQ(ranks[2].back().size(), 4u);  // the last batch holds 13: 5, 4, 4
}

TEST(EpochSampler, ResetReturnsToTheStart) {
  EpochSampler sampler({20, 5, 1, 0, true, false, 1});
  const auto first = sampler.next(0);
  sampler.next(0);
  sampler.reset();
  EXPECT_EQ(sampler.next(0), first);
}

TEST(Loader, SameBatchesWhateverTheWorkerCount) {
  auto source = std::make_shared<SyntheticSource>(37, ImageShape{6, 5, 1}, 4, 11);
  auto collect = [&](size_t workers) {
    std::vector<torch::Tensor> images, labels;
    auto loader = make_loader(BatchDataset(source, false), EpochSampler({37, 8, 3, 1, true, false, 0}), 8, workers);
    for (ImageBatch& b : *loader) {
      images.push_back(b.images);
      labels.push_back(b.labels);
    }
    return std::make_pair(torch::cat(images), torch::cat(labels));
  };
  const auto serial = collect(0);
  const auto threaded = collect(3);
  EXPECT_EQ(serial.first.size(0), 37);
  EXPECT_TRUE(torch::equal(serial.first, threaded.first));
  EXPECT_TRUE(torch::equal(serial.second, threaded.second));
}

}  // namespace
}  // namespace trainer
