#include "trainer/models/published_weights.hpp"

#include <utility>

namespace trainer {

namespace {

constexpr ChannelStats kHalfStats{0.5, 0.5, 0.5};
const char* const kSwagLicence =
    "SWAG weights: CC-BY-NC 4.0, non-commercial use only (https://github.com/facebookresearch/SWAG/blob/main/LICENSE)";

}  // namespace

// From torchvision 0.14's weight enums (models/resnet.py, convnext.py, efficientnet.py, mobilenetv3.py, regnet.py,
// vision_transformer.py, swin_transformer.py):
// name, file of the url, num_params, ImageNet-1k acc@1, then its transforms: resize_size, crop_size, interpolation,
// mean and std; the EfficientNet B0-B7 files under the names torchvision publishes them under since PR #8036.
std::vector<PublishedWeights> torchvision_weights(const std::string& arch) {
  static const std::vector<std::pair<std::string, PublishedWeights>> table{
      {"resnet18", {"IMAGENET1K_V1", "resnet18-f37072fd.pth", 11689512, 69.758, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnet34", {"IMAGENET1K_V1", "resnet34-b627a593.pth", 21797672, 73.314, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnet50", {"IMAGENET1K_V1", "resnet50-0676ba61.pth", 25557032, 76.130, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnet50", {"IMAGENET1K_V2", "resnet50-11ad3fa6.pth", 25557032, 80.858, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnet101", {"IMAGENET1K_V1", "resnet101-63fe2227.pth", 44549160, 77.374, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnet101", {"IMAGENET1K_V2", "resnet101-cd907fc2.pth", 44549160, 81.886, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnet152", {"IMAGENET1K_V1", "resnet152-394f9c45.pth", 60192808, 78.312, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnet152", {"IMAGENET1K_V2", "resnet152-f82ba261.pth", 60192808, 82.284, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnext50_32x4d", {"IMAGENET1K_V1", "resnext50_32x4d-7cdf4587.pth", 25028904, 77.618, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnext50_32x4d", {"IMAGENET1K_V2", "resnext50_32x4d-1a0047aa.pth", 25028904, 81.198, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnext101_32x8d", {"IMAGENET1K_V1", "resnext101_32x8d-8ba56ff5.pth", 88791336, 79.312, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnext101_32x8d", {"IMAGENET1K_V2", "resnext101_32x8d-110c445d.pth", 88791336, 82.834, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"resnext101_64x4d", {"IMAGENET1K_V1", "resnext101_64x4d-173b62eb.pth", 83455272, 83.246, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"wide_resnet50_2", {"IMAGENET1K_V1", "wide_resnet50_2-95faca4d.pth", 68883240, 78.468, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"wide_resnet50_2", {"IMAGENET1K_V2", "wide_resnet50_2-9ba9bcbe.pth", 68883240, 81.602, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"wide_resnet101_2", {"IMAGENET1K_V1", "wide_resnet101_2-32ee1156.pth", 126886696, 78.848, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"wide_resnet101_2", {"IMAGENET1K_V2", "wide_resnet101_2-d733dc28.pth", 126886696, 82.510, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"convnext_tiny", {"IMAGENET1K_V1", "convnext_tiny-983f1562.pth", 28589128, 82.52, 236, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"convnext_small", {"IMAGENET1K_V1", "convnext_small-0c510722.pth", 50223688, 83.616, 230, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"convnext_base", {"IMAGENET1K_V1", "convnext_base-6075fbad.pth", 88591464, 84.062, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"convnext_large", {"IMAGENET1K_V1", "convnext_large-ea097f82.pth", 197767336, 84.414, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"efficientnet_b0", {"IMAGENET1K_V1", "efficientnet_b0_rwightman-7f5810bc.pth", 5288548, 77.692, 256, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b0_rwightman-3dd342df.pth"}}},
      {"efficientnet_b1", {"IMAGENET1K_V1", "efficientnet_b1_rwightman-bac287d4.pth", 7794184, 78.642, 256, 1000, 240, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b1_rwightman-533bc792.pth"}}},
      {"efficientnet_b1", {"IMAGENET1K_V2", "efficientnet_b1-c27df63c.pth", 7794184, 79.838, 255, 1000, 240, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"efficientnet_b2", {"IMAGENET1K_V1", "efficientnet_b2_rwightman-c35c1473.pth", 9109994, 80.608, 288, 1000, 288, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b2_rwightman-bcdf34b7.pth"}}},
      {"efficientnet_b3", {"IMAGENET1K_V1", "efficientnet_b3_rwightman-b3899882.pth", 12233232, 82.008, 320, 1000, 300, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b3_rwightman-cf984f9c.pth"}}},
      {"efficientnet_b4", {"IMAGENET1K_V1", "efficientnet_b4_rwightman-23ab8bcd.pth", 19341616, 83.384, 384, 1000, 380, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b4_rwightman-7eb33cd5.pth"}}},
      {"efficientnet_b5", {"IMAGENET1K_V1", "efficientnet_b5_lukemelas-1a07897c.pth", 30389784, 83.444, 456, 1000, 456, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b5_lukemelas-b6417697.pth"}}},
      {"efficientnet_b6", {"IMAGENET1K_V1", "efficientnet_b6_lukemelas-24a108a5.pth", 43040704, 84.008, 528, 1000, 528, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b6_lukemelas-c76e70fd.pth"}}},
      {"efficientnet_b7", {"IMAGENET1K_V1", "efficientnet_b7_lukemelas-c5b4e57e.pth", 66347960, 84.122, 600, 1000, 600, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {"efficientnet_b7_lukemelas-dcc49843.pth"}}},
      {"efficientnet_v2_s", {"IMAGENET1K_V1", "efficientnet_v2_s-dd5fe13b.pth", 21458488, 84.228, 384, 1000, 384, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"efficientnet_v2_m", {"IMAGENET1K_V1", "efficientnet_v2_m-dc08266a.pth", 54139356, 85.112, 480, 1000, 480, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"efficientnet_v2_l", {"IMAGENET1K_V1", "efficientnet_v2_l-59c71312.pth", 118515272, 85.808, 480, 1000, 480, Interpolation::bicubic, kHalfStats, kHalfStats, "", {}}},
      {"mobilenet_v3_large", {"IMAGENET1K_V1", "mobilenet_v3_large-8738ca79.pth", 5483032, 74.042, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"mobilenet_v3_large", {"IMAGENET1K_V2", "mobilenet_v3_large-5c1a4163.pth", 5483032, 75.274, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"mobilenet_v3_small", {"IMAGENET1K_V1", "mobilenet_v3_small-047dcff4.pth", 2542856, 67.668, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_400mf", {"IMAGENET1K_V1", "regnet_y_400mf-c65dace8.pth", 4344144, 74.046, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_400mf", {"IMAGENET1K_V2", "regnet_y_400mf-e6988f5f.pth", 4344144, 75.804, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_800mf", {"IMAGENET1K_V1", "regnet_y_800mf-1b27b58c.pth", 6432512, 76.42, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_800mf", {"IMAGENET1K_V2", "regnet_y_800mf-58fc7688.pth", 6432512, 78.828, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_1_6gf", {"IMAGENET1K_V1", "regnet_y_1_6gf-b11a554e.pth", 11202430, 77.95, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_1_6gf", {"IMAGENET1K_V2", "regnet_y_1_6gf-0d7bc02a.pth", 11202430, 80.876, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_3_2gf", {"IMAGENET1K_V1", "regnet_y_3_2gf-b5a9779c.pth", 19436338, 78.948, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_3_2gf", {"IMAGENET1K_V2", "regnet_y_3_2gf-9180c971.pth", 19436338, 81.982, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_8gf", {"IMAGENET1K_V1", "regnet_y_8gf-d0d0e4a8.pth", 39381472, 80.032, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_8gf", {"IMAGENET1K_V2", "regnet_y_8gf-dc2b1b54.pth", 39381472, 82.828, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_16gf", {"IMAGENET1K_V1", "regnet_y_16gf-9e6ed7dd.pth", 83590140, 80.424, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_16gf", {"IMAGENET1K_SWAG_E2E_V1", "regnet_y_16gf_swag-43afe44d.pth", 83590140, 86.012, 384, 1000, 384, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"regnet_y_16gf", {"IMAGENET1K_SWAG_LINEAR_V1", "regnet_y_16gf_lc_swag-f3ec0043.pth", 83590140, 83.976, 224, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"regnet_y_16gf", {"IMAGENET1K_V2", "regnet_y_16gf-3e4a00f9.pth", 83590140, 82.886, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_32gf", {"IMAGENET1K_V1", "regnet_y_32gf-4dee3f7a.pth", 145046770, 80.878, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_32gf", {"IMAGENET1K_SWAG_E2E_V1", "regnet_y_32gf_swag-04fdfa75.pth", 145046770, 86.838, 384, 1000, 384, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"regnet_y_32gf", {"IMAGENET1K_SWAG_LINEAR_V1", "regnet_y_32gf_lc_swag-e1583746.pth", 145046770, 84.622, 224, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"regnet_y_32gf", {"IMAGENET1K_V2", "regnet_y_32gf-8db6d4b5.pth", 145046770, 83.368, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_400mf", {"IMAGENET1K_V1", "regnet_x_400mf-adf1edd5.pth", 5495976, 72.834, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_400mf", {"IMAGENET1K_V2", "regnet_x_400mf-62229a5f.pth", 5495976, 74.864, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_800mf", {"IMAGENET1K_V1", "regnet_x_800mf-ad17e45c.pth", 7259656, 75.212, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_800mf", {"IMAGENET1K_V2", "regnet_x_800mf-94a99ebd.pth", 7259656, 77.522, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_1_6gf", {"IMAGENET1K_V1", "regnet_x_1_6gf-e3633e7f.pth", 9190136, 77.04, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_1_6gf", {"IMAGENET1K_V2", "regnet_x_1_6gf-a12f2b72.pth", 9190136, 79.668, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_3_2gf", {"IMAGENET1K_V1", "regnet_x_3_2gf-f342aeae.pth", 15296552, 78.364, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_3_2gf", {"IMAGENET1K_V2", "regnet_x_3_2gf-7071aa85.pth", 15296552, 81.196, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_8gf", {"IMAGENET1K_V1", "regnet_x_8gf-03ceed89.pth", 39572648, 79.344, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_8gf", {"IMAGENET1K_V2", "regnet_x_8gf-2b70d774.pth", 39572648, 81.682, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_16gf", {"IMAGENET1K_V1", "regnet_x_16gf-2007eb11.pth", 54278536, 80.058, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_16gf", {"IMAGENET1K_V2", "regnet_x_16gf-ba3796d7.pth", 54278536, 82.716, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_32gf", {"IMAGENET1K_V1", "regnet_x_32gf-9d47f8d0.pth", 107811560, 80.622, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_x_32gf", {"IMAGENET1K_V2", "regnet_x_32gf-6eb8fdc6.pth", 107811560, 83.014, 232, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"regnet_y_128gf", {"IMAGENET1K_SWAG_LINEAR_V1", "regnet_y_128gf_lc_swag-cbe8ce12.pth", 644812894, 86.068, 224, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"regnet_y_128gf", {"IMAGENET1K_SWAG_E2E_V1", "regnet_y_128gf_swag-c8ce3e52.pth", 644812894, 88.228, 384, 1000, 384, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"vit_b_16", {"IMAGENET1K_SWAG_E2E_V1", "vit_b_16_swag-9ac1b537.pth", 86859496, 85.304, 384, 1000, 384, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"vit_b_16", {"IMAGENET1K_SWAG_LINEAR_V1", "vit_b_16_lc_swag-4e70ced5.pth", 86567656, 81.886, 224, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"vit_b_16", {"IMAGENET1K_V1", "vit_b_16-c867db91.pth", 86567656, 81.072, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"vit_b_32", {"IMAGENET1K_V1", "vit_b_32-d86f8d99.pth", 88224232, 75.912, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"vit_l_16", {"IMAGENET1K_SWAG_E2E_V1", "vit_l_16_swag-4f3808c9.pth", 305174504, 88.064, 512, 1000, 512, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"vit_l_16", {"IMAGENET1K_SWAG_LINEAR_V1", "vit_l_16_lc_swag-4d563306.pth", 304326632, 85.146, 224, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"vit_l_16", {"IMAGENET1K_V1", "vit_l_16-852ce7e3.pth", 304326632, 79.662, 242, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"vit_l_32", {"IMAGENET1K_V1", "vit_l_32-c7638314.pth", 306535400, 76.972, 256, 1000, 224, Interpolation::bilinear, kImageNetMean, kImageNetStd, "", {}}},
      {"vit_h_14", {"IMAGENET1K_SWAG_LINEAR_V1", "vit_h_14_lc_swag-c1eb923e.pth", 632045800, 85.708, 224, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"vit_h_14", {"IMAGENET1K_SWAG_E2E_V1", "vit_h_14_swag-80465313.pth", 633470440, 88.552, 518, 1000, 518, Interpolation::bicubic, kImageNetMean, kImageNetStd, kSwagLicence, {}}},
      {"swin_t", {"IMAGENET1K_V1", "swin_t-704ceda3.pth", 28288354, 81.474, 232, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {}}},
      {"swin_s", {"IMAGENET1K_V1", "swin_s-5e29d889.pth", 49606258, 83.196, 246, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {}}},
      {"swin_b", {"IMAGENET1K_V1", "swin_b-68c6b09e.pth", 87768224, 83.582, 238, 1000, 224, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {}}},
      {"swin_v2_t", {"IMAGENET1K_V1", "swin_v2_t-b137f0e2.pth", 28351570, 82.072, 260, 1000, 256, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {}}},
      {"swin_v2_s", {"IMAGENET1K_V1", "swin_v2_s-637d8ceb.pth", 49737442, 83.712, 260, 1000, 256, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {}}},
      {"swin_v2_b", {"IMAGENET1K_V1", "swin_v2_b-781e5279.pth", 87930848, 84.112, 272, 1000, 256, Interpolation::bicubic, kImageNetMean, kImageNetStd, "", {}}},
  };
  std::vector<PublishedWeights> found;
  for (const auto& [name, weights] : table)
    if (name == arch) found.push_back(weights);
  return found;
}

const PublishedWeights* find_published_weights(const std::vector<PublishedWeights>& weights, const std::string& name) {
  if (name == "DEFAULT" && !weights.empty()) return &weights.back();
  for (const auto& w : weights)
    if (w.name == name) return &w;
  return nullptr;
}

const std::string& torchvision_weights_address() {
  static const std::string address = "https://download.pytorch.org/models/";
  return address;
}

}  // namespace trainer
