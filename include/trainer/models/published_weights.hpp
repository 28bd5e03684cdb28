// torchvision's published ImageNet weights, by the names its weight enums use (ResNet50_Weights.IMAGENET1K_V2):
// the file each name is published as, and what torchvision says about it. model.weights takes these names; the
// file name carries the first hex digits of the file's SHA-256 after its last '-' (torch.hub's rule).
//   for (const PublishedWeights& w : model_row("resnet50").weights) ...;   // IMAGENET1K_V1, IMAGENET1K_V2
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

using ChannelStats = std::array<double, 3>;
inline constexpr ChannelStats kImageNetMean{0.485, 0.456, 0.406}, kImageNetStd{0.229, 0.224, 0.225};

struct PublishedWeights {
  std::string name;         // the enum member's name: IMAGENET1K_V1
  std::string file;         // the published file name: resnet50-11ad3fa6.pth
  int64_t num_params = 0;   // parameters (torchvision's metadata)
  double top1 = 0;          // ImageNet-1k top-1 (%) torchvision reports for its eval transform
  int64_t eval_resize = 0;  // that transform: the shorter side resized to this, then a center crop of eval_crop
  int64_t num_classes = 1000;
  int64_t eval_crop = 224;
  Interpolation interpolation = Interpolation::bilinear;  // of the resize (and the training crop of the recipe)
  ChannelStats mean = kImageNetMean, std = kImageNetStd;
  std::string licence;  // empty: torchvision's BSD; else where the weights' own terms are (SWAG: non-commercial)
  // Names the same file was published under before (EfficientNet B0-B7's first names carried a wrong hash prefix,
  // vision PR #8036): a file under one of them in the hub cache is used as it is.
  std::vector<std::string> earlier_files;
};

// The weights torchvision publishes for `arch`, oldest first and its DEFAULT last; empty for an arch it publishes
// none for.
std::vector<PublishedWeights> torchvision_weights(const std::string& arch);

// The entry of `weights` (an arch's) called `name`, DEFAULT being the last; null when none is.
const PublishedWeights* find_published_weights(const std::vector<PublishedWeights>& weights, const std::string& name);

// Where torchvision publishes them: a published file's address is this followed by its file name.
const std::string& torchvision_weights_address();

}  // namespace trainer
