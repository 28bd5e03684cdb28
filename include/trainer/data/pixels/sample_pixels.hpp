// From an image file's bytes to a sample's final pixels, the path every CPU decode takes (loader workers, the
// GPU decode's refusals, single files for predict): the plan's JPEG reduction, the region the render reads, the
// decode of that region alone where the file allows it (jpeg_region_decoder.hpp; a whole decode otherwise), and
// the render into the batch slot.
//   render_sample(bytes, probe_image(bytes), plan, spec, /*channels=*/3, path, slot);
#pragma once

#include <opencv2/core.hpp>

#include <filesystem>
#include <vector>

#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/transform.hpp"

namespace trainer {

// Where a sample's time went, for `trainer bench data` (loader/pipeline_profile.hpp): seconds per stage, and how
// much of the image was decoded.
struct SampleTimes {
  double read_s = 0, plan_s = 0;      // reading the file; parsing its header and planning the crop
  double decode_s = 0, render_s = 0;  // decoding (the region, or all); cropping, resampling, flipping into the slot
  double augment_s = 0;               // the augmentation policy and random erasing's plan
  int64_t pixels_decoded = 0;         // at the decode's scale
  int64_t pixels_full = 0;            // the whole file at full scale
};

// `plan` was made for info's size. Writes `out` (spec.size square, `channels` 1 or 3). DataError naming `file`
// when the bytes cannot be decoded.
void render_sample(const std::vector<uint8_t>& bytes, const ImageInfo& info, const SamplePlan& plan,
                   const TransformSpec& spec, int channels, const std::filesystem::path& file, cv::Mat& out,
                   SampleTimes* times = nullptr);

}  // namespace trainer
