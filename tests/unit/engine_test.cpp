// The training step's parts on CPU: loss scaling (overflow skip, backoff, growth), accumulation, clipping,
// autocast, mixup / CutMix, weight EMA, the weight-decay groups, and evaluation's confusion counts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "support/confusion_check.hpp"
#include "trainer/engine/backend_settings.hpp"
#include "trainer/engine/grad_clip.hpp"
#include "trainer/engine/loss_scaler.hpp"
#include "trainer/engine/mix.hpp"
#include "trainer/engine/step.hpp"
#include "trainer/engine/weight_ema.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {
namespace {

ClassifierPtr small_cnn(uint64_t seed) {
  torch::manual_seed(seed);
  ModelConfig m;  // mnist_cnn: no BatchNorm, so a batch split in two gives the same gradient
  m.num_classes = 10;
  return build_model(m, {12, 12, 1});
}

std::vector<torch::Tensor> snapshot(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

MixedBatch plain(const torch::Tensor& x, const torch::Tensor& y) { return {x, y, {}, 1.0, false}; }

AmpConfig scaler_config(double init, int64_t interval) {
  AmpConfig a;
  a.init_scale = init;
  a.growth_interval = interval;
  return a;
}

TEST(LossScaler, AnOverflowSkipsTheStepKeepsTheWeightsAndHalvesTheScaleThenItGrows) {
  auto model = small_cnn(1);
  auto optimizer = make_optimizer(OptimConfig{}, *model);
  LossScaler scaler(scaler_config(1024.0, 2), true);
  StepOptions options;
  const auto x = torch::randn({4, 1, 12, 12}), y = torch::tensor({0, 1, 2, 3});

  // A clean step: gradients reach the optimizer divided by exactly the scale.
  forward_backward(*model, plain(x, y), options, scaler);
  std::vector<torch::Tensor> scaled;
  for (const auto& p : model->parameters()) scaled.push_back(p.grad().clone());
  auto reference = small_cnn(1);
  torch::nn::functional::cross_entropy(reference->forward(x), y).backward();
  ASSERT_FALSE(scaler.unscale(model->parameters()));
  const auto params = model->parameters(), ref_params = reference->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(scaled[i], ref_params[i].grad() * 1024.0, 1e-4, 1e-6));
    EXPECT_TRUE(torch::allclose(params[i].grad(), ref_params[i].grad(), 1e-5, 1e-8));
  }
  model->zero_grad(true);

  // Forced overflow: one gradient element is inf.
  forward_backward(*model, plain(x, y), options, scaler);
  model->parameters()[0].grad().view(-1)[0] = std::numeric_limits<float>::infinity();
  const auto before = snapshot(*model);
  const UpdateResult skipped = apply_update(*model, *optimizer, scaler, options);
  EXPECT_TRUE(skipped.skipped);
  const auto after = snapshot(*model);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i])) << "weights moved";
  EXPECT_EQ(scaler.scale_value(), 512.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined()) << "gradients are dropped";

  // A NaN loss overflows too.
  scaler.scale(torch::full({}, std::numeric_limits<float>::quiet_NaN()) * model->parameters()[1].sum()).backward();
  EXPECT_TRUE(apply_update(*model, *optimizer, scaler, options).skipped);
  EXPECT_EQ(scaler.scale_value(), 256.0);

  // growth_interval (2) clean steps in a row double the scale; the weights move.
  for (int i = 0; i < 2; ++i) {
    forward_backward(*model, plain(x, y), options, scaler);
    EXPECT_FALSE(apply_update(*model, *optimizer, scaler, options).skipped);
  }
  EXPECT_EQ(scaler.scale_value(), 512.0);
  EXPECT_FALSE(torch::equal(snapshot(*model)[0], before[0]));

  // The state round-trips through a checkpoint's JSON.
  LossScaler restored(scaler_config(1024.0, 2), true);
  restored.load_state(scaler.state());
  EXPECT_EQ(restored.state(), scaler.state());
  EXPECT_EQ(restored.skipped_steps(), 2);
}

