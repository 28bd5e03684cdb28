#include "trainer/data/pixels/pil_geometry.hpp"

#include <opencv2/core.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace trainer {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Python's round(x, 15): the decimal rounding of the exact binary value, which glibc's printf also does.
double py_round15(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.15f", x);
  return std::strtod(text, nullptr);
}

// Python's float modulo: the result takes the divisor's sign.
double py_mod(double x, double m) {
  double r = std::fmod(x, m);
  if (r != 0 && ((m < 0) != (r < 0))) r += m;
  return r;
}

// Pillow's COORD and FLOOR macros.
int coord(double v) { return v < 0.0 ? -1 : static_cast<int>(v); }
int floor_int(double v) { return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v); }

void fill_pixel(uint8_t* out, int channels, const std::array<uint8_t, 3>& fill) {
  for (int c = 0; c < channels; ++c) out[c] = fill[static_cast<size_t>(c)];
}

// ImagingScaleAffine: a[1] == a[3] == 0, so columns and rows map independently (double accumulation).
void scale_affine(const cv::Mat& src, const PilAffine& m, const std::array<uint8_t, 3>& fill, cv::Mat& out) {
  const int channels = src.channels(), w = out.cols, h = out.rows;
  const auto& a = m.a;
  std::vector<int> xin(static_cast<size_t>(w), -1);
  double xo = a[2] + a[0] * 0.5, yo = a[5] + a[4] * 0.5;
  for (int x = 0; x < w; ++x) {
    const int xi = coord(xo);
    if (xi >= 0 && xi < src.cols) xin[static_cast<size_t>(x)] = xi;
    xo += a[0];
  }
  for (int y = 0; y < h; ++y) {
    const int yi = coord(yo);
    uint8_t* o = out.ptr<uint8_t>(y);
    const uint8_t* in = yi >= 0 && yi < src.rows ? src.ptr<uint8_t>(yi) : nullptr;
    for (int x = 0; x < w; ++x) {
      const int xi = xin[static_cast<size_t>(x)];
      if (in && xi >= 0) std::memcpy(o + x * channels, in + xi * channels, static_cast<size_t>(channels));
      else fill_pixel(o + x * channels, channels, fill);
    }
    yo += a[4];
  }
}

bool fits_fixed(const PilAffine& m, int x, int y) {
  const auto& a = m.a;
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

// affine_fixed: nearest neighbour in 16.16 fixed point.
void fixed_affine(const cv::Mat& src, const PilAffine& m, const std::array<uint8_t, 3>& fill, cv::Mat& out) {
  const int channels = src.channels(), w = out.cols, h = out.rows;
  const auto& a = m.a;
  auto fix = [](double v) { return floor_int(v * 65536.0 + 0.5); };
  const int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5), a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  for (int y = 0; y < h; ++y) {
    int xx = a2, yy = a5;
    uint8_t* o = out.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x, xx += a0, yy += a3) {
      const int xi = xx >> 16, yi = yy >> 16;
      if (xi >= 0 && xi < src.cols && yi >= 0 && yi < src.rows)
        std::memcpy(o + x * channels, src.ptr<uint8_t>(yi) + xi * channels, static_cast<size_t>(channels));
      else fill_pixel(o + x * channels, channels, fill);
    }
    a2 += a1;
    a5 += a4;
  }
}

// ImagingTransformAffine's floating-point nearest path (coordinates too large for 16.16).
void float_affine(const cv::Mat& src, const PilAffine& m, const std::array<uint8_t, 3>& fill, cv::Mat& out) {
  const int channels = src.channels(), w = out.cols, h = out.rows;
  const auto& a = m.a;
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5, yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  for (int y = 0; y < h; ++y) {
    double xx = xo, yy = yo;
    uint8_t* o = out.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x, xx += a[0], yy += a[3]) {
      const int xi = coord(xx), yi = coord(yy);
      if (xi >= 0 && xi < src.cols && yi >= 0 && yi < src.rows)
        std::memcpy(o + x * channels, src.ptr<uint8_t>(yi) + xi * channels, static_cast<size_t>(channels));
      else fill_pixel(o + x * channels, channels, fill);
    }
    xo += a[1];
    yo += a[4];
  }
}

int clip_index(int v, int size) { return v < 0 ? 0 : (v < size ? v : size - 1); }

// Pillow's bilinear transform filter for one channel at source point (xin, yin), already known inside.
double bilinear_at(const cv::Mat& src, int channel, double xin, double yin) {
  const int channels = src.channels();
  xin -= 0.5;
  yin -= 0.5;
  const int x = floor_int(xin), y = floor_int(yin);
  const double dx = xin - x, dy = yin - y;
  const int x0 = clip_index(x, src.cols) * channels + channel, x1 = clip_index(x + 1, src.cols) * channels + channel;
  const uint8_t* in = src.ptr<uint8_t>(clip_index(y, src.rows));
  double v1 = in[x0] + (in[x1] - in[x0]) * dx;  // (a) + ((b) - (a)) * (d), with int (b) - (a)
  double v2 = v1;
  if (y + 1 >= 0 && y + 1 < src.rows) {
    in = src.ptr<uint8_t>(y + 1);
    v2 = in[x0] + (in[x1] - in[x0]) * dx;
  }
  return v1 + (v2 - v1) * dy;
}

