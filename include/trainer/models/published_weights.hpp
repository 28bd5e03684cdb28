// torchvision's published ImageNet weights, by the names its weight enums use (ResNet50_Weights.IMAGENET1K_V2):
// the file each name is published as, and what torchvision says about it. model.weights takes these names; the
// file name carries the first hex digits of the file's SHA-256 after its last '-' (torch.hub's rule).
//   for (const PublishedWeights& w : model_row("resnet50").weights) ...;   // IMAGENET1K_V1, IMAGENET1K_V2
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

struct PublishedWeights {
  std::string name;         // the enum member's name: IMAGENET1K_V1
  std::string file;         // the published file name: resnet50-11ad3fa6.pth
  int64_t num_params = 0;   // parameters (torchvision's metadata)
  double top1 = 0;          // ImageNet-1k top-1 (%) torchvision reports for its eval transform
  int64_t eval_resize = 0;  // that transform: the shorter side resized to this, then a 224 center crop
  int64_t num_classes = 1000;
};

// The weights torchvision publishes for `arch`, oldest first; empty for an arch it publishes none for.
std::vector<PublishedWeights> torchvision_weights(const std::string& arch);

// Where torchvision publishes them: a published file's address is this followed by its file name.
const std::string& torchvision_weights_address();

}  // namespace trainer
