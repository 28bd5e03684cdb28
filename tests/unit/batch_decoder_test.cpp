// data.decode: which files the GPU takes, where a run decodes, and the deferred path (JPEGs left encoded by the
// workers, finished by a batch decoder) against the CPU path. The CPU decoder stands in for nvJPEG here; the
// cuda tests compare nvJPEG itself.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "support/fixtures.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/device/decode_choice.hpp"
#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/util/error.hpp"

#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace trainer {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

std::vector<uint8_t> encoded(const cv::Mat& image, const std::string& ext, std::vector<int> params = {}) {
  std::vector<uint8_t> bytes;
  cv::imencode(ext, image, bytes, params);
  return bytes;
}

// The byte offset of the first frame header's first component sampling byte (SOF0: FF C0 len(2) P(1) Y(2) X(2)
// Nf(1) then C H/V Tq per component).
size_t luma_sampling_offset(const std::vector<uint8_t>& jpeg) {
  for (size_t i = 2; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) return i + 11;
  return 0;
}

TEST(ImageDecode, TheProbeTellsWhichFilesTheGpuDecodes) {
  const cv::Mat colour = testing::class_image(1, 40, 32, 0);
  cv::Mat grey;
  cv::cvtColor(colour, grey, cv::COLOR_BGR2GRAY);
  const auto baseline = encoded(colour, ".jpg");
  const ImageInfo info = probe_image(baseline);
  EXPECT_EQ(info.components, 3);
  EXPECT_TRUE(info.sequential_huffman);
  EXPECT_TRUE(info.common_sampling);
  EXPECT_TRUE(gpu_decodable(info));
  EXPECT_TRUE(gpu_decodable(probe_image(encoded(grey, ".jpg"))));
  const ImageInfo progressive = probe_image(encoded(colour, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}));
  EXPECT_FALSE(progressive.sequential_huffman);
  EXPECT_FALSE(gpu_decodable(progressive));
  EXPECT_FALSE(gpu_decodable(probe_image(encoded(colour, ".png"))));
  // 4:1:1 chroma (luma sampled 4x1): the hardware decoder does not take it.
  auto four_one_one = baseline;
  const size_t at = luma_sampling_offset(four_one_one);
  ASSERT_GT(at, 0u);
  four_one_one[at] = 0x41;
  EXPECT_FALSE(gpu_decodable(probe_image(four_one_one)));
  // A file cut short never goes to the GPU.
  EXPECT_FALSE(gpu_decodable(probe_image(std::vector<uint8_t>(baseline.begin(), baseline.end() - 2))));
}

Config decode_config(const std::string& decode, const std::string& extra = "") {
  auto j = nlohmann::json::parse(R"({"data": {"kind": "imagenet", "root": "/data"}, "model": {"in_channels": 3}})");
  j["data"]["decode"] = decode;
  if (!extra.empty()) apply_override(j, extra);
  return resolve_config(j);
}

TEST(DecodeChoice, WhereTheJpegsAreDecodedAndWhy) {
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
  EXPECT_FALSE(choose_decode(decode_config("cpu"), cuda, true).gpu());
  const DecodeChoice on_cpu = choose_decode(decode_config("auto"), cpu, true);
  EXPECT_FALSE(on_cpu.gpu());
  EXPECT_EQ(on_cpu.reason, "cpu (data.decode auto: the run is on the CPU)");
  EXPECT_EQ(choose_decode(decode_config("auto"), cuda, false).reason,
            "cpu (data.decode auto: this build has no nvJPEG)");
  const DecodeChoice gpu = choose_decode(decode_config("auto"), cuda, true);
  EXPECT_TRUE(gpu.gpu());
  EXPECT_EQ(gpu.reason, "cuda (data.decode auto: nvJPEG on cuda:0)");
  EXPECT_TRUE(choose_decode(decode_config("cuda"), cuda, true).gpu());
  // A pixel policy works on the CPU's Pillow-exact pixels: the run decodes there, for cuda as well.
  const DecodeChoice policy =
      choose_decode(decode_config("cuda", "data.augment.auto_augment=trivialaugment_wide"), cuda, true);
  EXPECT_FALSE(policy.gpu());
  EXPECT_NE(policy.reason.find("AutoAugment policy or ColorJitter"), std::string::npos) << policy.reason;
  EXPECT_FALSE(choose_decode(decode_config("auto", "data.augment.color_jitter.brightness=0.4"), cuda, true).gpu());
  // Random erasing runs on the device: no reason to leave the GPU.
  EXPECT_TRUE(choose_decode(decode_config("auto", "data.augment.random_erasing.prob=0.25"), cuda, true).gpu());
}

