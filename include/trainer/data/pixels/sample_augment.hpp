// The per-sample training augmentations after a source has produced its (cropped, flipped) image: ColorJitter,
// then the automatic policy, on the 8-bit pixels; then random erasing, planned here and applied to the
// normalised batch (random_erasing.hpp). Every draw comes from the sample's seed, f(seed, epoch, index, copy).
//   SampleAugment augment(config.data.augment);
//   if (augment.active()) augment.apply(slot, seed);
#pragma once

#include <opencv2/core.hpp>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/auto_augment.hpp"
#include "trainer/data/pixels/random_erasing.hpp"

namespace trainer {

class SampleAugment {
 public:
  explicit SampleAugment(const AugmentConfig& config);
  bool active() const { return pixels() || erases(); }
  bool pixels() const { return jitter_.enabled() || policy_.active(); }
  bool erases() const { return erasing_.prob > 0; }
  // Colour jitter and the policy, in place on an RGB or grey image.
  void apply(cv::Mat& image, uint64_t sample_seed) const;
  EraseBox plan_erase(int64_t height, int64_t width, uint64_t sample_seed) const;
  // For logs: "trivialaugment_wide, random erasing 0.1".
  std::string describe() const;

 private:
  ColorJitterConfig jitter_;
  AutoAugmentPolicy policy_;
  RandomErasingConfig erasing_;
  std::string policy_name_;
};

}  // namespace trainer