TEST(LossScaler, DisabledIsANoOp) {
  LossScaler off;
  const auto loss = torch::tensor(3.0f);
  EXPECT_TRUE(off.scale(loss).equal(loss));
  EXPECT_FALSE(off.unscale({torch::zeros({1}, torch::requires_grad())}));
  off.update(true);
  EXPECT_EQ(off.scale_value(), 1.0);
  EXPECT_EQ(off.skipped_steps(), 0);
}

// One optimizer step on all of (x, y), and one accumulated over two micro-batches split at `split`, each weighed
// by micro_batch_weight (exactly 1 for equal halves): the same weights after both, to the rounding of the same sums
// in two orders.
void expect_accumulated_step_equals_whole(const torch::Tensor& x, const torch::Tensor& y, int64_t split) {
  const int64_t n = x.size(0);
  auto whole = small_cnn(2), parts = small_cnn(2);
  auto opt_whole = make_optimizer(OptimConfig{}, *whole), opt_parts = make_optimizer(OptimConfig{}, *parts);
  LossScaler off;
  StepOptions one, two;
  two.accumulate_steps = 2;
  forward_backward(*whole, plain(x, y), one, off);
  apply_update(*whole, *opt_whole, off, one);
  for (const auto& [from, to] : {std::pair<int64_t, int64_t>{0, split}, {split, n}})
    forward_backward(*parts, plain(x.slice(0, from, to), y.slice(0, from, to)), two, off,
                     micro_batch_weight(to - from, n, 1, 2));
  apply_update(*parts, *opt_parts, off, two);
  const auto a = snapshot(*whole), b = snapshot(*parts);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-7)) << i;
}

TEST(TrainStep, AccumulatingTwoHalvesEqualsOneFullBatch) {
  expect_accumulated_step_equals_whole(torch::randn({8, 1, 12, 12}), torch::tensor({0, 1, 2, 3, 4, 5, 6, 7}), 4);
}

// An epoch's last step may hold fewer images than a full one: 4 + 2 accumulated must give the gradient of the 6
// together (each micro-batch's mean weighed by its images), not weigh the 2 as much as the 4.
TEST(TrainStep, APartialStepWeighsEachMicroBatchByItsImages) {
  EXPECT_EQ(micro_batch_weight(32, 64, 1, 2), 1.0);  // full steps: exactly 1, the loss untouched
  EXPECT_EQ(micro_batch_weight(16, 64, 2, 2), 1.0);
  EXPECT_EQ(micro_batch_weight(16, 16, 1, 2), 2.0);  // the step's only micro-batch: all of its gradient
  EXPECT_EQ(micro_batch_weight(4, 12, 2, 1), 4.0 * 2 / 12);
  torch::manual_seed(5);
  expect_accumulated_step_equals_whole(torch::randn({6, 1, 12, 12}), torch::tensor({0, 1, 2, 3, 4, 5}), 4);
}

TEST(TrainStep, ClippingReportsTheNormAndBoundsIt) {
  auto model = small_cnn(3), reference = small_cnn(3);
  const auto x = torch::randn({4, 1, 12, 12}) * 50, y = torch::tensor({0, 1, 2, 3});
  torch::nn::functional::cross_entropy(reference->forward(x), y).backward();
  double squares = 0;
  for (const auto& p : reference->parameters()) squares += p.grad().pow(2).sum().item<double>();
  OptimConfig plain_sgd;
  plain_sgd.momentum = 0;
  auto optimizer = make_optimizer(plain_sgd, *model);
  set_learning_rate(*optimizer, 1.0);
  StepOptions options;
  options.clip_grad_norm = 0.01;
  LossScaler off;
  const auto before = snapshot(*model);
  forward_backward(*model, plain(x, y), options, off);
  const UpdateResult u = apply_update(*model, *optimizer, off, options);
  ASSERT_TRUE(u.grad_norm.defined());
  const double norm = u.grad_norm.item<double>();
  EXPECT_NEAR(norm, std::sqrt(squares), 1e-4 * std::sqrt(squares));
  ASSERT_GT(norm, 0.01);
  // With lr 1 and no momentum the update is the clipped gradient: its norm is the clip value.
  double moved = 0;
  const auto after = snapshot(*model);
  for (size_t i = 0; i < after.size(); ++i) moved += (after[i] - before[i]).pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(moved), 0.01, 1e-5);
}

