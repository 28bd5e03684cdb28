#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "support/fixtures.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/epoch_sampler.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/sources/synthetic.hpp"
#include "trainer/util/error.hpp"

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
    for_each_batch(*loader, [&](ImageBatch& b) {
      images.push_back(b.images);
      labels.push_back(b.labels);
      return true;
    });
    return std::make_pair(torch::cat(images), torch::cat(labels));
  };
  const auto serial = collect(0);
  const auto threaded = collect(3);
  EXPECT_EQ(serial.first.size(0), 37);
  EXPECT_TRUE(torch::equal(serial.first, threaded.first));
  EXPECT_TRUE(torch::equal(serial.second, threaded.second));
}

// One loader through several epochs gives, batch for batch, what one loader per epoch gives (the next epoch's
// batches are made while this one drains, from their own order and augmentation draws), with any worker count,
// and from a resumed position; a loader stopped early keeps the batches it has not handed out.
TEST(Loader, OneLoaderAcrossEpochsGivesEachEpochsBatches) {
  auto source = std::make_shared<SyntheticSource>(29, ImageShape{6, 5, 3}, 4, 3);
  DataConfig d;
  d.batch_size = 6;
  d.augment.hflip = 0.5;
  d.augment.color_jitter.brightness = 0.4;  // a per-sample draw that depends on the epoch
  auto concat = [](Loader& loader, size_t count = std::numeric_limits<size_t>::max()) {
    std::vector<torch::Tensor> images, labels;
    for_each_batch(loader, count, [&](ImageBatch& b) {
      images.push_back(b.images);
      labels.push_back(b.labels);
      return true;
    });
    return std::make_pair(torch::cat(images), torch::cat(labels));
  };
  TrainLoaderOptions o;
  o.seed = 17;
  std::vector<torch::Tensor> per_epoch_images, per_epoch_labels;
  for (int64_t epoch = 1; epoch <= 3; ++epoch) {
    d.workers = 0;
    o.epoch = epoch;
    o.start_batch = epoch == 1 ? 2 : 0;
    const auto [images, labels] = concat(*make_train_loader(source, d, o));
    per_epoch_images.push_back(images);
    per_epoch_labels.push_back(labels);
  }
  const auto expected_images = torch::cat(per_epoch_images), expected_labels = torch::cat(per_epoch_labels);
  EXPECT_EQ(expected_images.size(0), 29 - 12 + 29 + 29);
  for (int64_t workers : {0, 1, 3}) {
    d.workers = workers;
    d.prefetch = 2;
    o.epoch = 1;
    o.start_batch = 2;
    o.epochs = 3;
    auto loader = make_train_loader(source, d, o);
    // Epoch by epoch, as fit takes them: 3 batches are left of epoch 1, then 5 per epoch.
    const auto first = concat(*loader, 3);
    const auto rest = concat(*loader);
    EXPECT_TRUE(torch::equal(torch::cat({first.first, rest.first}), expected_images)) << workers << " workers";
    EXPECT_TRUE(torch::equal(torch::cat({first.second, rest.second}), expected_labels)) << workers << " workers";
  }
}

// Loaders made and dropped in quick succession, some before their first batch, some after: every one that is read
// gives the serial batches (workers start while others are still being started; a dropped loader stops its
// workers mid-batch).
TEST(Loader, ManyShortLivedLoadersAgreeWithTheSerialOne) {
  auto source = std::make_shared<SyntheticSource>(50, ImageShape{5, 4, 1}, 3, 2);
  auto all = [&](size_t workers, size_t take) {
    auto loader = make_loader(BatchDataset(source, false), EpochSampler({50, 7, 1, 0, true, false, 0}), 7, workers, 2);
    std::vector<torch::Tensor> images;
    for_each_batch(*loader, take, [&](ImageBatch& b) {
      images.push_back(b.images);
      return true;
    });
    return images.empty() ? torch::Tensor() : torch::cat(images);
  };
  const torch::Tensor serial = all(0, 8);
  for (int round = 0; round < 100; ++round) {
    const size_t workers = 1 + static_cast<size_t>(round % 4);
    all(workers, 0);  // dropped before its first batch
    all(workers, 1);  // dropped with batches in the making
    ASSERT_TRUE(torch::equal(all(workers, 8), serial)) << "round " << round << ", " << workers << " workers";
  }
}

// An unreadable sample without a bad-sample record stops the run with its own error, in the batch it belongs to;
// a loader dropped with batches still in the making stops its workers.
TEST(Loader, ASampleErrorReachesTheCallerAndAnAbandonedLoaderStops) {
  struct Failing final : ImageSource {
    size_t size() const override { return 20; }
    int64_t label(size_t) const override { return 0; }
    ImageShape shape() const override { return {4, 4, 1}; }
    const std::vector<std::string>& class_names() const override { return names; }
    std::string describe() const override { return "failing"; }
    void read_into(size_t i, const ReadContext&, cv::Mat& out) const override {
      if (i == 13) throw DataError("image 13 is broken");
      out.setTo(cv::Scalar::all(static_cast<double>(i)));
    }
    std::vector<std::string> names{"a", "b"};
  };
  auto source = std::make_shared<Failing>();
  for (size_t workers : {0, 2}) {
    auto loader = make_loader(BatchDataset(source, false), EpochSampler({20, 4, 0, 0, false, false, 0}), 4, workers);
    size_t batches = 0;
    EXPECT_EQ(
        testing::error_of<DataError>([&] { for_each_batch(*loader, [&](ImageBatch&) { return ++batches > 0; }); }),
        "data: image 13 is broken");
    EXPECT_EQ(batches, 3u) << workers << " workers: the batches before the one holding image 13";
    auto abandoned = make_loader(BatchDataset(source, false), EpochSampler({20, 4, 0, 0, false, false, 0}), 4, workers);
    EXPECT_TRUE(abandoned->next().has_value());
  }
}

}  // namespace
}  // namespace trainer
