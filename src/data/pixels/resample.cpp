#include "trainer/data/pixels/resample.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainer/data/pixels/resample_x86.hpp"

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

double filter_support(ResampleFilter filter, double scale) {
  return (filter == ResampleFilter::bilinear ? 1.0 : 2.0) * std::max(scale, 1.0);
}

// Pillow's first source pixel and count for the output pixel centred on `center`.
std::pair<int, int> taps(double center, double support, int in_size) {
  const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
  const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
  return {xmin, xmax};
}

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, with the box start at first * scale. The arithmetic
// follows Pillow's order so that every weight rounds the same way. `src_size`: the pixels there are along the axis
// in the image given (a region of the source when axis.full is set); `first` is then relative to it.
void coefficients(int src_size, ResampleAxis axis, int out_size, ResampleFilter filter, Coefficients& c,
                  std::vector<double>& k) {
  const int in_size = axis.full > 0 ? static_cast<int>(axis.full) : src_size;
  const double scale = axis.scale;
  const double filterscale = std::max(scale, 1.0);
  const double support = filter_support(filter, scale);
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(out_size));
  c.count.resize(static_cast<size_t>(out_size));
  c.weights.assign(static_cast<size_t>(out_size) * static_cast<size_t>(c.ksize), 0);
  k.resize(static_cast<size_t>(c.ksize));
  const double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(axis.first + xx) + 0.5) * scale;
    const auto [xmin, xmax] = taps(center, support, in_size);
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
    const int first = xmin - static_cast<int>(axis.offset);
    if (first < 0 || first + std::max(xmax, 0) > src_size)
      throw std::logic_error("resample: the region given misses source pixels that output pixel " + std::to_string(xx) +
                             " reads");
    c.first[static_cast<size_t>(xx)] = first;
    c.count[static_cast<size_t>(xx)] = std::max(xmax, 0);
  }
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

// Rows [row0, row0 + rows) of src, resampled horizontally into 8-bit rows of out_w pixels.
template <int C>
void horizontal_pass(const cv::Mat& src, int row0, int rows, const Coefficients& cx, int out_w, uint8_t* tmp) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in = src.ptr<uint8_t>(row0 + r);
    uint8_t* o = tmp + static_cast<size_t>(r) * static_cast<size_t>(out_w) * C;
    if (C == 3 && x86_features().sse41) {
      // Every pixel but the last of the image's memory may be read one byte beyond.
      const bool last_row = in + static_cast<size_t>(src.cols) * 3 >= src.dataend;
      const int safe_w = last_row ? src.cols - 1 : src.cols;
      const int done = horizontal_row3_sse41(in, cx.first.data(), cx.count.data(), cx.weights.data(), cx.ksize, out_w,
                                             safe_w, o, kPrecisionBits);
      for (int xx = done; xx < out_w; ++xx)  // the pixels that would read past safe_w
        horizontal_pixel<3>(in + static_cast<size_t>(cx.first[static_cast<size_t>(xx)]) * 3,
                            &cx.weights[static_cast<size_t>(xx) * static_cast<size_t>(cx.ksize)],
                            cx.count[static_cast<size_t>(xx)], o + xx * 3);
      continue;
    }
    for (int xx = 0; xx < out_w; ++xx)
      horizontal_pixel<C>(in + static_cast<size_t>(cx.first[static_cast<size_t>(xx)]) * C,
                          &cx.weights[static_cast<size_t>(xx) * static_cast<size_t>(cx.ksize)],
                          cx.count[static_cast<size_t>(xx)], o + xx * C);
  }
}

// acc[j] += row[j] * k for a whole row: the vertical pass's inner loop, with AVX2 where the CPU has it (32-bit
// multiplies are SSE4.1 and later; the x86-64 baseline would emulate them), the rest in plain C++.
void accumulate_row_plain(int32_t* acc, const uint8_t* row, int32_t k, size_t n, size_t from) {
  for (size_t j = from; j < n; ++j) acc[j] += static_cast<int32_t>(row[j]) * k;
}

void clip_row_plain(const int32_t* acc, uint8_t* out, size_t n, size_t from) {
  for (size_t j = from; j < n; ++j) out[j] = static_cast<uint8_t>(std::clamp(acc[j] >> kPrecisionBits, 0, 255));
}

void accumulate_row(int32_t* acc, const uint8_t* row, int32_t k, size_t n) {
  const size_t done = x86_features().avx2 ? accumulate_row_avx2(acc, row, k, n) : 0;
  accumulate_row_plain(acc, row, k, n, done);
}

void clip_row(const int32_t* acc, uint8_t* out, size_t n) {
  const size_t done = x86_features().avx2 ? clip_row_avx2(acc, out, n, kPrecisionBits) : 0;
  clip_row_plain(acc, out, n, done);
}

// What a resample works in, kept from call to call by each thread (a loader worker resamples every image it
// reads): the coefficients, the horizontal pass's rows and the vertical pass's accumulator.
struct Scratch {
  Coefficients cx, cy;
  std::vector<double> k;
  std::vector<uint8_t> tmp, line;
  std::vector<int32_t> acc;
};

Scratch& this_threads_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Vertical pass over the horizontally resampled rows, writing the final (mirrored, channel-swapped) pixels.
template <int C>
void vertical_pass(const uint8_t* tmp, int out_w, const Coefficients& cy, int row_offset, int out_h, bool mirror,
                   bool swap_rb, cv::Mat& out, Scratch& scratch) {
  const size_t row_len = static_cast<size_t>(out_w) * C;
  std::vector<int32_t>& acc = scratch.acc;
  std::vector<uint8_t>& line = scratch.line;
  acc.resize(row_len);
  line.resize(row_len);
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
  Scratch& scratch = this_threads_scratch();
  Coefficients& cx = scratch.cx;
  Coefficients& cy = scratch.cy;
  coefficients(src.cols, x, out.cols, filter, cx, scratch.k);
  coefficients(src.rows, y, out.rows, filter, cy, scratch.k);
  // Only the source rows that the vertical pass reads go through the horizontal pass, as in Pillow.
  const int row0 = cy.first.front();
  const int row_end = cy.first.back() + cy.count.back();
  scratch.tmp.resize(static_cast<size_t>(std::max(row_end - row0, 0)) * static_cast<size_t>(out.cols) * C);
  horizontal_pass<C>(src, row0, row_end - row0, cx, out.cols, scratch.tmp.data());
  vertical_pass<C>(scratch.tmp.data(), out.cols, cy, row0, out.rows, mirror, swap_rb, out, scratch);
}

}  // namespace

SourceSpan resample_source_span(int64_t in_size, ResampleAxis axis, int64_t out_size, ResampleFilter filter) {
  const double support = filter_support(filter, axis.scale);
  auto tap = [&](int64_t xx) {
    return taps((static_cast<double>(axis.first + xx) + 0.5) * axis.scale, support, static_cast<int>(in_size));
  };
  // Both ends move monotonically with the output index: the first pixel's start and the last pixel's end bound it.
  const int64_t begin = tap(0).first;
  const auto [last_first, last_count] = tap(out_size - 1);
  return {begin, std::max<int64_t>(begin + 1, last_first + std::max(last_count, 0))};
}

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