// The device-side clip equals LibTorch's clip_grad_norm_ bit for bit, below and above the threshold, and a NaN
// gradient gives a NaN norm (and NaN gradients) rather than an exception.
TEST(GradClip, EqualsLibTorchsClipGradNormAndKeepsANaN) {
  for (const double max_norm : {1e-3, 1e6}) {
    auto ours = small_cnn(3), theirs = small_cnn(3);
    const auto x = torch::randn({4, 1, 12, 12}), y = torch::tensor({0, 1, 2, 3});
    for (auto* m : {&ours, &theirs}) torch::nn::functional::cross_entropy((*m)->forward(x), y).backward();
    const torch::Tensor norm = clip_grad_norm(ours->parameters(), max_norm);
    const double expected = torch::nn::utils::clip_grad_norm_(theirs->parameters(), max_norm);
    EXPECT_EQ(norm.item<float>(), static_cast<float>(expected)) << max_norm;
    for (size_t i = 0; i < ours->parameters().size(); ++i)
      EXPECT_TRUE(torch::equal(ours->parameters()[i].grad(), theirs->parameters()[i].grad())) << max_norm << " " << i;
  }
  auto model = small_cnn(3);
  torch::nn::functional::cross_entropy(model->forward(torch::randn({2, 1, 12, 12})), torch::tensor({0, 1})).backward();
  model->parameters()[0].grad().view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(clip_grad_norm(model->parameters(), 1.0).item<double>()));
  EXPECT_TRUE(torch::isnan(model->parameters()[1].grad()).all().item<bool>());
  EXPECT_FALSE(clip_grad_norm({torch::zeros({2}, torch::requires_grad())}, 1.0).defined());
}

