#include "trainer/engine/mix.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace trainer {

namespace {

double sample_beta(std::mt19937_64& rng, double alpha) {
  std::gamma_distribution<double> gamma(alpha, 1.0);
  const double x = gamma(rng), y = gamma(rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels, double label_smoothing,
                            const torch::Tensor& class_weights) {
  auto options = torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing);
  if (class_weights.defined()) options.weight(class_weights);
  return torch::nn::functional::cross_entropy(logits, labels, options);
}

}  // namespace

MixedBatch mix_batch(const torch::Tensor& images, const torch::Tensor& labels, const MixConfig& mix, uint64_t seed) {
  MixedBatch out{images, labels, {}, 1.0, false};
  if (!mix.enabled()) return out;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  if (uniform(rng) >= mix.prob) return out;
  const bool cutmix = mix.cutmix_alpha > 0 && (mix.mixup_alpha <= 0 || uniform(rng) < mix.switch_prob);
  double lam = sample_beta(rng, cutmix ? mix.cutmix_alpha : mix.mixup_alpha);
  const auto reversed = images.flip(0);
  if (cutmix) {
    // timm's rand_bbox: a box of side ratio sqrt(1 - lam) around a uniform centre, clipped to the image.
    const int64_t h = images.size(2), w = images.size(3);
    const double cut = std::sqrt(1.0 - lam);
    const auto cut_h = static_cast<int64_t>(static_cast<double>(h) * cut);
    const auto cut_w = static_cast<int64_t>(static_cast<double>(w) * cut);
    const int64_t cy = std::uniform_int_distribution<int64_t>(0, h - 1)(rng);
    const int64_t cx = std::uniform_int_distribution<int64_t>(0, w - 1)(rng);
    const int64_t y0 = std::clamp<int64_t>(cy - cut_h / 2, 0, h), y1 = std::clamp<int64_t>(cy + cut_h / 2, 0, h);
    const int64_t x0 = std::clamp<int64_t>(cx - cut_w / 2, 0, w), x1 = std::clamp<int64_t>(cx + cut_w / 2, 0, w);
    out.images = images.clone(torch::MemoryFormat::Preserve);
    using torch::indexing::Slice;
    const auto box =
        std::initializer_list<torch::indexing::TensorIndex>{Slice(), Slice(), Slice(y0, y1), Slice(x0, x1)};
    out.images.index_put_(box, reversed.index(box));
    lam = 1.0 - static_cast<double>((y1 - y0) * (x1 - x0)) / static_cast<double>(h * w);
  } else {
    out.images = images * lam + reversed * (1.0 - lam);
  }
  out.labels_b = labels.flip(0);
  out.lam = lam;
  out.cutmix = cutmix;
  return out;
}

torch::Tensor mixed_cross_entropy(const torch::Tensor& logits, const MixedBatch& batch, double label_smoothing,
                                  const torch::Tensor& class_weights) {
  const auto loss = cross_entropy(logits, batch.labels, label_smoothing, class_weights);
  if (!batch.labels_b.defined() || batch.lam >= 1.0) return loss;
  return loss * batch.lam + cross_entropy(logits, batch.labels_b, label_smoothing, class_weights) * (1.0 - batch.lam);
}

}  // namespace trainer
