#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <numeric>
#include <set>

#include "trainer/data/device/model_input.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/batch_pipeline.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/sources/subset.hpp"
#include "trainer/data/sources/synthetic.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

TEST(BatchDataset, WritesSamplesIntoOneUint8NhwcTensor) {
  auto source = std::make_shared<SyntheticSource>(10, ImageShape{4, 3, 3}, 5, 2);
  BatchDataset dataset(source, false);
  const ImageBatch batch = dataset.get_batch({7, 2});
  EXPECT_EQ(batch.images.sizes(), (std::vector<int64_t>{2, 4, 3, 3}));
  EXPECT_EQ(batch.images.dtype(), torch::kUInt8);
  EXPECT_EQ(batch.labels.dtype(), torch::kInt64);
  const Sample s = source->read(2);
  EXPECT_EQ(0, std::memcmp(batch.images[1].data_ptr<uint8_t>(), s.image.data, 4 * 3 * 3));
  EXPECT_EQ(batch.labels[0].item<int64_t>(), source->label(7));
}

// A batch that cannot be allocated (pinned memory refused, memory short) reaches the run as a DataError from
// next(), in its place in the order, whichever thread allocated it; from a worker thread it ended the process.
TEST(BatchPipeline, AFailedBatchAllocationIsADataErrorNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "an address-space limit does not mix with AddressSanitizer's shadow memory";
#else
  auto source = std::make_shared<SyntheticSource>(64, ImageShape{4096, 4096, 3}, 2, 1);  // 48 MiB an image
  auto dataset = std::make_shared<const BatchDataset>(source, false);
  std::vector<size_t> indices(64);
  std::iota(indices.begin(), indices.end(), size_t{0});
  // The address space this process has now plus 1 GiB: the 3 GiB batch cannot be had.
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  rlimit limit = saved;
  limit.rlim_cur = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) + (size_t{1} << 30);
  for (const size_t workers : {size_t{0}, size_t{2}}) {
    std::string message;
    ASSERT_EQ(::setrlimit(RLIMIT_AS, &limit), 0);
    try {
      int plans = 0;
      BatchPipeline pipeline(
          [&]() -> std::optional<BatchPlan> {
            if (plans++ > 0) return std::nullopt;
            return BatchPlan{dataset, indices};
          },
          workers, /*in_flight=*/2);
      pipeline.next();
    } catch (const DataError& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_AS, &saved);
    EXPECT_EQ(message.rfind("data: cannot allocate a batch of 64 images (", 0), 0u)
        << workers << " workers: " << message;
  }
#endif
}

TEST(BatchDataset, SyntheticSamplesAreDeterministic) {
  SyntheticSource a(10, ImageShape{4, 4, 1}, 3, 9), b(10, ImageShape{4, 4, 1}, 3, 9), c(10, ImageShape{4, 4, 1}, 3, 8);
  EXPECT_EQ(0, std::memcmp(a.read(5).image.data, b.read(5).image.data, 16));
  EXPECT_NE(0, std::memcmp(a.read(5).image.data, c.read(5).image.data, 16));
}

TEST(Normalization, HappensOnTheDeviceSideAsFloatNchw) {
  auto images = torch::tensor({0, 255, 51, 102, 0, 255}, torch::kUInt8).view({1, 1, 2, 3});  // N=1, H=1, W=2, C=3
  const auto norm = make_normalization({0.5}, {0.25, 0.5, 1.0}, 3, torch::kCPU);
  const auto x = to_model_input(images, norm, false);
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{1, 3, 1, 2}));
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.strides(), (std::vector<int64_t>{6, 2, 2, 1}));
  // channel 0 holds pixels 0 and 102: (0/255 - 0.5) / 0.25 = -2, (0.4 - 0.5) / 0.25 = -0.4
  EXPECT_NEAR(x[0][0][0][0].item<float>(), -2.0f, 1e-6);
  EXPECT_NEAR(x[0][0][0][1].item<float>(), -0.4f, 1e-6);
  EXPECT_NEAR(x[0][1][0][0].item<float>(), 1.0f, 1e-6);  // (1 - 0.5) / 0.5
  EXPECT_NEAR(x[0][2][0][1].item<float>(), 0.5f, 1e-6);  // (1 - 0.5) / 1
  const auto cl = to_model_input(images, norm, true);
  EXPECT_TRUE(cl.is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(torch::equal(cl, x));
}

TEST(Normalization, TheOnePassCpuPathGivesTheTensorOpsBits) {
  torch::manual_seed(5);
  for (int64_t channels : {1, 3}) {
    const auto images = torch::randint(0, 256, {3, 9, 11, channels}, torch::kUInt8);  // blocks and a tail
    const auto norm = make_normalization({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}, channels, torch::kCPU);
    const auto reference = (images.permute({0, 3, 1, 2}).to(torch::kFloat) - norm.mean) * norm.inv_std;
    for (bool channels_last : {false, true}) {
      const auto x = to_model_input(images, norm, channels_last);
      EXPECT_TRUE(x.is_contiguous(channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous));
      EXPECT_TRUE(torch::equal(x, reference)) << channels << " channels, channels_last " << channels_last;
    }
  }
}

