#include "trainer/data/pixels/resample.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TRAINER_RESAMPLE_X86 1
#endif

namespace trainer {

namespace {

// Pillow's fixed point for 8-bit results: 32 bits less 8 for the value and 2 for filters with negative lobes.
constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

double bilinear(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic(double x) {  // Keys' cubic convolution with a = -0.5
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

uint8_t clip_fixed_point(int32_t v) { return static_cast<uint8_t>(std::clamp(v >> kPrecisionBits, 0, 255)); }

// Per output pixel: the first source pixel, how many follow, and their fixed-point weights (ksize per pixel).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, with the box start at first * scale. The arithmetic
// follows Pillow's order so that every weight rounds the same way.
Coefficients coefficients(int in_size, ResampleAxis axis, int out_size, ResampleFilter filter) {
  const double base_support = filter == ResampleFilter::bilinear ? 1.0 : 2.0;
  const double scale = axis.scale;
  const double filterscale = std::max(scale, 1.0);
  const double support = base_support * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(out_size));
  c.count.resize(static_cast<size_t>(out_size));
  c.weights.assign(static_cast<size_t>(out_size) * static_cast<size_t>(c.ksize), 0);
  std::vector<double> k(static_cast<size_t>(c.ksize));
  const double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(axis.first + xx) + 0.5) * scale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double arg = (static_cast<double>(x + xmin) - center + 0.5) * ss;
      k[static_cast<size_t>(x)] = filter == ResampleFilter::bilinear ? bilinear(arg) : bicubic(arg);
      ww += k[static_cast<size_t>(x)];
    }
    int32_t* w = &c.weights[static_cast<size_t>(xx) * static_cast<size_t>(c.ksize)];
    for (int x = 0; x < xmax; ++x) {
      const double v = (ww != 0.0 ? k[static_cast<size_t>(x)] / ww : k[static_cast<size_t>(x)]) * (1 << kPrecisionBits);
      w[x] = static_cast<int32_t>(v < 0 ? -0.5 + v : 0.5 + v);
    }
    c.first[static_cast<size_t>(xx)] = xmin;
    c.count[static_cast<size_t>(xx)] = std::max(xmax, 0);
  }
  return c;
}

// One output pixel of the horizontal pass: n taps from p (C channels per pixel).
template <int C>
void horizontal_pixel(const uint8_t* p, const int32_t* k, int n, uint8_t* o) {
  int32_t s[C];
  for (int ch = 0; ch < C; ++ch) s[ch] = kHalf;
  for (int t = 0; t < n; ++t)
    for (int ch = 0; ch < C; ++ch) s[ch] += static_cast<int32_t>(p[t * C + ch]) * k[t];
  for (int ch = 0; ch < C; ++ch) o[ch] = clip_fixed_point(s[ch]);
}

#ifdef TRAINER_RESAMPLE_X86
// The same for three channels with SSE4.1: a pixel's bytes widened to four 32-bit lanes (the fourth, the next
// pixel's first byte, is computed and dropped), one multiply-add per tap instead of three. Reads one byte past
// the last tap, so the caller keeps it off the final pixel of the image's memory.
__attribute__((target("sse4.1"))) void horizontal_row3_sse41(const uint8_t* in, const Coefficients& cx, int out_w,
                                                             int safe_w, uint8_t* o) {
  const __m128i half = _mm_set1_epi32(kHalf), zero = _mm_setzero_si128(), max = _mm_set1_epi32(255);
  for (int xx = 0; xx < out_w; ++xx) {
    const int first = cx.first[static_cast<size_t>(xx)], n = cx.count[static_cast<size_t>(xx)];
    const int32_t* k = &cx.weights[static_cast<size_t>(xx) * static_cast<size_t>(cx.ksize)];
    if (first + n > safe_w) {
      horizontal_pixel<3>(in + static_cast<size_t>(first) * 3, k, n, o + xx * 3);
      continue;
    }
    const uint8_t* p = in + static_cast<size_t>(first) * 3;
    __m128i s = half;
    for (int t = 0; t < n; ++t) {
      int32_t bytes;
      std::memcpy(&bytes, p + t * 3, sizeof(bytes));
      const __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes));
      s = _mm_add_epi32(s, _mm_mullo_epi32(px, _mm_set1_epi32(k[t])));
    }
    s = _mm_min_epi32(_mm_max_epi32(_mm_srai_epi32(s, kPrecisionBits), zero), max);
    o[xx * 3 + 0] = static_cast<uint8_t>(_mm_extract_epi32(s, 0));
    o[xx * 3 + 1] = static_cast<uint8_t>(_mm_extract_epi32(s, 1));
    o[xx * 3 + 2] = static_cast<uint8_t>(_mm_extract_epi32(s, 2));
  }
}

bool has_sse41() {
  static const bool yes = __builtin_cpu_supports("sse4.1");
  return yes;
}
#endif