TEST(TrainStep, Bfloat16AutocastOnCpuRunsTheModelInBfloat16AndRestoresTheState) {
  TrainConfig t;
  t.amp.enabled = true;
  t.amp.dtype = AmpDtype::bfloat16;
  const StepOptions o = step_options(t, torch::kCPU);
  ASSERT_EQ(o.autocast, at::kBFloat16);
  EXPECT_FALSE(o.uses_scaler());
  auto model = small_cnn(4);
  const auto x = torch::randn({2, 1, 12, 12});
  {
    compat::AutocastGuard guard(c10::DeviceType::CPU, at::kBFloat16);
    EXPECT_EQ(model->forward(x).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(model->forward(x).scalar_type(), at::kFloat) << "autocast is off again after the guard";
  LossScaler off;
  const MicroResult r = forward_backward(*model, plain(x, torch::tensor({1, 2})), o, off);
  EXPECT_EQ(r.logits.scalar_type(), at::kFloat);
  const auto full = model->forward(x);
  EXPECT_FALSE(torch::equal(r.logits, full)) << "the bfloat16 forward rounds differently";
  EXPECT_TRUE(torch::allclose(r.logits, full, 0.05, 0.05));
  for (const auto& p : model->parameters()) EXPECT_EQ(p.grad().scalar_type(), at::kFloat);

  t.amp.dtype = AmpDtype::float16;
  EXPECT_THROW(step_options(t, torch::kCPU), ConfigError);
  t.amp.cuda_only = true;
  EXPECT_FALSE(step_options(t, torch::kCPU).autocast.has_value());
}

TEST(Mix, MixupBlendsTheBatchWithItsReverseDeterministically) {
  const auto x = torch::randn({6, 3, 8, 8}), y = torch::tensor({0, 1, 2, 3, 4, 5});
  MixConfig m;
  m.mixup_alpha = 0.4;
  const MixedBatch a = mix_batch(x, y, m, 17), b = mix_batch(x, y, m, 17), c = mix_batch(x, y, m, 18);
  EXPECT_FALSE(a.cutmix);
  EXPECT_GT(a.lam, 0.0);
  EXPECT_LT(a.lam, 1.0);
  EXPECT_TRUE(torch::allclose(a.images, x * a.lam + x.flip(0) * (1.0 - a.lam)));
  EXPECT_TRUE(torch::equal(a.labels_b, y.flip(0)));
  EXPECT_EQ(a.lam, b.lam);
  EXPECT_TRUE(torch::equal(a.images, b.images));
  EXPECT_NE(a.lam, c.lam);
  m.prob = 0.0;
  const MixedBatch none = mix_batch(x, y, m, 17);
  EXPECT_EQ(none.lam, 1.0);
  EXPECT_TRUE(none.images.is_same(x));
}

TEST(Mix, CutMixPastesABoxAndWeighsTheTargetsByItsArea) {
  const auto x = torch::arange(4 * 1 * 10 * 10, torch::kFloat).view({4, 1, 10, 10}), y = torch::tensor({0, 1, 2, 3});
  MixConfig m;
  m.cutmix_alpha = 1.0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const MixedBatch b = mix_batch(x, y, m, seed);
    ASSERT_TRUE(b.cutmix);
    const auto from_reverse = b.images.eq(x.flip(0)).logical_and(b.images.ne(x));
    const double pasted = from_reverse[0].sum().item<double>();
    EXPECT_DOUBLE_EQ(b.lam, 1.0 - pasted / 100.0) << "seed " << seed;
    EXPECT_TRUE(torch::equal(b.images.eq(x).logical_or(from_reverse), torch::ones_like(from_reverse)));
  }
}

TEST(Mix, MixedCrossEntropyIsTheSoftTargetCrossEntropy) {
  const auto logits = torch::randn({4, 5}), y = torch::tensor({0, 3, 1, 4});
  const MixedBatch b{torch::zeros({4, 1, 2, 2}), y, y.flip(0), 0.3, false};
  const double eps = 0.1;
  auto smoothed = [&](const torch::Tensor& labels) {
    return torch::nn::functional::one_hot(labels, 5).to(torch::kFloat) * (1 - eps) + eps / 5;
  };
  const auto target = smoothed(y) * 0.3 + smoothed(y.flip(0)) * 0.7;
  const auto expected = (-target * torch::log_softmax(logits, 1)).sum(1).mean();
  EXPECT_NEAR(mixed_cross_entropy(logits, b, eps).item<double>(), expected.item<double>(), 1e-6);
}

TEST(WeightEma, AveragesEveryNthStepWithTheWarmupRamp) {
  auto model = small_cnn(5);
  EmaConfig e;
  e.decay = 0.9;
  e.every = 2;
  e.warmup = true;
  WeightEma ema(e, small_cnn(6), *model);
  const auto start = snapshot(*model);
  for (size_t i = 0; i < start.size(); ++i) EXPECT_TRUE(torch::equal(snapshot(ema.model())[i], start[i]));
  {
    torch::NoGradGuard g;
    for (auto& p : model->parameters()) p.add_(1.0);
  }
  ema.after_step(1);  // not a multiple of `every`: no update
  EXPECT_EQ(ema.updates(), 0);
  ema.after_step(2);  // first update: decay min(0.9, 1/10) = 0.1
  EXPECT_EQ(ema.updates(), 1);
  for (size_t i = 0; i < start.size(); ++i)
    EXPECT_TRUE(torch::allclose(snapshot(ema.model())[i], start[i] * 0.1 + (start[i] + 1.0) * 0.9, 1e-6, 1e-6));
  ema.after_step(4);  // second: min(0.9, 2/11)
  const double d = 2.0 / 11.0;
  for (size_t i = 0; i < start.size(); ++i) {
    const auto first = start[i] * 0.1 + (start[i] + 1.0) * 0.9;
    EXPECT_TRUE(torch::allclose(snapshot(ema.model())[i], first * d + (start[i] + 1.0) * (1 - d), 1e-6, 1e-6));
  }
}

TEST(Optimizer, NormWeightsAndBiasesGetNoWeightDecayByDefault) {
  ModelConfig m;
  m.num_classes = 10;
  m.arch = "resnet18";
  m.in_channels = 3;
  auto model = build_model(m, {32, 32, 3});
  const ParameterSplit split = split_for_weight_decay(*model, false);
  // resnet18: 21 conv weights + fc weight decay; 20 BatchNorms x (weight, bias) + fc bias do not.
  EXPECT_EQ(split.decay.size(), 21u);
  EXPECT_EQ(split.no_decay.size(), 41u);
  EXPECT_EQ(split_for_weight_decay(*model, true).no_decay.size(), 0u);
  OptimConfig o;
  o.name = OptimizerKind::adamw;
  o.weight_decay = 0.05;
  auto adamw = make_optimizer(o, *model);
  ASSERT_EQ(adamw->param_groups().size(), 2u);
  const auto& g0 = static_cast<const torch::optim::AdamWOptions&>(adamw->param_groups()[0].options());
  const auto& g1 = static_cast<const torch::optim::AdamWOptions&>(adamw->param_groups()[1].options());
  EXPECT_EQ(g0.weight_decay(), 0.05);
  EXPECT_EQ(g1.weight_decay(), 0.0);
  EXPECT_EQ(std::get<1>(g0.betas()), 0.999);
}

}  // namespace
}  // namespace trainer