// A CPU step's float input is written into the last one's memory once nothing holds that any more, also for a
// smaller batch, in either layout, with the bits of a fresh one; while it is held, a new block is taken.
TEST(Normalization, TheFloatInputIsWrittenAgainOnceLetGo) {
  torch::manual_seed(6);
  const auto images = torch::randint(0, 256, {4, 6, 5, 3}, torch::kUInt8);
  const auto norm = make_normalization({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}, 3, torch::kCPU);
  for (const bool channels_last : {false, true}) {
    const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
    torch::Tensor reuse;
    auto held = to_model_input(images, norm, channels_last, &reuse);
    const void* first = held.data_ptr();
    auto second = to_model_input(images, norm, channels_last, &reuse);
    EXPECT_NE(second.data_ptr(), first) << "the first is still held";
    const void* block = second.data_ptr();
    held = torch::Tensor();
    second = torch::Tensor();
    const auto again = to_model_input(images, norm, channels_last, &reuse);
    EXPECT_EQ(again.data_ptr(), block);
    EXPECT_TRUE(again.is_contiguous(format));
    EXPECT_TRUE(torch::equal(again, to_model_input(images, norm, channels_last)));
  }
  torch::Tensor reuse;
  (void)to_model_input(images, norm, true, &reuse);
  const void* block = reuse.data_ptr();
  const auto smaller = to_model_input(images.narrow(0, 0, 2).contiguous(), norm, true, &reuse);
  EXPECT_EQ(smaller.data_ptr(), block) << "a smaller batch fits in the same memory";
  EXPECT_EQ(smaller.sizes(), (std::vector<int64_t>{2, 3, 6, 5}));
  EXPECT_TRUE(smaller.is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(torch::equal(smaller, to_model_input(images.narrow(0, 0, 2).contiguous(), norm, true)));
}

// Plans of the given sizes over a 30-image synthetic source of 6x5x3 images, one after the other.
PlanSource plans_of_sizes(std::vector<size_t> sizes) {
  auto source = std::make_shared<SyntheticSource>(30, ImageShape{6, 5, 3}, 4, 9);
  auto dataset = std::make_shared<const BatchDataset>(source, false);
  return [dataset, sizes = std::move(sizes), plan = size_t{0}]() mutable -> std::optional<BatchPlan> {
    if (plan == sizes.size()) return std::nullopt;
    std::vector<size_t> indices(sizes[plan]);
    std::iota(indices.begin(), indices.end(), (plan * 3) % 26);
    ++plan;
    return BatchPlan{dataset, indices};
  };
}

// The pipeline writes batches again once their consumer has let them go, a smaller last batch included, and
// never one still held: a few blocks circulate, whatever the number of batches.
TEST(BatchPipeline, BatchesLetGoAreWrittenAgainAndHeldOnesNever) {
  for (const size_t workers : {size_t{0}, size_t{2}}) {
    BatchPipeline pipeline(plans_of_sizes({4, 4, 4, 4, 4, 4, 4, 2}), workers, /*in_flight=*/2);  // the last smaller
    std::set<const void*> blocks;
    std::optional<ImageBatch> kept;
    torch::Tensor kept_copy;
    size_t batches = 0;
    while (auto batch = pipeline.next()) {
      const void* at = batch->images.data_ptr();
      if (batches == 7) {
        EXPECT_TRUE(blocks.count(at)) << "the smaller last batch takes a block seen before";
      }
      blocks.insert(at);
      if (batches == 1) {
        kept = *batch;
        kept_copy = batch->images.clone();
      }
      ++batches;
    }
    EXPECT_EQ(batches, 8u);
    // The two in flight, the one being taken and the one kept; never one per batch.
    EXPECT_LE(blocks.size(), 4u) << workers << " workers";
    EXPECT_TRUE(torch::equal(kept->images, kept_copy)) << "a batch still held is never written";
  }
}

// Epochs whose last batch is smaller, as most are: a smaller batch made while no block was free gets a block a
// full batch can take later, and the blocks stay as few as the batches in flight, whatever the mix of sizes.
TEST(BatchPipeline, SmallerLastBatchesKeepTheBlocksFew) {
  std::vector<size_t> sizes;
  for (int epoch = 0; epoch < 30; ++epoch) sizes.insert(sizes.end(), {4, 1});  // a full batch and a smaller one
  for (const size_t workers : {size_t{0}, size_t{2}}) {
    BatchPipeline pipeline(plans_of_sizes(sizes), workers, /*in_flight=*/4);
    std::set<const void*> blocks;
    size_t batches = 0;
    while (auto batch = pipeline.next()) {
      blocks.insert(batch->images.storage().data());
      EXPECT_EQ(batch->images.size(0), batches % 2 == 1 ? 1 : 4);
      // Every block, a smaller batch's included, has room for a full batch once one has been planned.
      EXPECT_GE(batch->images.storage().nbytes(), 4u * 6 * 5 * 3) << "batch " << batches;
      ++batches;
    }
    EXPECT_EQ(batches, 60u);
    // The four in flight and the one being taken: never one per batch, nor a slow leak of them.
    EXPECT_LE(blocks.size(), 6u) << workers << " workers";
  }
}

TEST(Subset, IsEvenlySpacedAndDeterministic) {
  auto source = std::make_shared<SyntheticSource>(100, ImageShape{2, 2, 1}, 10, 1);
  const auto subset = make_subset(source, 10);
  ASSERT_EQ(subset->size(), 10u);
  EXPECT_EQ(subset->label(3), source->label(30));
  EXPECT_EQ(make_subset(source, 0), source);
  EXPECT_EQ(make_subset(source, 500), source);
}

}  // namespace
}  // namespace trainer
