// data.decode cuda on a GPU: nvJPEG's batches against the CPU path, files it does not take in the same batches,
// damaged files, images too large for it, both backends, batches decoded back to back without a host
// synchronisation between them, and repeatability (what exact resume needs). Skipped without a CUDA device or
// without nvJPEG; on the GPU check's machine a skip here is a failure (scripts/gpu/check.sh).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "support/fixtures.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/data/sources/subset.hpp"

namespace trainer {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_NVJPEG()                                              \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"; \
  if (!nvjpeg_built()) GTEST_SKIP() << "this build has no nvJPEG"

const torch::Device kGpu(torch::kCUDA, 0);

DataConfig gpu_folder_config(const fs::path& root) {
  DataConfig d;
  d.kind = DataKind::imagenet;
  d.root = root.string();
  d.batch_size = 6;
  d.workers = 2;
  d.augment.image_size = 32;
  d.augment.eval_resize = 36;
  return d;
}

// Smoothed noise: no period, so a region decoded from the wrong offset (by an MCU, or by 16 pixels) shows.
cv::Mat noise_image(int w, int h, int seed) {
  cv::Mat image(h, w, CV_8UC3);
  cv::RNG rng(static_cast<uint64_t>(seed) + 1);
  rng.fill(image, cv::RNG::UNIFORM, 0, 256);
  cv::GaussianBlur(image, image, cv::Size(5, 5), 1.2);
  return image;
}

// A folder of larger non-periodic JPEGs (plus the fixture's PNGs, which the workers decode, so Initialize is
// called with changing counts) and a progressive JPEG, which the workers decode too.
void write_gpu_folder(const fs::path& root) {
  testing::write_image_folder(root, {3, 8, 3, true});
  for (int i = 0; i < 9; ++i)
    cv::imwrite((root / "train" / ("n" + std::to_string(i % 3)) / ("big" + std::to_string(i) + ".JPEG")).string(),
                noise_image(300 + 17 * i, 220 + 9 * i, i));
  cv::imwrite((root / "train/n2/progressive.JPEG").string(), testing::class_image(2, 120, 90, 3),
              {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
}

// Every batch of a training (or eval) loader over `source`, epochs 0 and 1 from batch `start` on; `decoder` null:
// the CPU path. With `keep_on_gpu` the batches stay on the device and are copied to the CPU only at the end, so
// nothing synchronises the host between batches; otherwise each is copied as it comes.
std::vector<torch::Tensor> images_of(const std::shared_ptr<const ImageSource>& source, const DataConfig& data,
                                     const std::shared_ptr<BatchDecoder>& decoder, bool train = true, size_t start = 0,
                                     std::shared_ptr<BadSamples> bad = nullptr, bool keep_on_gpu = false) {
  std::unique_ptr<Loader> loader;
  if (train) {
    TrainLoaderOptions o;
    o.seed = 11;
    o.epochs = 2;
    o.start_batch = start;
    o.pin_memory = decoder != nullptr;
    o.intake = decoder;
    o.bad = bad;
    loader = make_train_loader(source, data, o);
  } else {
    loader = make_eval_loader(source, static_cast<size_t>(data.batch_size), 2, 2, decoder != nullptr, bad, decoder);
  }
  std::vector<torch::Tensor> out;
  const StageDecode stage{decoder.get(), {bad, train ? BadSlot::replace : BadSlot::drop}};
  for_each_device_batch(*loader, decoder ? kGpu : torch::Device(torch::kCPU), stage, std::numeric_limits<size_t>::max(),
                        [&](ImageBatch& b) {
                          out.push_back(keep_on_gpu ? b.images : b.images.to(torch::kCPU));
                          return true;
                        });
  for (auto& t : out) t = t.to(torch::kCPU);
  return out;
}

// The folder, its training split and an nvJPEG decoder, as each test here starts.
struct GpuFolder {
  testing::TempDir dir;
  DataConfig data;
  std::shared_ptr<const FolderSource> source;
  std::shared_ptr<BatchDecoder> decoder;
  explicit GpuFolder(NvjpegBackend backend = NvjpegBackend::automatic) : data(gpu_folder_config(dir.path())) {
    write_gpu_folder(dir.path());
    source = open_image_folder(data, true, 3, 3);
    decoder = make_batch_decoder(DecodeDevice::cuda, kGpu, nullptr, backend);
  }
};

// Mean and largest |difference| of two lists of uint8 batches.
std::pair<double, double> difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double sum = 0, worst = 0;
  int64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto d = (a[i].to(torch::kInt) - b[i].to(torch::kInt)).abs().to(torch::kDouble);
    sum += d.sum().item<double>();
    count += d.numel();
    worst = std::max(worst, d.max().item<double>());
  }
  return {sum / static_cast<double>(std::max<int64_t>(1, count)), worst};
}

// nvJPEG's IDCT and upsampling and the antialiased resize on the GPU differ from libjpeg + Pillow-exact
// resampling: close, not equal. The figures are printed for the README. Both backends: the one this GPU picks,
// and the hybrid decoder forced.
TEST(CudaDecode, NvjpegBatchesAreCloseToTheCpuPath) {
  REQUIRE_NVJPEG();
  for (const NvjpegBackend backend : {NvjpegBackend::automatic, NvjpegBackend::hybrid}) {
    const GpuFolder f(backend);
    std::printf("decoder: %s\n", f.decoder->describe().c_str());
    for (const bool train : {true, false}) {
      const auto source = train ? f.source : open_image_folder(f.data, false, 3, 3);
      const auto gpu = images_of(source, f.data, f.decoder, train), cpu = images_of(source, f.data, nullptr, train);
      ASSERT_EQ(gpu.size(), cpu.size());
      const auto [mean, worst] = difference(gpu, cpu);
      std::printf("%s, %s: nvJPEG batches vs CPU path: mean |diff| %.3f, max %.0f (of 255)\n",
                  f.decoder->describe().c_str(), train ? "train" : "eval", mean, worst);
      EXPECT_LT(mean, 3.0) << f.decoder->describe() << (train ? " train" : " eval");
    }
    const DecodeCounts n = f.decoder->take_counts();
    EXPECT_GT(n.gpu, 0);
    EXPECT_EQ(n.failed_calls, 0);
  }
}

// Per-image tolerances of nvJPEG + the GPU resize against libjpeg + the Pillow-exact CPU path, of 255: the mean
// bound is the one the batch test above holds; the 99th-percentile bound leaves room for the two IDCTs and chroma
// upsamplers differing on edges, and is a first bound, not yet measured on a GPU.
constexpr double kMostImageMeanDiff = 3.0;
constexpr double kMostImageP99Diff = 32.0;

// Every image of a folder decoded by nvJPEG and by the CPU path, compared one by one: training crops (up to 2,048)
// and the evaluation images, at 224 px. The folder is the GPU check's photo folder when TRAINER_CHECK_PHOTOS names
// one (scripts/gpu/check.sh), else this file's generated folder at 32 px. Prints one JSON line per split (the
// check's gate reads it); fails on an image left all zero or one past the tolerances.
TEST(CudaDecode, EachImageIsCloseToTheCpuPath) {
  REQUIRE_NVJPEG();
  testing::TempDir dir;
  const char* photos = std::getenv("TRAINER_CHECK_PHOTOS");
  DataConfig data = gpu_folder_config(dir.path());
  if (photos) {
    data.root = photos;
    data.batch_size = 64;
    data.workers = static_cast<int64_t>(std::max(2u, std::thread::hardware_concurrency()));
    data.augment.image_size = 224;
    data.augment.eval_resize = 256;
  } else {
    write_gpu_folder(dir.path());
  }
  const std::shared_ptr<BatchDecoder> decoder = make_batch_decoder(DecodeDevice::cuda, kGpu);
  for (const bool train : {true, false}) {
    std::shared_ptr<const ImageSource> source = open_image_folder(data, train, 0, 3);
    if (train) source = make_subset(source, std::min<size_t>(source->size(), 2048));
    const auto gpu = images_of(source, data, decoder, train), cpu = images_of(source, data, nullptr, train);
    ASSERT_EQ(gpu.size(), cpu.size());
    int64_t images = 0, zero = 0, over = 0;
    double worst_mean = 0, worst_p99 = 0, sum_mean = 0;
    for (size_t b = 0; b < gpu.size(); ++b) {
      for (int64_t i = 0; i < gpu[b].size(0); ++i) {
        const auto d = (gpu[b][i].to(torch::kFloat) - cpu[b][i].to(torch::kFloat)).abs().flatten();
        const double mean = d.mean().item<double>();
        const double p99 = std::get<0>(d.kthvalue(std::max<int64_t>(1, d.numel() * 99 / 100))).item<double>();
        ++images;
        zero += gpu[b][i].max().item<int64_t>() == 0 && cpu[b][i].max().item<int64_t>() != 0;
        over += mean > kMostImageMeanDiff || p99 > kMostImageP99Diff;
        sum_mean += mean;
        worst_mean = std::max(worst_mean, mean);
        worst_p99 = std::max(worst_p99, p99);
      }
    }
    const DecodeCounts n = decoder->take_counts();
    std::printf("pixels: {\"split\": \"%s\", \"folder\": \"%s\", \"images\": %lld, \"mean_diff\": %.3f, "
                "\"worst_image_mean_diff\": %.3f, \"worst_image_p99_diff\": %.1f, \"all_zero_images\": %lld, "
                "\"images_over_tolerance\": %lld, \"decoded_gpu\": %lld, \"decoded_cpu\": %lld, \"blank\": %lld, "
                "\"refused\": %lld, \"failed_calls\": %lld, \"tolerance\": {\"mean\": %.1f, \"p99\": %.1f}}\n",
                train ? "train" : "eval", photos ? "photos" : "generated", static_cast<long long>(images),
                sum_mean / static_cast<double>(std::max<int64_t>(1, images)), worst_mean, worst_p99,
                static_cast<long long>(zero), static_cast<long long>(over), static_cast<long long>(n.gpu),
                static_cast<long long>(n.cpu), static_cast<long long>(n.blank), static_cast<long long>(n.refused),
                static_cast<long long>(n.failed_calls), kMostImageMeanDiff, kMostImageP99Diff);
    EXPECT_EQ(zero, 0) << (train ? "train" : "eval") << ": images nvJPEG left black";
    EXPECT_EQ(over, 0) << (train ? "train" : "eval") << ": images past the tolerances";
    EXPECT_GT(n.gpu, 0);
  }
}

// Batches decoded back to back, kept on the GPU and compared only at the end, against the same batches copied to
// the CPU one at a time: equal bit for bit. A batched call that overwrote memory the previous batch's renders
// still read (the hardware engine writes when called, not in stream order) would show here, in training batches
// (crop regions) and evaluation batches (whole images), with PNGs among them (the batched count changes).
TEST(CudaDecode, BatchesDecodedBackToBackEqualBatchesTakenOneByOne) {
  REQUIRE_NVJPEG();
  const GpuFolder f;
  for (const bool train : {true, false}) {
    const auto source = train ? f.source : open_image_folder(f.data, false, 3, 3);
    const auto kept = images_of(source, f.data, f.decoder, train, 0, nullptr, /*keep_on_gpu=*/true);
    const auto one_by_one = images_of(source, f.data, f.decoder, train);
    ASSERT_EQ(kept.size(), one_by_one.size());
    for (size_t i = 0; i < kept.size(); ++i)
      EXPECT_TRUE(torch::equal(kept[i], one_by_one[i])) << (train ? "train" : "eval") << " batch " << i;
  }
}

// The same plans give the same bytes: a second pass, and a loader started mid-epoch (a resume), repeat the
// batches of the first bit for bit.
TEST(CudaDecode, GpuDecodedBatchesRepeatExactly) {
  REQUIRE_NVJPEG();
  const GpuFolder f;
  const auto a = images_of(f.source, f.data, f.decoder), b = images_of(f.source, f.data, f.decoder);
  const auto resumed = images_of(f.source, f.data, f.decoder, true, /*start=*/2);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(resumed.size() + 2, a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_TRUE(torch::equal(resumed[i], a[i + 2])) << i;
}

// The offset of the first byte of entropy-coded data (after the SOS segment), or 0.
size_t scan_start(const std::vector<uint8_t>& jpeg) {
  for (size_t i = 2; i + 3 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xDA) return i + 2 + (static_cast<size_t>(jpeg[i + 2]) << 8 | jpeg[i + 3]);
  return 0;
}

// A folder whose training split holds one damaged JPEG beside good ones; returns the source.
std::shared_ptr<const FolderSource> folder_with(const fs::path& root, const DataConfig& data,
                                                const std::vector<uint8_t>& damaged) {
  write_gpu_folder(root);
  testing::write_bytes(root / "train/n1/damaged.JPEG", damaged, false);
  return open_image_folder(data, true, 3, 3);
}

// A JPEG whose Huffman table is damaged (headers intact, so the worker defers it): nvJPEG fails the batch, the
// CPU path names the file, and the run goes on with the sample recorded as bad.
TEST(CudaDecode, ADamagedFileInAGpuBatchIsRecordedNotACrash) {
  REQUIRE_NVJPEG();
  testing::TempDir dir;
  std::vector<uint8_t> jpeg;
  cv::imencode(".jpg", noise_image(64, 48, 7), jpeg);
  for (size_t i = 2; i + 4 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC4) {  // DHT: the 16 code counts after length and class
      for (size_t k = 0; k < 16; ++k) jpeg[i + 5 + k] = 0xFF;
      break;
    }
  const DataConfig data = gpu_folder_config(dir.path());
  const auto source = folder_with(dir.path(), data, jpeg);
  auto bad = std::make_shared<BadSamples>("train", source->size(), 1.0, nullptr);
  const std::shared_ptr<BatchDecoder> decoder = make_batch_decoder(DecodeDevice::cuda, kGpu);
  EXPECT_FALSE(images_of(source, data, decoder, true, 0, bad).empty());
  EXPECT_EQ(bad->distinct(), 1u);
  const DecodeCounts n = decoder->take_counts();
  std::printf("damaged file: %lld failed nvJPEG calls, %lld by nvJPEG, %lld by the CPU, %lld unreadable\n",
              static_cast<long long>(n.failed_calls), static_cast<long long>(n.gpu), static_cast<long long>(n.cpu),
              static_cast<long long>(n.failed));
  EXPECT_GT(n.failed, 0);
  // The failed batch is split until the damaged file is alone: its good images stay on the GPU.
  EXPECT_EQ(n.cpu, 0) << "good images of the damaged file's batch were decoded by the CPU";
  EXPECT_GT(n.gpu, 0);
}

// The check for images nvJPEG leaves unwritten, on the device: a hand-zeroed region is found, a written one is not.
TEST(CudaDecode, BlankRegionsAreFoundOnTheDevice) {
  REQUIRE_NVJPEG();
  auto pixels = torch::randint(1, 256, {40000}, torch::TensorOptions().dtype(torch::kUInt8).device(kGpu));
  const std::vector<int64_t> offsets{0, 10000, 10300}, lengths{10000, 300, 29700};
  EXPECT_TRUE(blank_regions(pixels, offsets, lengths).empty());
  pixels.narrow(0, 10000, 300).zero_();
  EXPECT_EQ(blank_regions(pixels, offsets, lengths), std::vector<size_t>{1});
}

// Damaged scan data (headers and tables intact, garbage where the entropy-coded data starts): libjpeg decodes
// what it can with a warning; nvJPEG, strict about the bitstream, must fail the batch, which the CPU path then
// decodes, so the slot never shows pixels left over from another image.
TEST(CudaDecode, DamagedScanDataIsNotDecodedSilently) {
  REQUIRE_NVJPEG();
  testing::TempDir dir;
  std::vector<uint8_t> jpeg;
  cv::imencode(".jpg", noise_image(96, 80, 9), jpeg);
  const size_t at = scan_start(jpeg);
  ASSERT_GT(at, 0u);
  for (size_t k = at + 8; k < at + 200 && k + 2 < jpeg.size(); ++k) jpeg[k] = static_cast<uint8_t>((k * 37) % 255);
  const DataConfig data = gpu_folder_config(dir.path());
  const auto source = folder_with(dir.path(), data, jpeg);
  auto bad = std::make_shared<BadSamples>("train", source->size(), 1.0, nullptr);
  const std::shared_ptr<BatchDecoder> decoder = make_batch_decoder(DecodeDevice::cuda, kGpu);
  const auto gpu = images_of(source, data, decoder, true, 0, bad);
  const auto cpu = images_of(source, data, nullptr, true, 0, bad);
  const DecodeCounts n = decoder->take_counts();
  std::printf("damaged scan data: %lld failed nvJPEG calls, %lld decoded by the CPU, %lld unreadable\n",
              static_cast<long long>(n.failed_calls), static_cast<long long>(n.cpu), static_cast<long long>(n.failed));
  EXPECT_GT(n.failed_calls, 0) << "nvJPEG decoded damaged scan data without an error";
  const auto [mean, worst] = difference(gpu, cpu);
  EXPECT_LT(mean, 3.0);
}

// An image whose float render would pass kMaxGpuRegionPixels (6,000 x 6,000, evaluated whole) is refused in the
// worker and decoded there, at its reduced size: the same pixels as the CPU path, counted as refused.
TEST(CudaDecode, AnImageTooLargeForTheGpuIsDecodedByTheWorker) {
  REQUIRE_NVJPEG();
  testing::TempDir dir;
  write_gpu_folder(dir.path());
  cv::Mat large(6000, 6000, CV_8UC3);
  for (int r = 0; r < large.rows; ++r) large.row(r).setTo(cv::Scalar(r % 256, (r / 7) % 256, 90));
  ASSERT_TRUE(cv::imwrite((dir / "val/large.JPEG").string(), large));
  {
    std::ofstream labels(dir / "val_label.txt", std::ios::app);
    labels << "large.JPEG 1\n";
  }
  const DataConfig data = gpu_folder_config(dir.path());
  const auto source = open_image_folder(data, false, 3, 3);
  const std::shared_ptr<BatchDecoder> decoder = make_batch_decoder(DecodeDevice::cuda, kGpu);
  const auto gpu = images_of(source, data, decoder, false), cpu = images_of(source, data, nullptr, false);
  EXPECT_GE(decoder->take_counts().refused, 1);
  ASSERT_EQ(gpu.size(), cpu.size());
  size_t large_at = source->size();
  for (size_t i = 0; i < source->size(); ++i)
    if (source->file(i).filename() == "large.JPEG") large_at = i;
  ASSERT_LT(large_at, source->size());
  const auto batch = large_at / static_cast<size_t>(data.batch_size);
  const auto slot = static_cast<int64_t>(large_at % static_cast<size_t>(data.batch_size));
  EXPECT_TRUE(torch::equal(gpu[batch][slot], cpu[batch][slot]));
}

}  // namespace
}  // namespace trainer
