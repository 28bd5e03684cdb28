// data.decode cuda on a GPU: nvJPEG's batches against the CPU path, files it does not take in the same batches,
// a damaged file, and repeatability (what exact resume needs). Skipped without a CUDA device or without nvJPEG.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <opencv2/imgcodecs.hpp>

#include <cstdio>

#include "support/fixtures.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/sources/folder_source.hpp"

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

// A folder of larger JPEGs (plus the fixture's PNGs) and a progressive JPEG, which the workers decode.
void write_gpu_folder(const fs::path& root) {
  testing::write_image_folder(root, {3, 8, 3, true});
  for (int i = 0; i < 6; ++i)
    cv::imwrite((root / "train/n0" / ("big" + std::to_string(i) + ".JPEG")).string(),
                testing::class_image(0, 300 + 17 * i, 220 + 9 * i, i));
  cv::imwrite((root / "train/n2/progressive.JPEG").string(), testing::class_image(2, 120, 90, 3),
              {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
}

// All batches of a training loader (epochs 0 and 1 from `start` on), on the CPU.
std::vector<torch::Tensor> train_images(const std::shared_ptr<const ImageSource>& source, const DataConfig& data,
                                        BatchDecoder* decoder, size_t start = 0,
                                        std::shared_ptr<BadSamples> bad = nullptr) {
  TrainLoaderOptions o;
  o.seed = 11;
  o.epochs = 2;
  o.start_batch = start;
  o.pin_memory = decoder != nullptr;
  o.defer_decode = decoder != nullptr;
  o.bad = std::move(bad);
  auto loader = make_train_loader(source, data, o);
  std::vector<torch::Tensor> out;
  for_each_device_batch(*loader, decoder ? kGpu : torch::Device(torch::kCPU), decoder,
                        std::numeric_limits<size_t>::max(), [&](ImageBatch& b) {
                          out.push_back(b.images.to(torch::kCPU));
                          return true;
                        });
  return out;
}

// The folder, its training split and an nvJPEG decoder, as each test here starts.
struct GpuFolder {
  testing::TempDir dir;
  DataConfig data;
  std::shared_ptr<const FolderSource> source;
  std::unique_ptr<BatchDecoder> decoder;
  GpuFolder() : data(gpu_folder_config(dir.path())) {
    write_gpu_folder(dir.path());
    source = open_image_folder(data, true, 3, 3);
    decoder = make_batch_decoder(DecodeDevice::cuda, kGpu);
  }
};

// nvJPEG's IDCT and upsampling and the antialiased resize on the GPU differ from libjpeg + Pillow-exact
// resampling: close, not equal. The figures are printed for the README.
TEST(CudaDecode, NvjpegBatchesAreCloseToTheCpuPath) {
  REQUIRE_NVJPEG();
  const GpuFolder f;
  const DataConfig& data = f.data;
  const auto& source = f.source;
  BatchDecoder* decoder = f.decoder.get();
  std::printf("decoder: %s\n", decoder->describe().c_str());
  const auto gpu = train_images(source, data, decoder), cpu = train_images(source, data, nullptr);
  ASSERT_EQ(gpu.size(), cpu.size());
  double sum = 0, worst = 0;
  int64_t count = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const auto d = (gpu[i].to(torch::kInt) - cpu[i].to(torch::kInt)).abs().to(torch::kDouble);
    sum += d.sum().item<double>();
    count += d.numel();
    worst = std::max(worst, d.max().item<double>());
  }
  std::printf("nvJPEG batch vs CPU path: mean |diff| %.3f, max %.0f (of 255), %lld values\n", sum / count, worst,
              static_cast<long long>(count));
  EXPECT_LT(sum / count, 3.0);
}

// The same plans give the same bytes: a second pass, and a loader started mid-epoch (a resume), repeat the
// batches of the first bit for bit.
TEST(CudaDecode, GpuDecodedBatchesRepeatExactly) {
  REQUIRE_NVJPEG();
  const GpuFolder f;
  const DataConfig& data = f.data;
  const auto& source = f.source;
  BatchDecoder* decoder = f.decoder.get();
  const auto a = train_images(source, data, decoder), b = train_images(source, data, decoder);
  const auto resumed = train_images(source, data, decoder, /*start=*/2);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(resumed.size() + 2, a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_TRUE(torch::equal(resumed[i], a[i + 2])) << i;
}

// A JPEG whose Huffman table is damaged (headers intact, so the worker defers it): nvJPEG refuses the batch,
// the CPU path names the file, and the run goes on with the sample recorded as bad.
TEST(CudaDecode, ADamagedFileInAGpuBatchIsRecordedNotACrash) {
  REQUIRE_NVJPEG();
  testing::TempDir dir;
  write_gpu_folder(dir.path());
  std::vector<uint8_t> jpeg;
  cv::imencode(".jpg", testing::class_image(1, 64, 48, 0), jpeg);
  for (size_t i = 2; i + 4 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC4) {  // DHT: the 16 code counts after length and class
      for (size_t k = 0; k < 16; ++k) jpeg[i + 5 + k] = 0xFF;
      break;
    }
  testing::write_bytes(dir / "train/n1/damaged.JPEG", jpeg, false);
  DataConfig data = gpu_folder_config(dir.path());
  const auto source = open_image_folder(data, true, 3, 3);
  auto bad = std::make_shared<BadSamples>("train", source->size(), 1.0, nullptr);
  auto decoder = make_batch_decoder(DecodeDevice::cuda, kGpu);
  const auto batches = train_images(source, data, decoder.get(), 0, bad);
  EXPECT_FALSE(batches.empty());
  EXPECT_EQ(bad->distinct(), 1u);
}

}  // namespace
}  // namespace trainer
