#include "trainer/data/pixels/pil_color.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

// Compiled with -ffp-contract=off (CMakeLists.txt): Pillow's float expressions must round after every
// operation, as they do in Pillow's own build, for the results to match bit for bit.

namespace trainer {

namespace {

using Lut = std::array<uint8_t, 256>;

uint8_t clip8(int v) { return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

// One value of Image.blend(degenerate, image, alpha), Pillow's Blend.c: degenerate + alpha * (image - degenerate)
// in float, truncated. Pillow clamps only when alpha is outside [0, 1]; inside, no value leaves [0, 255], so
// clamping always gives the same bytes and keeps the loop branch-free.
inline uint8_t blend_value(int degenerate, int value, float alpha) {
  const float t = static_cast<float>(degenerate) + alpha * static_cast<float>(value - degenerate);
  return static_cast<uint8_t>(std::min(std::max(t, 0.0f), 255.0f));
}

void blend(const cv::Mat& degenerate, cv::Mat& image, float alpha) {
  if (alpha == 1.0f) return;
  const size_t n = image.total() * static_cast<size_t>(image.channels());
  const uint8_t* in1 = degenerate.ptr<uint8_t>();
  uint8_t* out = image.ptr<uint8_t>();
  if (alpha == 0.0f) {
    std::copy(in1, in1 + n, out);
    return;
  }
  if (n < (size_t{1} << 16)) {
    for (size_t i = 0; i < n; ++i) out[i] = blend_value(in1[i], out[i], alpha);
    return;
  }
  // Large images: a table of every (degenerate, value) pair costs 65,536 evaluations, fewer than the bytes, and
  // the lookups are several times faster than the float arithmetic per byte.
  std::vector<uint8_t> table(size_t{1} << 16);
  for (int d = 0; d < 256; ++d)
    for (int v = 0; v < 256; ++v) table[static_cast<size_t>(d << 8 | v)] = blend_value(d, v, alpha);
  for (size_t i = 0; i < n; ++i) out[i] = table[static_cast<size_t>(in1[i]) << 8 | out[i]];
}

void apply_lut(cv::Mat& image, const std::array<uint8_t, 256>& lut);

// Blend with a constant degenerate image (brightness, contrast): a table over the 256 values.
void blend_constant(int degenerate, cv::Mat& image, float alpha) {
  if (alpha == 1.0f) return;
  std::array<uint8_t, 256> lut;
  for (int v = 0; v < 256; ++v)
    lut[static_cast<size_t>(v)] = alpha == 0.0f ? static_cast<uint8_t>(degenerate) : blend_value(degenerate, v, alpha);
  apply_lut(image, lut);
}

void apply_lut(cv::Mat& image, const Lut& lut) {
  const size_t n = image.total() * static_cast<size_t>(image.channels());
  uint8_t* p = image.ptr<uint8_t>();
  for (size_t i = 0; i < n; ++i) p[i] = lut[p[i]];
}

// Per-channel tables: the channel c of pixel i takes luts[c].
void apply_luts(cv::Mat& image, const std::vector<Lut>& luts) {
  const int channels = image.channels();
  const size_t pixels = image.total();
  uint8_t* p = image.ptr<uint8_t>();
  for (size_t i = 0; i < pixels; ++i)
    for (int c = 0; c < channels; ++c, ++p) *p = luts[static_cast<size_t>(c)][*p];
}

std::vector<std::array<int64_t, 256>> histograms(const cv::Mat& image) {
  const int channels = image.channels();
  std::vector<std::array<int64_t, 256>> h(static_cast<size_t>(channels));
  for (auto& one : h) one.fill(0);
  const size_t pixels = image.total();
  const uint8_t* p = image.ptr<uint8_t>();
  for (size_t i = 0; i < pixels; ++i)
    for (int c = 0; c < channels; ++c) ++h[static_cast<size_t>(c)][*p++];
  return h;
}

uint8_t luma(const uint8_t* rgb) {
  // Pillow's L24: fixed-point ITU-R 601-2 weights with rounding.
  return static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

}  // namespace

cv::Mat pil_to_grey(const cv::Mat& image) {
  if (image.channels() == 1) return image.clone();
  cv::Mat grey(image.rows, image.cols, CV_8UC1);
  const size_t pixels = image.total();
  const uint8_t* in = image.ptr<uint8_t>();
  uint8_t* out = grey.ptr<uint8_t>();
  for (size_t i = 0; i < pixels; ++i) out[i] = luma(in + 3 * i);
  return grey;
}

void pil_brightness(cv::Mat& image, float factor) { blend_constant(0, image, factor); }

void pil_color(cv::Mat& image, float factor) {
  if (image.channels() == 1) return;
  const cv::Mat grey = pil_to_grey(image);
  cv::Mat degenerate(image.rows, image.cols, image.type());
  const uint8_t* g = grey.ptr<uint8_t>();
  uint8_t* d = degenerate.ptr<uint8_t>();
  for (size_t i = 0; i < image.total(); ++i) d[3 * i] = d[3 * i + 1] = d[3 * i + 2] = g[i];
  blend(degenerate, image, factor);
}

void pil_contrast(cv::Mat& image, float factor) {
  // ImageStat's mean of the grey image (a double), rounded half up to an int.
  const cv::Mat grey = pil_to_grey(image);
  const auto h = histograms(grey)[0];
  double sum = 0;
  for (int v = 0; v < 256; ++v) sum += static_cast<double>(v) * static_cast<double>(h[static_cast<size_t>(v)]);
  const int mean = static_cast<int>(sum / static_cast<double>(grey.total()) + 0.5);
  blend_constant(mean, image, factor);
}

void pil_sharpness(cv::Mat& image, float factor) {
  // ImageFilter.SMOOTH: 3x3 kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 in float, + 0.5 and truncation; the border
  // rows and columns keep their pixels.
  const int channels = image.channels(), rows = image.rows, cols = image.cols;
  cv::Mat smooth = image.clone();
  // The kernel's products of each byte value, looked up instead of multiplied: the same float products.
  std::array<float, 256> p1, p5;
  for (int v = 0; v < 256; ++v) {
    p1[static_cast<size_t>(v)] = static_cast<float>(v) * (1.0f / 13.0f);
    p5[static_cast<size_t>(v)] = static_cast<float>(v) * (5.0f / 13.0f);
  }
  for (int y = 1; y < rows - 1; ++y) {
    const uint8_t* above = image.ptr<uint8_t>(y - 1);
    const uint8_t* row = image.ptr<uint8_t>(y);
    const uint8_t* below = image.ptr<uint8_t>(y + 1);
    uint8_t* out = smooth.ptr<uint8_t>(y);
    for (int x = 1; x < cols - 1; ++x)
      for (int c = 0; c < channels; ++c) {
        const int i = x * channels + c, l = i - channels, r = i + channels;
        float ss = 0.5f;
        ss += p1[below[l]] + p1[below[i]] + p1[below[r]];
        ss += p1[row[l]] + p5[row[i]] + p1[row[r]];
        ss += p1[above[l]] + p1[above[i]] + p1[above[r]];
        out[i] = ss <= 0.0f ? 0 : ss >= 255.0f ? 255 : static_cast<uint8_t>(ss);
      }
  }
  blend(smooth, image, factor);
}

void pil_posterize(cv::Mat& image, int bits) {
  Lut lut;
  const int mask = ~((1 << (8 - bits)) - 1);
  for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = static_cast<uint8_t>(i & mask);
  apply_lut(image, lut);
}

void pil_solarize(cv::Mat& image, double threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = static_cast<uint8_t>(i < threshold ? i : 255 - i);
  apply_lut(image, lut);
}

void pil_autocontrast(cv::Mat& image) {
  std::vector<Lut> luts;
  for (const auto& h : histograms(image)) {
    int lo = 0, hi = 255;
    while (lo < 255 && h[static_cast<size_t>(lo)] == 0) ++lo;
    while (hi > 0 && h[static_cast<size_t>(hi)] == 0) --hi;
    Lut lut;
    if (hi <= lo) {
      for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    } else {
      const double scale = 255.0 / (hi - lo), offset = -lo * scale;
      for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = clip8(static_cast<int>(i * scale + offset));
    }
    luts.push_back(lut);
  }
  apply_luts(image, luts);
}

void pil_equalize(cv::Mat& image) {
  std::vector<Lut> luts;
  for (const auto& h : histograms(image)) {
    Lut lut;
    for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    int64_t total = 0, last = 0, used = 0;
    for (int i = 0; i < 256; ++i)
      if (h[static_cast<size_t>(i)] != 0) {
        total += h[static_cast<size_t>(i)];
        last = h[static_cast<size_t>(i)];
        ++used;
      }
    const int64_t step = used <= 1 ? 0 : (total - last) / 255;
    if (step != 0) {
      int64_t n = step / 2;
      for (int i = 0; i < 256; ++i) {
        lut[static_cast<size_t>(i)] = static_cast<uint8_t>(std::min<int64_t>(n / step, 255));
        n += h[static_cast<size_t>(i)];
      }
    }
    luts.push_back(lut);
  }
  apply_luts(image, luts);
}

void pil_invert(cv::Mat& image) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = static_cast<uint8_t>(255 - i);
  apply_lut(image, lut);
}

void pil_adjust_hue(cv::Mat& image, double hue_factor) {
  if (image.channels() == 1) return;
  // numpy: np.uint8(hue_factor * 255) (a C cast of the double, modulo 256 for negatives) added with wrap-around.
  const auto shift = static_cast<uint8_t>(static_cast<int64_t>(hue_factor * 255));
  uint8_t* p = image.ptr<uint8_t>();
  for (size_t i = 0; i < image.total(); ++i, p += 3) {
    // Pillow's rgb2hsv (Convert.c), following colorsys.
    const uint8_t r = p[0], g = p[1], b = p[2];
    const uint8_t maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
    uint8_t uh = 0, us = 0;
    const uint8_t uv = maxc;
    if (minc != maxc) {
      const float cr = static_cast<float>(maxc - minc);
      const float s = cr / static_cast<float>(maxc);
      const float rc = static_cast<float>(maxc - r) / cr, gc = static_cast<float>(maxc - g) / cr,
                  bc = static_cast<float>(maxc - b) / cr;
      // The constants are doubles in Pillow's C, so these sums round once, as doubles, into the float.
      float h;
      if (r == maxc) h = bc - gc;
      else if (g == maxc) h = static_cast<float>(2.0 + rc - bc);
      else h = static_cast<float>(4.0 + gc - rc);
      h = static_cast<float>(std::fmod(h / 6.0 + 1.0, 1.0));
      uh = clip8(static_cast<int>(h * 255.0));
      us = clip8(static_cast<int>(s * 255.0));
    }
    const uint8_t hh = static_cast<uint8_t>(uh + shift);
    // Pillow's hsv2rgb.
    if (us == 0) {
      p[0] = p[1] = p[2] = uv;
      continue;
    }
    const int sector = static_cast<int>(std::floor(static_cast<float>(hh) * 6.0 / 255.0));
    const float f = static_cast<float>(static_cast<float>(hh) * 6.0 / 255.0 - static_cast<float>(sector));
    const float fs = static_cast<float>(static_cast<float>(us) / 255.0);
    const uint8_t up = clip8(static_cast<int>(std::round(static_cast<float>(uv) * (1.0 - fs))));
    const uint8_t uq = clip8(static_cast<int>(std::round(static_cast<float>(uv) * (1.0 - fs * f))));
    const uint8_t ut = clip8(static_cast<int>(std::round(static_cast<float>(uv) * (1.0 - fs * (1.0 - f)))));
    // Which of v, p, q and t each of R, G and B takes in each sixth of the hue circle (sector 6 is sector 0).
    static constexpr int kSectorPicks[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3}, {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
    const uint8_t vpqt[4] = {uv, up, uq, ut};
    const int* pick = kSectorPicks[sector % 6];
    for (int c = 0; c < 3; ++c) p[c] = vpqt[pick[c]];
  }
}

}  // namespace trainer