namespace trainer {
namespace {

// run.cudnn_benchmark, run.tf32, run.deterministic and run.onednn land in LibTorch's switches; deterministic wins
// over autotuning and asks cuBLAS for its reproducible workspace.
TEST(BackendSettings, AppliesTheRunSwitches) {
  RunConfig run;
  apply_backend_settings(run);
  EXPECT_EQ(describe_backend_settings(), "cudnn.benchmark on, tf32 conv on matmul on, deterministic off, oneDNN on");
  run.deterministic = true;
  run.tf32 = false;
  apply_backend_settings(run);
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_TRUE(at::globalContext().deterministicCuDNN());
  EXPECT_FALSE(at::globalContext().benchmarkCuDNN());
  EXPECT_EQ(describe_backend_settings(), "cudnn.benchmark off, tf32 conv off matmul off, deterministic on, oneDNN on");
  ASSERT_NE(std::getenv("CUBLAS_WORKSPACE_CONFIG"), nullptr);
  apply_backend_settings(RunConfig{});
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
}

// run.onednn false: convolutions leave oneDNN for LibTorch's own kernels, which give the same sums in another order.
TEST(BackendSettings, OneDnnOffConvolvesWithLibTorchsOwnKernels) {
  torch::manual_seed(5);
  const auto x = torch::randn({4, 16, 24, 24}), w = torch::randn({8, 16, 3, 3});
  RunConfig run;
  apply_backend_settings(run);
  const auto with = torch::conv2d(x, w, {}, 1, 1);
  run.onednn = false;
  apply_backend_settings(run);
  EXPECT_FALSE(at::globalContext().userEnabledMkldnn());
  EXPECT_NE(describe_backend_settings().find(", oneDNN off"), std::string::npos);
  const auto without = torch::conv2d(x, w, {}, 1, 1);
  apply_backend_settings(RunConfig{});
  EXPECT_TRUE(at::globalContext().userEnabledMkldnn());
  // Two orders of the same 144 products differ by at most 2 x 144 float32 roundings of the sum of their magnitudes.
  const auto bound = torch::conv2d(x.abs(), w.abs(), {}, 1, 1) * (2 * 144 * 1.2e-7);
  EXPECT_TRUE(((with - without).abs() <= bound).all().item<bool>());
}

// The confusion matrix counted on the device (one scatter per batch, no host copy) holds exactly what the
// predictions handed to each batch's callback say.
TEST(Evaluate, ConfusionCountedOnTheDeviceMatchesThePredictions) {
  testing::expect_confusion_counts_match(torch::Device(torch::kCPU));
}

}  // namespace
}  // namespace trainer
