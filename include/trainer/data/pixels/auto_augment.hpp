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

#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/augment_ops.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

// One op as a policy chose it: what apply_op receives.
struct ChosenOp {
  AugmentOp op = AugmentOp::identity;
  double magnitude = 0.0;
};

// One row per data.augment.auto_augment.name: the policy's op table and how it draws and applies ops. A new
// policy is one AutoAugmentKind value with its name (config/config.hpp) and one row in auto_augment.cpp.
struct PolicyRow {
  AutoAugmentKind kind;
  // torchvision's _augmentation_space of the policy (null: none, which applies nothing).
  std::vector<OpSpace> (*space)(int64_t num_bins, int64_t height, int64_t width) = nullptr;
  // Magnitude bins the policy always uses (AutoAugment and AugMix: 10); 0: auto_augment.num_magnitude_bins.
  int64_t fixed_bins = 0;
  // One draw of a single-chain policy: the ops applied to an image, in order (null: none and augmix).
  std::vector<ChosenOp> (*choose)(const AutoAugmentConfig& c, const std::vector<OpSpace>& space,
                                  SplitMix64& rng) = nullptr;
  // A policy that mixes several chains (augmix); null: the chosen ops applied one after another.
  void (*apply)(const AutoAugmentConfig& c, const OpSettings& settings, const std::vector<OpSpace>& space,
                cv::Mat& image, SplitMix64& rng) = nullptr;
};

const std::vector<PolicyRow>& policy_rows();
const PolicyRow& policy_row(AutoAugmentKind kind);

// The policy's op table for an image of height x width (`num_bins` unless the policy fixes its own); empty for
// none.
std::vector<OpSpace> augmentation_space(AutoAugmentKind kind, int64_t num_bins, int64_t height, int64_t width);

class AutoAugmentPolicy {
 public:
  explicit AutoAugmentPolicy(const AutoAugmentConfig& config);
  bool active() const { return row_->space != nullptr; }
  void apply(cv::Mat& image, SplitMix64& rng) const;

  // The ops one draw of a single-chain policy (imagenet, randaugment, trivialaugment_wide) applies to an image of
  // this size, in order; apply() draws the same way. For distribution tests and logs.
  std::vector<ChosenOp> choose(int64_t height, int64_t width, SplitMix64& rng) const;

 private:
  std::vector<OpSpace> space(int64_t height, int64_t width) const;

  AutoAugmentConfig config_;
  const PolicyRow* row_;
  OpSettings settings_;
};

// Random numbers from SplitMix64 (uniform01 is util/hash.hpp's): standard normals (Box-Muller) and Gamma(alpha)
// draws (Marsaglia and Tsang), for the policies.
double standard_normal(SplitMix64& rng);
double gamma_draw(SplitMix64& rng, double alpha);

}  // namespace trainer
