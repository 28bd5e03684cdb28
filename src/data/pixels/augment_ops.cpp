#include "trainer/data/pixels/augment_ops.hpp"

#include <cmath>
#include <stdexcept>

#include "trainer/data/pixels/pil_color.hpp"
#include "trainer/data/pixels/pil_geometry.hpp"

namespace trainer {

namespace {

void warp(cv::Mat& image, const PilAffine& m, const OpSettings& s) {
  cv::Mat out;
  pil_transform(image, m, s.interpolation, s.fill, out);
  out.copyTo(image);  // same size and type: writes into the caller's buffer
}

// Posterize's bits: 8 - (arange(n) / ((n - 1) / d)).round().int() in float32 (round half to even), with
// torchvision's base 8 (4 for AugMix).
std::vector<double> posterize_bits(int64_t base, int64_t num_bins, double divisions) {
  std::vector<double> out;
  const auto step = static_cast<float>(static_cast<double>(num_bins - 1) / divisions);
  for (int64_t i = 0; i < num_bins; ++i)
    out.push_back(static_cast<double>(base - static_cast<int64_t>(std::nearbyint(static_cast<float>(i) / step))));
  return out;
}

}  // namespace

const std::string& op_name(AugmentOp op) {
  static const std::array<std::string, kAugmentOpCount> names{
      "Identity", "ShearX",    "ShearY",    "TranslateX", "TranslateY",   "Rotate",   "Brightness", "Color",
      "Contrast", "Sharpness", "Posterize", "Solarize",   "AutoContrast", "Equalize", "Invert"};
  return names[static_cast<size_t>(op)];
}

void apply_op(cv::Mat& image, AugmentOp op, double magnitude, const OpSettings& s) {
  switch (op) {
    case AugmentOp::identity: return;
    case AugmentOp::shear_x:
      // torchvision passes the shear as degrees(atan(m)) and turns it back into radians.
      return warp(image, torchvision_affine_matrix({0, 0}, 0.0, {0, 0}, 1.0, {py_degrees(std::atan(magnitude)), 0.0}),
                  s);
    case AugmentOp::shear_y:
      return warp(image, torchvision_affine_matrix({0, 0}, 0.0, {0, 0}, 1.0, {0.0, py_degrees(std::atan(magnitude))}),
                  s);
    case AugmentOp::translate_x:
    case AugmentOp::translate_y: {
      // int(magnitude) pixels; F.affine's default center is the image centre.
      const auto t = static_cast<double>(static_cast<int64_t>(magnitude));
      const std::array<double, 2> center{image.cols * 0.5, image.rows * 0.5};
      const std::array<double, 2> translate =
          op == AugmentOp::translate_x ? std::array<double, 2>{t, 0} : std::array<double, 2>{0, t};
      return warp(image, torchvision_affine_matrix(center, 0.0, translate, 1.0, {0.0, 0.0}), s);
    }
    case AugmentOp::rotate: {
      cv::Mat out;
      pil_rotate(image, magnitude, s.interpolation, s.fill, out);
      out.copyTo(image);
      return;
    }
    case AugmentOp::brightness: return pil_brightness(image, static_cast<float>(1.0 + magnitude));
    case AugmentOp::color: return pil_color(image, static_cast<float>(1.0 + magnitude));
    case AugmentOp::contrast: return pil_contrast(image, static_cast<float>(1.0 + magnitude));
    case AugmentOp::sharpness: return pil_sharpness(image, static_cast<float>(1.0 + magnitude));
    case AugmentOp::posterize: return pil_posterize(image, static_cast<int>(magnitude));
    case AugmentOp::solarize: return pil_solarize(image, magnitude);
    case AugmentOp::autocontrast: return pil_autocontrast(image);
    case AugmentOp::equalize: return pil_equalize(image);
    case AugmentOp::invert: return pil_invert(image);
    case AugmentOp::count: break;
  }
  throw std::logic_error("apply_op: AugmentOp::count is not an op");
}

std::vector<double> linspace_f32(double start, double end, int64_t steps) {
  // LibTorch's CPU kernel (AVX2 build, the one x86-64 machines run): the first half counts up from start, the
  // second half down from end, each value one fused multiply-add; where whole pairs of 8-lane vectors fit, a
  // vector's lanes are its first value plus lane x step (a product and a sum, rounded separately).
  const auto s = static_cast<float>(start), e = static_cast<float>(end);
  if (steps == 1) return {static_cast<double>(s)};
  const float step = (e - s) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  auto value = [&](int64_t i) {
    return i < halfway ? std::fma(step, static_cast<float>(i), s)
                       : std::fma(-step, static_cast<float>(steps - i - 1), e);
  };
  constexpr int64_t kLanes = 8;
  std::vector<double> out(static_cast<size_t>(steps));
  int64_t i = 0;
  for (; i + 2 * kLanes <= steps; i += 2 * kLanes)
    for (int64_t first = i; first < i + 2 * kLanes; first += kLanes) {
      const float base = value(first);
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        const float offset = static_cast<float>(lane) * step;
        out[static_cast<size_t>(first + lane)] = static_cast<double>(base + offset);
      }
    }
  for (; i < steps; ++i) out[static_cast<size_t>(i)] = static_cast<double>(value(i));
  return out;
}