double bicubic_row(const uint8_t* in, const int* xs, double d) {
  const double v1 = in[xs[0]], v2 = in[xs[1]], v3 = in[xs[2]], v4 = in[xs[3]];
  const double p1 = v2, p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

double bicubic_at(const cv::Mat& src, int channel, double xin, double yin) {
  const int channels = src.channels();
  xin -= 0.5;
  yin -= 0.5;
  int x = floor_int(xin), y = floor_int(yin);
  const double dx = xin - x, dy = yin - y;
  --x;
  --y;
  int xs[4];
  for (int k = 0; k < 4; ++k) xs[k] = clip_index(x + k, src.cols) * channels + channel;
  double v[4];
  v[0] = bicubic_row(src.ptr<uint8_t>(clip_index(y, src.rows)), xs, dx);
  for (int k = 1; k < 4; ++k)
    v[k] = y + k >= 0 && y + k < src.rows ? bicubic_row(src.ptr<uint8_t>(y + k), xs, dx) : v[k - 1];
  const double p1 = v[1], p2 = -v[0] + v[2], p3 = 2 * (v[0] - v[1]) + v[2] - v[3], p4 = -v[0] + v[1] - v[2] + v[3];
  return p1 + dy * (p2 + dy * (p3 + dy * p4));
}

// ImagingGenericTransform with the bilinear or bicubic filter.
void filtered_affine(const cv::Mat& src, const PilAffine& m, bool bicubic, const std::array<uint8_t, 3>& fill,
                     cv::Mat& out) {
  const int channels = src.channels(), w = out.cols, h = out.rows;
  const auto& a = m.a;
  for (int y = 0; y < h; ++y) {
    uint8_t* o = out.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x) {
      const double xin = x + 0.5, yin = y + 0.5;
      const double xs = a[0] * xin + a[1] * yin + a[2], ys = a[3] * xin + a[4] * yin + a[5];
      if (xs < 0.0 || xs >= src.cols || ys < 0.0 || ys >= src.rows) {
        fill_pixel(o + x * channels, channels, fill);
        continue;
      }
      for (int c = 0; c < channels; ++c) {
        if (!bicubic) {
          o[x * channels + c] = static_cast<uint8_t>(bilinear_at(src, c, xs, ys));
        } else {
          const double v = bicubic_at(src, c, xs, ys);
          o[x * channels + c] = v <= 0.0 ? 0 : v >= 255.0 ? 255 : static_cast<uint8_t>(v);
        }
      }
    }
  }
}

}  // namespace

double py_degrees(double radians) { return radians * (180.0 / kPi); }
double py_radians(double degrees) { return degrees * (kPi / 180.0); }

PilAffine torchvision_affine_matrix(std::array<double, 2> center, double angle, std::array<double, 2> translate,
                                    double scale, std::array<double, 2> shear) {
  const double rot = py_radians(angle), sx = py_radians(shear[0]), sy = py_radians(shear[1]);
  const double cx = center[0], cy = center[1], tx = translate[0], ty = translate[1];
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  PilAffine m{{d, -b, 0.0, -c, a, 0.0}};
  for (double& v : m.a) v = v / scale;
  m.a[2] += m.a[0] * (-cx - tx) + m.a[1] * (-cy - ty);
  m.a[5] += m.a[3] * (-cx - tx) + m.a[4] * (-cy - ty);
  m.a[2] += cx;
  m.a[5] += cy;
  return m;
}

PilAffine pil_rotate_matrix(int width, int height, double angle) {
  const double cx = width / 2.0, cy = height / 2.0;
  const double r = -py_radians(angle);
  PilAffine m{
      {py_round15(std::cos(r)), py_round15(std::sin(r)), 0.0, py_round15(-std::sin(r)), py_round15(std::cos(r)), 0.0}};
  const double x = -cx, y = -cy;
  const double c = m.a[0] * x + m.a[1] * y + m.a[2], f = m.a[3] * x + m.a[4] * y + m.a[5];
  m.a[2] = c + cx;
  m.a[5] = f + cy;
  return m;
}

void pil_transform(const cv::Mat& src, const PilAffine& m, Interpolation filter, const std::array<uint8_t, 3>& fill,
                   cv::Mat& out) {
  out.create(src.rows, src.cols, src.type());
  if (filter != Interpolation::nearest) {
    filtered_affine(src, m, filter == Interpolation::bicubic, fill, out);
  } else if (m.a[1] == 0 && m.a[3] == 0) {
    scale_affine(src, m, fill, out);
  } else if (fits_fixed(m, 0, 0) && fits_fixed(m, src.cols, src.rows) && fits_fixed(m, 0, src.rows) &&
             fits_fixed(m, src.cols, 0)) {
    fixed_affine(src, m, fill, out);
  } else {
    float_affine(src, m, fill, out);
  }
}

void pil_rotate(const cv::Mat& src, double angle, Interpolation filter, const std::array<uint8_t, 3>& fill,
                cv::Mat& out) {
  const double a = py_mod(angle, 360.0);
  if (a == 0) {
    src.copyTo(out);
  } else if (a == 180) {
    cv::rotate(src, out, cv::ROTATE_180);
  } else if ((a == 90 || a == 270) && src.cols == src.rows) {
    cv::rotate(src, out, a == 90 ? cv::ROTATE_90_COUNTERCLOCKWISE : cv::ROTATE_90_CLOCKWISE);
  } else {
    pil_transform(src, pil_rotate_matrix(src.cols, src.rows, a), filter, fill, out);
  }
}

}  // namespace trainer