// Rows [row0, row0 + rows) of src, resampled horizontally into 8-bit rows of out_w pixels.
template <int C>
void horizontal_pass(const cv::Mat& src, int row0, int rows, const Coefficients& cx, int out_w, uint8_t* tmp) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in = src.ptr<uint8_t>(row0 + r);
    uint8_t* o = tmp + static_cast<size_t>(r) * static_cast<size_t>(out_w) * C;
#ifdef TRAINER_RESAMPLE_X86
    if (C == 3 && has_sse41()) {
      // Every pixel but the last of the image's memory may be read one byte beyond.
      const bool last_row = in + static_cast<size_t>(src.cols) * 3 >= src.dataend;
      horizontal_row3_sse41(in, cx, out_w, last_row ? src.cols - 1 : src.cols, o);
      continue;
    }
#endif
    for (int xx = 0; xx < out_w; ++xx)
      horizontal_pixel<C>(in + static_cast<size_t>(cx.first[static_cast<size_t>(xx)]) * C,
                          &cx.weights[static_cast<size_t>(xx) * static_cast<size_t>(cx.ksize)],
                          cx.count[static_cast<size_t>(xx)], o + xx * C);
  }
}

// acc[j] += row[j] * k for a whole row: the vertical pass's inner loop, compiled for AVX2 too (32-bit
// multiplies are SSE4.1 and later; the x86-64 baseline would emulate them).
#ifdef TRAINER_RESAMPLE_X86
__attribute__((target_clones("avx2", "default")))
#endif
void accumulate_row(int32_t* acc, const uint8_t* row, int32_t k, size_t n) {
  for (size_t j = 0; j < n; ++j) acc[j] += static_cast<int32_t>(row[j]) * k;
}

#ifdef TRAINER_RESAMPLE_X86
__attribute__((target_clones("avx2", "default")))
#endif
void clip_row(const int32_t* acc, uint8_t* out, size_t n) {
  for (size_t j = 0; j < n; ++j) out[j] = static_cast<uint8_t>(std::clamp(acc[j] >> kPrecisionBits, 0, 255));
}

// Vertical pass over the horizontally resampled rows, writing the final (mirrored, channel-swapped) pixels.
template <int C>
void vertical_pass(const uint8_t* tmp, int out_w, const Coefficients& cy, int row_offset, int out_h, bool mirror,
                   bool swap_rb, cv::Mat& out) {
  const size_t row_len = static_cast<size_t>(out_w) * C;
  std::vector<int32_t> acc(row_len);
  std::vector<uint8_t> line(row_len);
  for (int yy = 0; yy < out_h; ++yy) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const int32_t* k = &cy.weights[static_cast<size_t>(yy) * static_cast<size_t>(cy.ksize)];
    const int first = cy.first[static_cast<size_t>(yy)] - row_offset;
    for (int t = 0; t < cy.count[static_cast<size_t>(yy)]; ++t)
      accumulate_row(acc.data(), tmp + static_cast<size_t>(first + t) * row_len, k[t], row_len);
    uint8_t* o = out.ptr<uint8_t>(yy);
    if (!mirror && !swap_rb) {
      clip_row(acc.data(), o, row_len);
      continue;
    }
    clip_row(acc.data(), line.data(), row_len);
    for (int xx = 0; xx < out_w; ++xx) {
      const int dst = mirror ? out_w - 1 - xx : xx;
      for (int ch = 0; ch < C; ++ch) o[dst * C + (swap_rb ? C - 1 - ch : ch)] = line[static_cast<size_t>(xx * C + ch)];
    }
  }
}

template <int C>
void resample_channels(const cv::Mat& src, ResampleFilter filter, ResampleAxis x, ResampleAxis y, bool mirror,
                       bool swap_rb, cv::Mat& out) {
  const Coefficients cx = coefficients(src.cols, x, out.cols, filter);
  const Coefficients cy = coefficients(src.rows, y, out.rows, filter);
  // Only the source rows that the vertical pass reads go through the horizontal pass, as in Pillow.
  const int row0 = cy.first.front();
  const int row_end = cy.first.back() + cy.count.back();
  std::vector<uint8_t> tmp(static_cast<size_t>(std::max(row_end - row0, 0)) * static_cast<size_t>(out.cols) * C);
  horizontal_pass<C>(src, row0, row_end - row0, cx, out.cols, tmp.data());
  vertical_pass<C>(tmp.data(), out.cols, cy, row0, out.rows, mirror, swap_rb, out);
}

}  // namespace

void resample(const cv::Mat& src, ResampleFilter filter, ResampleAxis x, ResampleAxis y, bool mirror, bool swap_rb,
              cv::Mat& out) {
  if (src.depth() != CV_8U || out.type() != src.type() || (src.channels() != 1 && src.channels() != 3) || src.empty() ||
      out.empty())
    throw std::invalid_argument("resample: needs non-empty 8-bit 1- or 3-channel images of the same type");
  if (src.channels() == 1) {
    resample_channels<1>(src, filter, x, y, mirror, false, out);
  } else {
    resample_channels<3>(src, filter, x, y, mirror, swap_rb, out);
  }
}

}  // namespace trainer
