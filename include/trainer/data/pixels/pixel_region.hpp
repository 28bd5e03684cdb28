// A rectangle of an image's pixels, and the decoded pixels of one: what a transform reads of an image is often a
// small part of it (a random resized crop keeps 8-100% of the area; an eval center crop drops the margins), and a
// JPEG can be decoded for that part alone (jpeg_region_decoder.hpp).
//   PixelRegion r = read_region(...);                  // in the image decoded at 1/reduction
//   DecodedPixels d = decode_region(bytes, info, 3, reduction, r, path);
//   d.pixels: r.height x r.width, at (d.left, d.top) of a d.full_width x d.full_height image
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>

namespace trainer {

struct PixelRegion {
  int64_t left = 0, top = 0, width = 0, height = 0;
};

struct DecodedPixels {
  cv::Mat pixels;                           // uint8, 1 or 3 channels (BGR); may be a view of a decoder's reused buffer
  int64_t full_width = 0, full_height = 0;  // the whole decoded image the region belongs to
  int64_t left = 0, top = 0;                // where `pixels` sits in it
};

// All of a decoded image.
inline DecodedPixels whole_image(const cv::Mat& pixels) { return {pixels, pixels.cols, pixels.rows, 0, 0}; }

}  // namespace trainer
