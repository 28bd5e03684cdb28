// The CUDA-only paths, labelled `cuda` in ctest: each test skips (and ctest reports it skipped) where LibTorch
// has no CUDA device, so they compile everywhere and run where a GPU is. scripts/gpu/check.sh runs them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "support/confusion_check.hpp"
#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/pixels/random_erasing.hpp"
#include "trainer/data/sources/synthetic.hpp"
#include "trainer/engine/loss_scaler.hpp"
#include "trainer/engine/step.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {
namespace {

#define REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

const torch::Device kCuda(torch::kCUDA, 0);

ClassifierPtr resnet18_small(uint64_t seed, const torch::Device& device) {
  torch::manual_seed(seed);
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "resnet18";
  m.stem = StemKind::small;
  m.in_channels = 3;
  m.num_classes = 10;
  auto model = build_model(m, {32, 32, 3});
  place_model(*model, device, /*channels_last=*/device.is_cuda());
  return model;
}

AmpConfig float16_amp(double init_scale) {
  AmpConfig amp;
  amp.enabled = true;
  amp.dtype = AmpDtype::float16;
  amp.init_scale = init_scale;
  return amp;
}

// The fused unscale (_amp_foreach_non_finite_check_and_unscale_) gives the CPU loop's gradients, bit for bit.
TEST(CudaAmp, FusedUnscaleMatchesTheCpuLoop) {
  REQUIRE_CUDA();
  torch::manual_seed(1);
  std::vector<torch::Tensor> cpu, gpu;
  for (int64_t n : {7, 300, 4096}) {
    auto p = torch::zeros({n}, torch::requires_grad());
    p.mutable_grad() = torch::randn({n}) * 1024.0;
    cpu.push_back(p);
    auto q = torch::zeros({n}, torch::TensorOptions().device(kCuda).requires_grad(true));
    q.mutable_grad() = p.grad().to(kCuda);
    gpu.push_back(q);
  }
  const LossScaler scaler(float16_amp(1024.0), true);
  EXPECT_FALSE(scaler.unscale(cpu));
  EXPECT_FALSE(scaler.unscale(gpu));
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(torch::equal(gpu[i].grad().cpu(), cpu[i].grad())) << i;
}

// A float16 overflow (an inf gradient) skips the optimizer step on the GPU, keeps the weights and halves the scale.
TEST(CudaAmp, Float16OverflowSkipsTheStep) {
  REQUIRE_CUDA();
  auto model = resnet18_small(2, kCuda);
  auto optimizer = make_optimizer(OptimConfig{}, *model);
  TrainConfig train;
  train.amp = float16_amp(65536.0);
  const StepOptions options = step_options(train, kCuda);
  LossScaler scaler(train.amp, options.uses_scaler());
  const auto x = torch::randn({8, 3, 32, 32}, kCuda).contiguous(torch::MemoryFormat::ChannelsLast);
  const auto y = torch::randint(0, 10, {8}, torch::TensorOptions().device(kCuda).dtype(torch::kLong));
  forward_backward(*model, {x, y, {}, 1.0, false}, options, scaler);
  // The first parameter is conv1's weight, whose gradient is channels_last here: index it, a view(-1) would fail.
  auto grad = model->parameters()[0].grad();
  ASSERT_EQ(grad.dim(), 4);
  grad.index_put_({0, 0, 0, 0}, std::numeric_limits<float>::infinity());
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
  const UpdateResult u = apply_update(*model, *optimizer, scaler, options);
  EXPECT_TRUE(u.skipped);
  EXPECT_EQ(scaler.scale_value(), 32768.0);
  const auto after = model->parameters();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i])) << i;
}

// bfloat16 and float16 autocast steps on a fixed batch: float32 logits, finite gradients, and the loss falls.
TEST(CudaAmp, AutocastStepsLearnInBothDtypes) {
  REQUIRE_CUDA();
  for (const AmpDtype dtype : {AmpDtype::bfloat16, AmpDtype::float16}) {
    auto model = resnet18_small(3, kCuda);
    auto optimizer = make_optimizer(OptimConfig{}, *model);
    TrainConfig train;
    train.amp = float16_amp(1024.0);
    train.amp.dtype = dtype;
    const StepOptions options = step_options(train, kCuda);
    ASSERT_TRUE(options.autocast.has_value());
    LossScaler scaler(train.amp, options.uses_scaler());
    torch::manual_seed(4);
    const auto x = torch::randn({16, 3, 32, 32}, kCuda).contiguous(torch::MemoryFormat::ChannelsLast);
    const auto y = torch::randint(0, 10, {16}, torch::TensorOptions().device(kCuda).dtype(torch::kLong));
    std::vector<double> losses;
    for (int step = 0; step < 12; ++step) {
      const MicroResult r = forward_backward(*model, {x, y, {}, 1.0, false}, options, scaler);
      EXPECT_EQ(r.logits.scalar_type(), torch::kFloat);
      losses.push_back(r.loss.item<double>());
      apply_update(*model, *optimizer, scaler, options);
    }
    EXPECT_TRUE(std::isfinite(losses.back()));
    EXPECT_LT(losses.back(), 0.7 * losses.front()) << static_cast<int>(dtype);
  }
}

