// torchvision's automatic augmentation policies on one 8-bit image (RGB or grey), with every random choice (the
// sub-policy or ops, magnitudes, signs, AugMix's weights) drawn from the caller's generator, so a sample's
// augmentation is a pure function of its seed:
//   AutoAugmentPolicy policy(config.data.augment.auto_augment);
//   SplitMix64 rng(sample_seed);
//   policy.apply(image, rng);
// imagenet: AutoAugment's ImageNet policy (25 sub-policies of two ops, each with its probability).
// randaugment: num_ops ops chosen uniformly, all at one magnitude (optionally with timm's Gaussian noise).
// trivialaugment_wide: one op, a uniform magnitude bin. augmix: mixture_width chains of 1-3 ops mixed with
// Dirichlet weights and blended with the original by a Beta draw, in float as torchvision does.
#pragma once

#include <opencv2/core.hpp>

#include "trainer/config/config.hpp"
#include "trainer/data/augment_ops.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

// One op as a policy chose it: what apply_op receives.
struct ChosenOp {
  AugmentOp op = AugmentOp::identity;
  double magnitude = 0.0;
};

class AutoAugmentPolicy {
 public:
  explicit AutoAugmentPolicy(const AutoAugmentConfig& config);
  bool active() const { return config_.name != AutoAugmentKind::none; }
  void apply(cv::Mat& image, SplitMix64& rng) const;

  // The ops one draw of a single-chain policy (imagenet, randaugment, trivialaugment_wide) applies to an image of
  // this size, in order; apply() draws the same way. For distribution tests and logs.
  std::vector<ChosenOp> choose(int64_t height, int64_t width, SplitMix64& rng) const;

 private:
  void apply_augmix(cv::Mat& image, SplitMix64& rng) const;

  AutoAugmentConfig config_;
  OpSettings settings_;
};

// Random numbers from SplitMix64 (uniform01 is util/hash.hpp's): standard normals (Box-Muller) and Gamma(alpha)
// draws (Marsaglia and Tsang), for the policies.
double standard_normal(SplitMix64& rng);
double gamma_draw(SplitMix64& rng, double alpha);

}  // namespace trainer
