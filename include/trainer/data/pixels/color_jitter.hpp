// torchvision's ColorJitter on one 8-bit image (RGB or grey): the brightness, contrast, saturation and hue
// factors drawn uniformly, applied in a random order (torch.randperm(4) in torchvision), with Pillow's arithmetic.
//   SplitMix64 rng(sample_seed);
//   apply_color_jitter(image, config.data.augment.color_jitter, rng);
#pragma once

#include <opencv2/core.hpp>

#include "trainer/config/config.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

void apply_color_jitter(cv::Mat& image, const ColorJitterConfig& config, SplitMix64& rng);

}  // namespace trainer
