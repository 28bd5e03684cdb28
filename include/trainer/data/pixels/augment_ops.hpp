// The operations of torchvision's automatic augmentation policies (autoaugment._apply_op) and their magnitude
// tables (_augmentation_space of AutoAugment, RandAugment, TrivialAugmentWide and AugMix, torchvision 0.14), on
// 8-bit RGB or grey images with Pillow's arithmetic (pil_geometry, pil_color), so that an op at a magnitude gives
// torchvision's pixels on a PIL image.
//   apply_op(image, AugmentOp::rotate, -12.0, {Interpolation::nearest, {0, 0, 0}});
//   auto space = trivialaugment_wide_space(31, 224, 224);   // a policy row's table (data/auto_augment.hpp)
#pragma once

#include <opencv2/core.hpp>

#include <array>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

// `count` is not an op: it numbers them, so tables indexed by op (the names) are sized by the enum and tests loop
// over every op.
enum class AugmentOp {
  identity,
  shear_x,
  shear_y,
  translate_x,
  translate_y,
  rotate,
  brightness,
  color,
  contrast,
  sharpness,
  posterize,
  solarize,
  autocontrast,
  equalize,
  invert,
  count
};
inline constexpr size_t kAugmentOpCount = static_cast<size_t>(AugmentOp::count);

// torchvision's op name ("ShearX", "AutoContrast", ...).
const std::string& op_name(AugmentOp op);

struct OpSettings {
  Interpolation interpolation = Interpolation::nearest;  // geometric ops
  std::array<uint8_t, 3> fill{0, 0, 0};                  // pixels from outside the image
};

// _apply_op(img, op, magnitude, interpolation, fill), in place.
void apply_op(cv::Mat& image, AugmentOp op, double magnitude, const OpSettings& settings);

// One op of a policy's space: its magnitudes (empty: the op takes none) and whether a random sign applies.
struct OpSpace {
  AugmentOp op;
  std::vector<double> magnitudes;
  bool is_signed = false;
};

// Each policy's ops in torchvision's order (a policy picks by index) with their magnitudes as torchvision computes
// them (float32 linspace, so the same values), for `num_bins` magnitude bins and an image of height x width.
std::vector<OpSpace> autoaugment_space(int64_t num_bins, int64_t height, int64_t width);
std::vector<OpSpace> randaugment_space(int64_t num_bins, int64_t height, int64_t width);
std::vector<OpSpace> trivialaugment_wide_space(int64_t num_bins, int64_t height, int64_t width);
std::vector<OpSpace> augmix_space(int64_t num_bins, int64_t height, int64_t width);

// torch.linspace(start, end, steps) in float32, as doubles.
std::vector<double> linspace_f32(double start, double end, int64_t steps);

}  // namespace trainer
