#include "trainer/data/pixels/transform.hpp"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "trainer/data/pixels/resample.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// Python's round(): halves go to the even neighbour (the default floating-point rounding mode).
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

double uniform(SplitMix64& rng, double lo, double hi) { return lo + (hi - lo) * uniform01(rng); }

// Edges of a source-pixel interval in an image `factor` times the source size, rounded to whole pixels and
// kept at least one pixel wide inside [0, limit].
std::pair<int, int> scaled_span(double start, double length, double factor, int limit) {
  int a = static_cast<int>(std::lround(start * factor));
  int b = static_cast<int>(std::lround((start + length) * factor));
  a = std::clamp(a, 0, limit - 1);
  b = std::clamp(b, a + 1, limit);
  return {a, b};
}

// plan.box of the source image in the pixels of the source decoded at full_width x full_height (a reduced size).
PixelRegion box_in_decoded(int64_t full_height, int64_t full_width, int64_t source_height, int64_t source_width,
                           const CropBox& box) {
  const double fx = static_cast<double>(full_width) / static_cast<double>(source_width);
  const double fy = static_cast<double>(full_height) / static_cast<double>(source_height);
  const auto [x0, x1] = scaled_span(box.left, box.width, fx, static_cast<int>(full_width));
  const auto [y0, y1] = scaled_span(box.top, box.height, fy, static_cast<int>(full_height));
  return {x0, y0, x1 - x0, y1 - y0};
}

// plan.box as a view of the decoded region, which holds it (read_region asked for it).
cv::Mat crop_of(const DecodedPixels& d, int64_t source_height, int64_t source_width, const CropBox& box) {
  const PixelRegion r = box_in_decoded(d.full_height, d.full_width, source_height, source_width, box);
  const int x0 = static_cast<int>(r.left - d.left), y0 = static_cast<int>(r.top - d.top);
  if (x0 < 0 || y0 < 0 || x0 + r.width > d.pixels.cols || y0 + r.height > d.pixels.rows)
    throw std::logic_error("render: the decoded region does not hold the crop");
  return d.pixels(cv::Range(y0, y0 + static_cast<int>(r.height)), cv::Range(x0, x0 + static_cast<int>(r.width)));
}

// Eval: the axes of the whole decoded image resized to plan.resized and cropped at its offsets.
std::pair<ResampleAxis, ResampleAxis> eval_axes(const DecodedPixels& d, const ResizedCrop& r) {
  return {{r.left, static_cast<double>(d.full_width) / static_cast<double>(r.width), d.full_width, d.left},
          {r.top, static_cast<double>(d.full_height) / static_cast<double>(r.height), d.full_height, d.top}};
}

ResampleFilter filter_of(Interpolation interpolation) {
  return interpolation == Interpolation::bicubic ? ResampleFilter::bicubic : ResampleFilter::bilinear;
}

}  // namespace

TransformSpec make_transform_spec(const DataConfig& data, bool train) {
  const AugmentConfig& a = data.augment;
  TransformSpec s;
  s.train = train;
  s.size = train || a.eval_crop == 0 ? a.image_size : a.eval_crop;  // 0: not resolved yet (load.cpp resolves it)
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

TransformSpec model_input_transform(const ImageShape& input) {
  if (input.height != input.width)
    throw UsageError("images need a square model input; this model's is " + std::to_string(input.height) + "x" +
                     std::to_string(input.width));
  TransformSpec spec;
  spec.train = false;
  spec.size = input.height;
  spec.resize = input.height;
  return spec;
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

namespace {

// torchvision's Resize(int) then CenterCrop(size), in the resized image's pixels.
ResizedCrop center_crop_of_resize(int64_t height, int64_t width, const TransformSpec& spec) {
  // Resize: the shorter side becomes `resize`, the longer int(resize * long / short).
  const bool portrait = width <= height;
  const int64_t shorter = portrait ? width : height, longer = portrait ? height : width;
  const auto new_long = static_cast<int64_t>(static_cast<double>(spec.resize) * static_cast<double>(longer) /
                                             static_cast<double>(shorter));
  ResizedCrop r;
  r.width = portrait ? spec.resize : new_long;
  r.height = portrait ? new_long : spec.resize;
  // CenterCrop: offsets int(round((resized - size) / 2)); never negative since resize >= size.
  r.top = round_half_even(static_cast<double>(r.height - spec.size) / 2.0);
  r.left = round_half_even(static_cast<double>(r.width - spec.size) / 2.0);
  return r;
}

}  // namespace

CropBox resize_center_crop(int64_t height, int64_t width, const TransformSpec& spec) {
  const ResizedCrop r = center_crop_of_resize(height, width, spec);
  const double fx = static_cast<double>(width) / static_cast<double>(r.width);
  const double fy = static_cast<double>(height) / static_cast<double>(r.height);
  return {static_cast<double>(r.left) * fx, static_cast<double>(r.top) * fy, static_cast<double>(spec.size) * fx,
          static_cast<double>(spec.size) * fy};
}

SamplePlan plan_sample(const TransformSpec& spec, int64_t height, int64_t width, uint64_t sample_seed) {
  if (!spec.train) return {resize_center_crop(height, width, spec), false, center_crop_of_resize(height, width, spec)};
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

PixelRegion read_region(int64_t full_height, int64_t full_width, int64_t source_height, int64_t source_width,
                        const SamplePlan& plan, const TransformSpec& spec) {
  const ResizedCrop& r = plan.resized;
  if (spec.interpolation == Interpolation::nearest || r.width == 0)
    return box_in_decoded(full_height, full_width, source_height, source_width, plan.box);
  const DecodedPixels whole{cv::Mat(), full_width, full_height, 0, 0};
  const auto [x, y] = eval_axes(whole, r);
  const SourceSpan sx = resample_source_span(full_width, x, spec.size, filter_of(spec.interpolation));
  const SourceSpan sy = resample_source_span(full_height, y, spec.size, filter_of(spec.interpolation));
  return {sx.begin, sy.begin, sx.end - sx.begin, sy.end - sy.begin};
}

void render(const DecodedPixels& decoded, int64_t source_height, int64_t source_width, const SamplePlan& plan,
            const TransformSpec& spec, cv::Mat& out) {
  const bool rgb = out.channels() == 3;
  if (spec.interpolation != Interpolation::nearest) {
    const ResampleFilter filter = filter_of(spec.interpolation);
    const ResizedCrop& r = plan.resized;
    if (r.width > 0) {
      // Eval: torchvision resizes the whole image, then crops; sample only the kept pixels of that resize.
      const auto [x, y] = eval_axes(decoded, r);
      resample(decoded.pixels, filter, x, y, plan.flip, rgb, out);
    } else {
      // Train: torchvision crops, then resizes the crop (which sees no pixel outside it).
      const cv::Mat crop = crop_of(decoded, source_height, source_width, plan.box);
      resample(crop, filter, {0, static_cast<double>(crop.cols) / static_cast<double>(out.cols)},
               {0, static_cast<double>(crop.rows) / static_cast<double>(out.rows)}, plan.flip, rgb, out);
    }
    return;
  }
  cv::resize(crop_of(decoded, source_height, source_width, plan.box), out, out.size(), 0, 0, cv::INTER_NEAREST);
  if (rgb) cv::cvtColor(out, out, cv::COLOR_BGR2RGB);
  if (plan.flip) cv::flip(out, out, 1);
}

}  // namespace trainer