TEST(DecodeChoice, CudaWithoutNvjpegOrWithoutADeviceIsAConfigError) {
  EXPECT_EQ(testing::error_of<ConfigError>([] { choose_decode(decode_config("cuda"), torch::kCUDA, false); }),
            "config: data.decode cuda: this trainer was built without nvJPEG (nvjpeg.h was not found when it was "
            "built; Debian: nvidia-cuda-dev with the CUDA LibTorch); use auto or cpu");
  EXPECT_EQ(testing::error_of<ConfigError>([] { choose_decode(decode_config("cuda"), torch::kCPU, true); }),
            "config: data.decode cuda: the run is on cpu, and nvJPEG decodes on a CUDA device; use auto or cpu");
  EXPECT_EQ(
      testing::error_of<ConfigError>([] {
        resolve_config(nlohmann::json::parse(R"({"data": {"kind": "mnist", "root": "/data", "decode": "cuda"}})"));
      }),
      "config: data.decode: \"cuda\" decodes image files; data.kind mnist has none (use auto or cpu)");
  if (!nvjpeg_built()) {
    EXPECT_NE(testing::error_of<UsageError>([] { make_batch_decoder(DecodeDevice::cuda, torch::kCUDA); }), "no error");
  }
}

DataConfig decode_folder_config(const fs::path& root) {
  DataConfig d;
  d.kind = DataKind::imagenet;
  d.root = root.string();
  d.batch_size = 5;
  d.augment.image_size = 16;
  d.augment.eval_resize = 18;
  return d;
}

// Every batch of a loader, with deferred slots finished by `decoder` in the decode stage (null: the plain CPU
// path).
std::vector<ImageBatch> all_batches(Loader& loader, BatchDecoder* decoder) {
  std::vector<ImageBatch> out;
  for_each_device_batch(loader, torch::kCPU, StageDecode{decoder, {}}, [&](ImageBatch& b) {
    out.push_back(b);
    return true;
  });
  return out;
}

// The CPU decoder, watched: which threads ask takes() and call decode(), and how many slots were left encoded.
// `refuse` (may be empty) turns files away in the workers; decode() throws DataError on call `fail_at` (1-based).
class SpyDecoder final : public BatchDecoder {
 public:
  explicit SpyDecoder(std::function<bool(const EncodedImage&)> refuse = nullptr, int fail_at = 0)
      : refuse_(std::move(refuse)), fail_at_(fail_at) {}
  bool takes(EncodedImage& e) const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    takes_threads_.insert(std::this_thread::get_id());
    if (refuse_ && refuse_(e)) {
      ++refused_;
      return false;
    }
    return true;
  }
  void decode(ImageBatch& batch, const BadSlots& bad) override {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      decode_threads_.insert(std::this_thread::get_id());
      for (const auto& e : batch.encoded) deferred_ += e.deferred();
      if (++calls_ == fail_at_) throw DataError("the decoder failed on call " + std::to_string(calls_));
    }
    inner_->decode(batch, bad);
    cpu_ += inner_->take_counts().cpu;
  }
  std::string describe() const override { return "spy"; }
  std::set<std::thread::id> decode_threads() const { return decode_threads_; }
  std::set<std::thread::id> takes_threads() const { return takes_threads_; }
  size_t deferred() const { return deferred_; }

 private:
  std::unique_ptr<BatchDecoder> inner_ = make_batch_decoder(DecodeDevice::cpu, torch::kCPU);
  std::function<bool(const EncodedImage&)> refuse_;
  int fail_at_ = 0;
  mutable std::mutex mutex_;
  mutable std::set<std::thread::id> decode_threads_, takes_threads_;
  size_t deferred_ = 0;
  int calls_ = 0;
};