// The CUDA generator's state round-trips: the draws after restoring repeat the draws after saving.
TEST(CudaRng, StateRoundTrips) {
  REQUIRE_CUDA();
  torch::manual_seed(5);
  const torch::Tensor state = compat::cuda_rng_state(0);
  const auto a = torch::rand({1000}, kCuda);
  torch::rand({77}, kCuda);
  compat::set_cuda_rng_state(0, state);
  EXPECT_TRUE(torch::equal(torch::rand({1000}, kCuda), a));
}

// Pinned batches reach the GPU through the side stream intact and in order, one batch ahead of the consumer.
TEST(CudaTransfer, PinnedBatchesArriveIntactAndInOrder) {
  REQUIRE_CUDA();
  auto source = std::make_shared<SyntheticSource>(40, ImageShape{8, 8, 3}, 5, 7);
  auto read_all = [&](bool pinned, const torch::Device& device) {
    BatchDataset dataset(source, pinned);
    SamplerOptions order;
    order.size = source->size();
    order.batch_size = 8;
    order.shuffle = false;
    auto loader = make_loader(std::move(dataset), EpochSampler(order), 8, 2);
    std::vector<ImageBatch> out;
    for_each_device_batch(*loader, device, [&](ImageBatch& b) {
      EXPECT_EQ(b.images.device(), device);
      // A step's worth of work on the batch before the next is consumed.
      out.push_back({b.images.to(torch::kFloat).mul(2).to(torch::kCPU), b.labels.to(torch::kCPU), {}});
      return true;
    });
    return out;
  };
  const auto host = read_all(false, torch::kCPU), gpu = read_all(true, kCuda);
  ASSERT_EQ(host.size(), 5u);
  ASSERT_EQ(gpu.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_TRUE(torch::equal(gpu[i].images, host[i].images)) << i;
    EXPECT_TRUE(torch::equal(gpu[i].labels, host[i].labels)) << i;
  }
}

// The channels_last self-check on the GPU: cuDNN's channels_last kernels agree with the float64 reference.
TEST(CudaLayout, ChannelsLastKernelsPassTheSelfCheck) {
  REQUIRE_CUDA();
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "resnet50";
  m.in_channels = 3;
  m.num_classes = 1000;
  EXPECT_TRUE(wants_channels_last(m, kCuda));
  const KernelLayout layout = resolve_layout(m, {64, 64, 3}, kCuda);
  EXPECT_TRUE(layout.channels_last) << layout.warning;
  EXPECT_LE(layout.error, kLayoutTolerance);
}

// Evaluation's confusion matrix counted on the GPU equals the predictions' count on the host.
TEST(CudaEvaluate, ConfusionCountedOnTheDeviceMatchesThePredictions) {
  REQUIRE_CUDA();
  testing::expect_confusion_counts_match(kCuda);
}

// Random erasing's boxes travel to the GPU with the batch (pinned, non_blocking): erasing on the device then
// reads them where they are, with no copy that would make the host wait every step.
TEST(CudaTransfer, EraseBoxesArriveWithTheBatch) {
  REQUIRE_CUDA();
  const auto pinned = torch::TensorOptions().pinned_memory(true);
  ImageBatch host{torch::zeros({2, 4, 4, 3}, pinned.dtype(torch::kUInt8)), torch::zeros({2}, pinned.dtype(torch::kInt64)),
                  torch::zeros({2, kEraseColumns}, pinned.dtype(torch::kInt64))};
  host.erase[1][2] = 2;  // the second image: a 2 x 3 box at (1, 1)
  host.erase[1][3] = 3;
  host.erase[1][0] = 1;
  host.erase[1][1] = 1;
  DeviceStager stager(kCuda);
  ImageBatch batch = stager.stage(host);
  stager.ready(batch);
  ASSERT_TRUE(batch.erase.is_cuda());
  auto x = torch::ones({2, 3, 4, 4}, torch::TensorOptions().device(kCuda));
  erase_batch(x, batch.erase, ErasingValue::zero);
  EXPECT_EQ(x[0].sum().item<float>(), 48.0f);
  EXPECT_EQ(x[1].sum().item<float>(), 48.0f - 3 * 6);
}

}  // namespace
}  // namespace trainer
