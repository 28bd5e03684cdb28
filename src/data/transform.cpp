#include "trainer/data/transform.hpp"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>

namespace trainer {

namespace {

// Python's round(): halves go to the even neighbour (the default floating-point rounding mode).
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

double uniform(SplitMix64& rng, double lo, double hi) {
  const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;  // [0, 1)
  return lo + (hi - lo) * u;
}

// Edges of a source-pixel interval in an image `factor` times the source size, rounded to whole pixels and
// kept at least one pixel wide inside [0, limit].
std::pair<int, int> scaled_span(double start, double length, double factor, int limit) {
  int a = static_cast<int>(std::lround(start * factor));
  int b = static_cast<int>(std::lround((start + length) * factor));
  a = std::clamp(a, 0, limit - 1);
  b = std::clamp(b, a + 1, limit);
  return {a, b};
}

}  // namespace

TransformSpec make_transform_spec(const DataConfig& data, bool train) {
  const AugmentConfig& a = data.augment;
  TransformSpec s;
  s.train = train;
  s.size = a.image_size;
  s.resize = a.eval_resize;
  s.scale_min = a.scale.at(0);
  s.scale_max = a.scale.at(1);
  s.ratio_min = a.ratio.at(0);
  s.ratio_max = a.ratio.at(1);
  s.hflip = a.hflip;
  s.interpolation = a.interpolation;
  s.reduce = data.decode_reduce == DecodeReduce::automatic;
  return s;
}

CropBox random_resized_crop(int64_t height, int64_t width, const TransformSpec& spec, SplitMix64& rng) {
  const double area = static_cast<double>(height * width);
  const double log_min = std::log(spec.ratio_min), log_max = std::log(spec.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(rng, spec.scale_min, spec.scale_max);
    const double aspect = std::exp(uniform(rng, log_min, log_max));
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const auto top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(height - h + 1)));
      const auto left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(width - w + 1)));
      return {static_cast<double>(left), static_cast<double>(top), static_cast<double>(w), static_cast<double>(h)};
    }
  }
  // Fallback: the whole image, or its center clamped to the ratio range.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < spec.ratio_min) {
    h = round_half_even(static_cast<double>(w) / spec.ratio_min);
  } else if (in_ratio > spec.ratio_max) {
    w = round_half_even(static_cast<double>(h) * spec.ratio_max);
  }
  return {static_cast<double>((width - w) / 2), static_cast<double>((height - h) / 2), static_cast<double>(w),
          static_cast<double>(h)};
}

CropBox resize_center_crop(int64_t height, int64_t width, const TransformSpec& spec) {
  // torchvision's Resize(int): the shorter side becomes `resize`, the longer int(resize * long / short).
  const bool portrait = width <= height;
  const int64_t shorter = portrait ? width : height, longer = portrait ? height : width;
  const auto new_long = static_cast<int64_t>(static_cast<double>(spec.resize) * static_cast<double>(longer) /
                                             static_cast<double>(shorter));
  const int64_t new_w = portrait ? spec.resize : new_long, new_h = portrait ? new_long : spec.resize;
  // CenterCrop: offsets int(round((resized - size) / 2)); a crop larger than the image is not possible here
  // since resize >= size.
  const int64_t top = round_half_even(static_cast<double>(new_h - spec.size) / 2.0);
  const int64_t left = round_half_even(static_cast<double>(new_w - spec.size) / 2.0);
  const double fx = static_cast<double>(width) / static_cast<double>(new_w);
  const double fy = static_cast<double>(height) / static_cast<double>(new_h);
  return {static_cast<double>(left) * fx, static_cast<double>(top) * fy, static_cast<double>(spec.size) * fx,
          static_cast<double>(spec.size) * fy};
}

SamplePlan plan_sample(const TransformSpec& spec, int64_t height, int64_t width, uint64_t sample_seed) {
  if (!spec.train) return {resize_center_crop(height, width, spec), false};
  SplitMix64 rng(sample_seed);
  SamplePlan plan;
  plan.box = random_resized_crop(height, width, spec, rng);
  plan.flip = uniform(rng, 0.0, 1.0) < spec.hflip;
  return plan;
}

int decode_reduction(const SamplePlan& plan, const TransformSpec& spec) {
  if (!spec.reduce) return 1;
  const double need = static_cast<double>(spec.size);
  for (int r : {8, 4, 2})
    if (plan.box.width / r >= need && plan.box.height / r >= need) return r;
  return 1;
}

void render(const cv::Mat& decoded, int64_t source_height, int64_t source_width, const SamplePlan& plan,
            const TransformSpec& spec, cv::Mat& out) {
  const double fx = static_cast<double>(decoded.cols) / static_cast<double>(source_width);
  const double fy = static_cast<double>(decoded.rows) / static_cast<double>(source_height);
  const auto [x0, x1] = scaled_span(plan.box.left, plan.box.width, fx, decoded.cols);
  const auto [y0, y1] = scaled_span(plan.box.top, plan.box.height, fy, decoded.rows);
  const cv::Mat crop = decoded(cv::Range(y0, y1), cv::Range(x0, x1));
  const int size = static_cast<int>(spec.size);
  int flag = cv::INTER_LINEAR;
  switch (spec.interpolation) {
    case Interpolation::bilinear:
      // PIL's bilinear filter widens with the shrink factor (antialiasing); OpenCV's area mode is the
      // equivalent when shrinking, plain bilinear when enlarging.
      flag = crop.cols >= size && crop.rows >= size ? cv::INTER_AREA : cv::INTER_LINEAR;
      break;
    case Interpolation::bicubic: flag = cv::INTER_CUBIC; break;
    case Interpolation::nearest: flag = cv::INTER_NEAREST; break;
  }
  cv::resize(crop, out, cv::Size(size, size), 0, 0, flag);
  if (out.channels() == 3) cv::cvtColor(out, out, cv::COLOR_BGR2RGB);
  if (plan.flip) cv::flip(out, out, 1);
}

}  // namespace trainer