// The workers read and plan each JPEG but leave it encoded; the CPU decoder then renders exactly the pixels the
// plain CPU path does (same crops, flips, replacements), with PNG and progressive files decoded by the workers
// in the same batches.
TEST(BatchDecoder, DeferredBatchesEqualTheCpuPathBitForBit) {
  TempDir dir;
  testing::write_image_folder(dir.path(), {3, 6, 3, true});
  cv::imwrite((dir / "train/n1/progressive.JPEG").string(), testing::class_image(1, 52, 44, 9),
              {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  DataConfig data = decode_folder_config(dir.path());
  data.workers = 2;
  for (const bool train : {true, false}) {
    const auto decoder = std::make_shared<SpyDecoder>();
    const auto source = open_image_folder(data, train, 3, 3);
    std::unique_ptr<Loader> plain, deferred;
    if (train) {
      TrainLoaderOptions o;
      o.seed = 3;
      o.epochs = 2;
      plain = make_train_loader(source, data, o);
      o.intake = decoder;
      deferred = make_train_loader(source, data, o);
    } else {
      plain = make_eval_loader(source, 4, 2, 2, false, nullptr);
      deferred = make_eval_loader(source, 4, 2, 2, false, nullptr, decoder);
    }
    const auto a = all_batches(*plain, nullptr), b = all_batches(*deferred, decoder.get());
    const size_t left_encoded = decoder->deferred();
    ASSERT_EQ(a.size(), b.size());
    // The decode stage's thread decoded every batch; the support checks ran in the loader's workers; neither
    // on this (the training) thread.
    EXPECT_EQ(decoder->decode_threads().size(), 1u);
    EXPECT_EQ(decoder->decode_threads().count(std::this_thread::get_id()), 0u);
    EXPECT_FALSE(decoder->takes_threads().empty());
    EXPECT_EQ(decoder->takes_threads().count(std::this_thread::get_id()), 0u);
    EXPECT_EQ(decoder->take_counts().cpu, static_cast<int64_t>(left_encoded));
    // JPEGs were left for the decoder; PNGs (half the training images) and the progressive file were not.
    EXPECT_GT(left_encoded, 0u) << train;
    if (train) {
      EXPECT_LT(left_encoded, 2 * source->size());
    }
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(torch::equal(a[i].images, b[i].images)) << (train ? "train" : "eval") << " batch " << i;
      EXPECT_TRUE(torch::equal(a[i].labels, b[i].labels)) << i;
      EXPECT_TRUE(b[i].encoded.empty());
    }
  }
}

// The deferred JPEGs of a split, each with its full-size RGB decode and the CPU path's Pillow-exact render:
// what the GPU path's geometry is checked against here, on the CPU.
struct DeferredSplit {
  ImageBatch batch;                    // images: the CPU path's renders; encoded: the deferred files
  std::vector<DecodedRegion> regions;  // their whole images, decoded full size
};

DeferredSplit deferred_split(const DataConfig& data, bool train) {
  const auto source = open_image_folder(data, train, 2, 3);
  DeferredSplit out;
  std::vector<torch::Tensor> renders;
  for (size_t i = 0; i < source->size(); ++i) {
    cv::Mat cpu(16, 16, CV_8UC3), unused(16, 16, CV_8UC3);
    EncodedImage e;
    if (!source->read_or_defer(i, {7, 1}, unused, e)) continue;  // a PNG: decoded by the worker
    source->read_into(i, {7, 1}, cpu);
    cv::Mat bgr = decode_image(e.bytes, e.info, 3, 1, e.name), rgb;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    out.regions.push_back(
        {torch::from_blob(rgb.data, {rgb.rows, rgb.cols, 3}, torch::kUInt8).clone(), 0, 0, out.batch.encoded.size()});
    out.batch.encoded.push_back(std::move(e));
    renders.push_back(torch::from_blob(cpu.data, {16, 16, 3}, torch::kUInt8).clone());
  }
  out.batch.images = torch::stack(renders);
  return out;
}

// The GPU path's geometry (render_decoded_all: antialiased resize as torchvision's tensor transforms), run here on
// the CPU from a full-size decode, against the CPU path's Pillow-exact render of the same plans.
TEST(BatchDecoder, TheGpuGeometryIsCloseToThePillowExactPath) {
  TempDir dir;
  testing::write_image_folder(dir.path(), {2, 4, 2, true});
  DataConfig data = decode_folder_config(dir.path());
  data.decode_reduce = DecodeReduce::off;
  double worst_mean = 0, worst_max = 0;
  for (const bool train : {true, false}) {
    DeferredSplit split = deferred_split(data, train);
    const auto pillow = split.batch.images.clone();
    render_decoded_all(split.regions, split.batch);
    const auto diff = (split.batch.images.to(torch::kInt) - pillow.to(torch::kInt)).abs().to(torch::kDouble);
    for (int64_t i = 0; i < diff.size(0); ++i) {
      worst_mean = std::max(worst_mean, diff[i].mean().item<double>());
      worst_max = std::max(worst_max, diff[i].max().item<double>());
    }
  }
  // Measured: mean 0.207, max 1 (rounding of the two antialiased resizes).
  EXPECT_LT(worst_mean, 0.5);
  EXPECT_LE(worst_max, 2);
  std::printf("GPU geometry vs Pillow-exact CPU render: worst mean |diff| %.3f, worst max %.0f (of 255)\n", worst_mean,
              worst_max);
}

// Crops of one size are resized in one call: the bytes are those of one call per image (the evaluation images of
// the fixture share their sizes across classes, so groups of several form).
TEST(BatchDecoder, RenderingCropsTogetherGivesTheBytesOfRenderingEachAlone) {
  TempDir dir;
  testing::write_image_folder(dir.path(), {2, 8, 4, true});
  DataConfig data = decode_folder_config(dir.path());
  data.decode_reduce = DecodeReduce::off;
  for (const bool train : {true, false}) {
    DeferredSplit together = deferred_split(data, train), alone = deferred_split(data, train);
    ASSERT_GT(together.regions.size(), 3u);
    render_decoded_all(together.regions, together.batch);
    for (const DecodedRegion& r : alone.regions) render_decoded_all({r}, alone.batch);
    EXPECT_TRUE(torch::equal(together.batch.images, alone.batch.images)) << (train ? "train" : "eval");
  }
}

// A deferred file that no decoder can read: recorded; in training its slot takes the next slot's image and label
// (the batch stays full), in evaluation it is dropped; a batch with nothing decoded is an error.
// An image nvJPEG reports decoded but leaves unwritten is still the call's zero fill: found by sampling each region,
// every byte of a region smaller than the sample count, so that a region dark but for its last byte is not blank.
TEST(BatchDecoder, BlankRegionsAreTheOnesLeftAtTheZeroFill) {
  torch::manual_seed(4);
  const std::vector<int64_t> offsets{0, 30000, 30010}, lengths{30000, 10, 5000};
  auto pixels = torch::randint(1, 256, {35010}, torch::kUInt8);
  EXPECT_TRUE(blank_regions(pixels, offsets, lengths).empty());
  pixels.narrow(0, 0, 30000).zero_();
  EXPECT_EQ(blank_regions(pixels, offsets, lengths), std::vector<size_t>{0});
  pixels.narrow(0, 30000, 9).zero_();  // the second region's last byte still written
  EXPECT_EQ(blank_regions(pixels, offsets, lengths), std::vector<size_t>{0});
  pixels.narrow(0, 30009, 5001).zero_();
  EXPECT_EQ(blank_regions(pixels, offsets, lengths), (std::vector<size_t>{0, 1, 2}));
  EXPECT_TRUE(blank_regions(pixels, {}, {}).empty());
}

TEST(BatchDecoder, UndecodableSlotsAreRecordedThenReplacedOrDropped) {
  for (const bool drop : {false, true}) {
    ImageBatch batch{torch::arange(3 * 2 * 2 * 3, torch::kInt64).to(torch::kUInt8).view({3, 2, 2, 3}),
                     torch::tensor({4, 5, 6}, torch::kInt64),
                     {}};
    batch.encoded.resize(3);
    batch.encoded[1].index = 17;
    const BadSlots bad{std::make_shared<BadSamples>("train", 100, 1.0, nullptr),
                       drop ? BadSlot::drop : BadSlot::replace};
    const auto before = batch.images.clone();
    settle_failed_slots(batch, {{1, "b.JPEG: bad Huffman table"}}, bad);
    EXPECT_EQ(bad.record->distinct(), 1u);
    if (drop) {
      EXPECT_EQ(batch.images[1].sum().item<int64_t>(), 0);
      EXPECT_EQ(batch.labels[1].item<int64_t>(), kDroppedLabel);
    } else {
      EXPECT_TRUE(torch::equal(batch.images[1], before[2]));
      EXPECT_EQ(batch.labels[1].item<int64_t>(), 6);
    }
    EXPECT_TRUE(torch::equal(batch.images[0], before[0]));
  }
  ImageBatch one{torch::zeros({1, 2, 2, 3}, torch::kUInt8), torch::tensor({4}, torch::kInt64), {}};
  one.encoded.resize(1);
  const BadSlots bad{std::make_shared<BadSamples>("train", 100, 1.0, nullptr), BadSlot::replace};
  EXPECT_EQ(testing::error_of<DataError>([&] {
              settle_failed_slots(one, {{0, "a.JPEG: bad"}}, bad);
            }),
            "data: no image of a batch of 1 could be decoded; the last: a.JPEG: bad");
  // Without a bad-sample record the file's error ends the loop.
  EXPECT_EQ(testing::error_of<DataError>([&] {
              settle_failed_slots(one, {{0, "a.JPEG: bad"}}, BadSlots{});
            }),
            "data: a.JPEG: bad");
}

// A folder of 3 classes (6 training images each, half of them PNGs) and its training split.
struct TrainFolder {
  TempDir dir;
  DataConfig data;
  std::shared_ptr<const FolderSource> source;
  TrainFolder() : data(decode_folder_config(dir.path())) {
    testing::write_image_folder(dir.path(), {3, 6, 3, true});
    source = open_image_folder(data, true, 3, 3);
  }
};

// A training loader over `source` (seed 5) whose JPEGs `decoder` takes (null: the workers decode them all).
std::unique_ptr<Loader> spied_loader(const std::shared_ptr<const ImageSource>& source, const DataConfig& data,
                                     std::shared_ptr<SpyDecoder> decoder, int64_t epochs = 1) {
  TrainLoaderOptions o;
  o.seed = 5;
  o.epochs = epochs;
  o.intake = std::move(decoder);
  return make_train_loader(source, data, o);
}

// A file the decoder refuses in the worker (nvJPEG's support check says no, or the region is too large) is
// decoded there, exactly as the CPU path: the batches equal the plain ones, only the others reach the stage, and
// the refusals are counted.
TEST(BatchDecoder, FilesTheDecoderRefusesAreDecodedByTheWorkers) {
  TrainFolder f;
  f.data.workers = 2;
  auto all = std::make_shared<SpyDecoder>();
  auto some = std::make_shared<SpyDecoder>([](const EncodedImage& e) { return e.index % 2 == 0; });
  std::vector<ImageBatch> batches[3];
  int k = 0;
  for (const std::shared_ptr<SpyDecoder>& decoder : {std::shared_ptr<SpyDecoder>(), all, some})
    batches[k++] = all_batches(*spied_loader(f.source, f.data, decoder), decoder.get());
  ASSERT_EQ(batches[0].size(), batches[2].size());
  for (size_t i = 0; i < batches[0].size(); ++i)
    EXPECT_TRUE(torch::equal(batches[0][i].images, batches[2][i].images)) << i;
  const DecodeCounts counted = some->take_counts();
  EXPECT_GT(counted.refused, 0);
  EXPECT_EQ(static_cast<size_t>(counted.refused) + some->deferred(), all->deferred());
  EXPECT_EQ(counted.cpu, static_cast<int64_t>(some->deferred()));
  EXPECT_EQ(some->take_counts().total(), 0);  // taking the counts restarts them
}

// The stage stops when the consumer does (no hang, the batches made ahead dropped), and an error of the stage
// reaches the consumer after the batches made before it.
TEST(DecodeStage, StopsWithTheConsumerAndReportsItsErrorInOrder) {
  TrainFolder f;
  f.data.batch_size = 2;
  auto decoder = std::make_shared<SpyDecoder>();
  auto loader = spied_loader(f.source, f.data, decoder, kEndless);
  int taken = 0;
  for_each_device_batch(*loader, torch::kCPU, StageDecode{decoder.get(), {}, /*ahead=*/2},
                        [&](ImageBatch&) { return ++taken < 3; });
  EXPECT_EQ(taken, 3);
  auto failing = std::make_shared<SpyDecoder>(nullptr, /*fail_at=*/4);
  loader = spied_loader(f.source, f.data, failing, kEndless);
  taken = 0;
  EXPECT_EQ(testing::error_of<DataError>([&] {
              for_each_device_batch(*loader, torch::kCPU, StageDecode{failing.get(), {}}, [&](ImageBatch&) {
                ++taken;
                return true;
              });
            }),
            "data: the decoder failed on call 4");
  EXPECT_EQ(taken, 3);
}

}  // namespace
}  // namespace trainer