namespace {

using O = AugmentOp;

// AutoAugment's and RandAugment's common ops (RandAugment puts Identity first, AutoAugment Invert last).
std::vector<OpSpace> autoaugment_family_space(int64_t n, int64_t height, int64_t width) {
  const auto lin = [n](double end) { return linspace_f32(0.0, end, n); };
  return {{O::shear_x, lin(0.3), true},
          {O::shear_y, lin(0.3), true},
          {O::translate_x, lin(150.0 / 331.0 * static_cast<double>(width)), true},
          {O::translate_y, lin(150.0 / 331.0 * static_cast<double>(height)), true},
          {O::rotate, lin(30.0), true},
          {O::brightness, lin(0.9), true},
          {O::color, lin(0.9), true},
          {O::contrast, lin(0.9), true},
          {O::sharpness, lin(0.9), true},
          {O::posterize, posterize_bits(8, n, 4), false},
          {O::solarize, linspace_f32(255.0, 0.0, n), false},
          {O::autocontrast, {}, false},
          {O::equalize, {}, false}};
}

}  // namespace

std::vector<OpSpace> autoaugment_space(int64_t n, int64_t height, int64_t width) {
  auto space = autoaugment_family_space(n, height, width);
  space.push_back({O::invert, {}, false});
  return space;
}

std::vector<OpSpace> randaugment_space(int64_t n, int64_t height, int64_t width) {
  auto space = autoaugment_family_space(n, height, width);
  space.insert(space.begin(), {O::identity, {}, false});
  return space;
}

std::vector<OpSpace> trivialaugment_wide_space(int64_t n, int64_t, int64_t) {
  const auto lin = [n](double end) { return linspace_f32(0.0, end, n); };
  return {{O::identity, {}, false},
          {O::shear_x, lin(0.99), true},
          {O::shear_y, lin(0.99), true},
          {O::translate_x, lin(32.0), true},
          {O::translate_y, lin(32.0), true},
          {O::rotate, lin(135.0), true},
          {O::brightness, lin(0.99), true},
          {O::color, lin(0.99), true},
          {O::contrast, lin(0.99), true},
          {O::sharpness, lin(0.99), true},
          {O::posterize, posterize_bits(8, n, 6), false},
          {O::solarize, linspace_f32(255.0, 0.0, n), false},
          {O::autocontrast, {}, false},
          {O::equalize, {}, false}};
}

std::vector<OpSpace> augmix_space(int64_t n, int64_t height, int64_t width) {
  const auto lin = [n](double end) { return linspace_f32(0.0, end, n); };
  return {{O::shear_x, lin(0.3), true},
          {O::shear_y, lin(0.3), true},
          {O::translate_x, lin(static_cast<double>(width) / 3.0), true},
          {O::translate_y, lin(static_cast<double>(height) / 3.0), true},
          {O::rotate, lin(30.0), true},
          {O::posterize, posterize_bits(4, n, 4), false},
          {O::solarize, linspace_f32(255.0, 0.0, n), false},
          {O::autocontrast, {}, false},
          {O::equalize, {}, false},
          {O::brightness, lin(0.9), true},
          {O::color, lin(0.9), true},
          {O::contrast, lin(0.9), true},
          {O::sharpness, lin(0.9), true}};
}

}  // namespace trainer
