#include "trainer/models/published_weights.hpp"

#include <utility>

namespace trainer {

// From torchvision's weight enums (models/resnet.py): url, num_params, ImageNet-1k acc@1, resize_size.
std::vector<PublishedWeights> torchvision_weights(const std::string& arch) {
  static const std::vector<std::pair<std::string, PublishedWeights>> table{
      {"resnet18", {"IMAGENET1K_V1", "resnet18-f37072fd.pth", 11689512, 69.758, 256}},
      {"resnet34", {"IMAGENET1K_V1", "resnet34-b627a593.pth", 21797672, 73.314, 256}},
      {"resnet50", {"IMAGENET1K_V1", "resnet50-0676ba61.pth", 25557032, 76.130, 256}},
      {"resnet50", {"IMAGENET1K_V2", "resnet50-11ad3fa6.pth", 25557032, 80.858, 232}},
      {"resnet101", {"IMAGENET1K_V1", "resnet101-63fe2227.pth", 44549160, 77.374, 256}},
      {"resnet101", {"IMAGENET1K_V2", "resnet101-cd907fc2.pth", 44549160, 81.886, 232}},
      {"resnet152", {"IMAGENET1K_V1", "resnet152-394f9c45.pth", 60192808, 78.312, 256}},
      {"resnet152", {"IMAGENET1K_V2", "resnet152-f82ba261.pth", 60192808, 82.284, 232}},
      {"resnext50_32x4d", {"IMAGENET1K_V1", "resnext50_32x4d-7cdf4587.pth", 25028904, 77.618, 256}},
      {"resnext50_32x4d", {"IMAGENET1K_V2", "resnext50_32x4d-1a0047aa.pth", 25028904, 81.198, 232}},
      {"resnext101_32x8d", {"IMAGENET1K_V1", "resnext101_32x8d-8ba56ff5.pth", 88791336, 79.312, 256}},
      {"resnext101_32x8d", {"IMAGENET1K_V2", "resnext101_32x8d-110c445d.pth", 88791336, 82.834, 232}},
      {"resnext101_64x4d", {"IMAGENET1K_V1", "resnext101_64x4d-173b62eb.pth", 83455272, 83.246, 232}},
      {"wide_resnet50_2", {"IMAGENET1K_V1", "wide_resnet50_2-95faca4d.pth", 68883240, 78.468, 256}},
      {"wide_resnet50_2", {"IMAGENET1K_V2", "wide_resnet50_2-9ba9bcbe.pth", 68883240, 81.602, 232}},
      {"wide_resnet101_2", {"IMAGENET1K_V1", "wide_resnet101_2-32ee1156.pth", 126886696, 78.848, 256}},
      {"wide_resnet101_2", {"IMAGENET1K_V2", "wide_resnet101_2-d733dc28.pth", 126886696, 82.510, 232}},
  };
  std::vector<PublishedWeights> found;
  for (const auto& [name, weights] : table)
    if (name == arch) found.push_back(weights);
  return found;
}

const std::string& torchvision_weights_address() {
  static const std::string address = "https://download.pytorch.org/models/";
  return address;
}

}  // namespace trainer
