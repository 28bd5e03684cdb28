// Pillow's resampling of 8-bit images (Image.resize with BILINEAR or BICUBIC, what torchvision's PIL transforms
// call), reproduced bit for bit: the same filters, widened by the shrink factor (antialiasing), the same 22-bit
// fixed-point coefficients, a horizontal pass into 8-bit rows and then a vertical pass. It is also faster than
// OpenCV's antialiasing INTER_AREA for the fractional factors of random crops. The final flip and the BGR to
// RGB channel swap are folded into the last pass, so the result is written once, straight into `out`.
//   resample(crop_view, ResampleFilter::bilinear, {0, crop.cols / 224.0}, {0, crop.rows / 224.0}, flip, true, out);
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>

namespace trainer {

enum class ResampleFilter { bilinear, bicubic };

// One axis of the mapping: output pixel i is centred on source coordinate (first + i + 0.5) * scale. A resize
// of the whole image then a crop at offset `first` of the result is the same as sampling with that `first`,
// which is how an eval center crop is rendered without resizing the pixels it throws away.
struct ResampleAxis {
  int64_t first = 0;
  double scale = 1.0;  // source pixels per output pixel
  // When `src` is a region of a larger source (a partial decode): the source's size and the index of src's first
  // pixel in it. Weights are those of the whole source (clamped at its edges, not the region's), so the result is
  // the same as resampling the whole source, provided the region holds every pixel read (resample_source_span).
  int64_t full = 0;  // 0: src is the whole source
  int64_t offset = 0;
};

// The source pixels [begin, end) along one axis that output pixels [0, out_size) read, in the whole source's
// indices (`in_size` long).
struct SourceSpan {
  int64_t begin = 0, end = 0;
};
SourceSpan resample_source_span(int64_t in_size, ResampleAxis axis, int64_t out_size, ResampleFilter filter);

// `src`: CV_8UC1 or CV_8UC3 (a view is fine; pixels outside it are never read, as for a PIL crop). `out`: the
// same type, already allocated at the output size. `mirror` flips left-right; `swap_rb` reverses the channels.
// std::logic_error when an axis's region misses pixels its outputs read.
void resample(const cv::Mat& src, ResampleFilter filter, ResampleAxis x, ResampleAxis y, bool mirror, bool swap_rb,
              cv::Mat& out);

}  // namespace trainer
