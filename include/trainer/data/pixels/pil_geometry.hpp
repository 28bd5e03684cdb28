// Pillow's affine warps, as torchvision's PIL functions call them (F.affine -> Image.transform(AFFINE),
// F.rotate -> Image.rotate), reproduced bit for bit on 8-bit images: the same inverse matrices (torchvision's
// _get_inverse_affine_matrix, Pillow's rotate matrix rounded to 15 decimals), the same 16.16 fixed-point
// nearest-neighbour path, the same scale-only path and the same bilinear and bicubic filters.
//   PilAffine m = torchvision_affine_matrix({0, 0}, 0.0, {0, 0}, 1.0, {shear_deg, 0.0});
//   pil_transform(src, m, Interpolation::nearest, {0, 0, 0}, out);
#pragma once

#include <opencv2/core.hpp>

#include <array>

#include "trainer/config/config.hpp"

namespace trainer {

// Output pixel centre (x + 0.5, y + 0.5) maps to source (a[0] x + a[1] y + a[2], a[3] x + a[4] y + a[5]).
struct PilAffine {
  std::array<double, 6> a{};
};

// torchvision.transforms.functional._get_inverse_affine_matrix(center, angle, translate, scale, shear), inverted.
// Angles and shears in degrees.
PilAffine torchvision_affine_matrix(std::array<double, 2> center, double angle, std::array<double, 2> translate,
                                    double scale, std::array<double, 2> shear);

// The matrix of PIL's Image.rotate(angle) about the image centre, without expand.
PilAffine pil_rotate_matrix(int width, int height, double angle);

// Python's math.degrees and math.radians (the same multiplications, so the same bits).
double py_degrees(double radians);
double py_radians(double degrees);

// Image.transform(size, AFFINE, m, filter, fillcolor=fill) into `out` (the size and type of `src`, CV_8UC1 or
// CV_8UC3, any channel order). Pixels that map outside the source take `fill`.
void pil_transform(const cv::Mat& src, const PilAffine& m, Interpolation filter, const std::array<uint8_t, 3>& fill,
                   cv::Mat& out);

// Image.rotate(angle, filter, fillcolor=fill): angles that are multiples of 360 copy, 180 turns the image.
void pil_rotate(const cv::Mat& src, double angle, Interpolation filter, const std::array<uint8_t, 3>& fill,
                cv::Mat& out);

}  // namespace trainer
