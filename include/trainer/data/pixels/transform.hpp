// The per-sample image transform of image-folder datasets, with torchvision's semantics:
//   train: RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(hflip)
//   eval:  Resize(resize) of the shorter side + CenterCrop(size)
// Planning (where to crop, whether to flip) needs only the image size and a seed, so it can run before the
// decode and pick a reduced JPEG decode; rendering then crops and resizes the decoded pixels.
//   SamplePlan p = plan_sample(spec, height, width, sample_seed);
//   int r = decode_reduction(p, spec);       // 1, 2, 4 or 8
//   PixelRegion wanted = read_region(ceil(height / r), ceil(width / r), height, width, p, spec);
//   render(the_decoded_region, height, width, p, spec, out);   // (sample_pixels.hpp does these steps)
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/data/pixels/pixel_region.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

struct TransformSpec {
  bool train = true;
  int64_t size = 224;    // output height and width
  int64_t resize = 256;  // eval: the shorter side before the center crop
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  double hflip = 0.5;
  Interpolation interpolation = Interpolation::bilinear;
  bool reduce = true;  // allow decoding at 1/2, 1/4 or 1/8 scale
};

TransformSpec make_transform_spec(const DataConfig& data, bool train);

// An image file brought to a model's input: the shorter side resized to the input size, then center-cropped (for
// single files given to a model trained on fixed-size images). Throws UsageError for a non-square input.
TransformSpec model_input_transform(const ImageShape& input);

// A crop in source-image pixels. Train crops are whole pixels; eval crops are the center crop of the resized
// image mapped back to the source, so they may be fractional.
struct CropBox {
  double left = 0, top = 0, width = 0, height = 0;
};

// An eval sample is the crop at (left, top) of the whole image resized to width x height; rendering samples
// exactly those pixels of that resize. Train crops leave it zero.
struct ResizedCrop {
  int64_t width = 0, height = 0, left = 0, top = 0;
};

struct SamplePlan {
  CropBox box;
  bool flip = false;
  ResizedCrop resized;
};

// torchvision's RandomResizedCrop.get_params: 10 attempts at a random area and log-uniform aspect ratio, then
// the center-crop fallback clamped to the ratio range. Returns whole-pixel (top, left, height, width).
CropBox random_resized_crop(int64_t height, int64_t width, const TransformSpec& spec, SplitMix64& rng);

// Resize(resize) then CenterCrop(size), as a box in the source image (torchvision's integer sizes and offsets).
CropBox resize_center_crop(int64_t height, int64_t width, const TransformSpec& spec);

// What happens to one sample; a pure function of the image size and the sample's seed.
SamplePlan plan_sample(const TransformSpec& spec, int64_t height, int64_t width, uint64_t sample_seed);

// The largest JPEG scale denominator (8, 4, 2, else 1) at which the crop still spans at least spec.size pixels
// in both directions, so the final resize never enlarges what full resolution would have shrunk.
int decode_reduction(const SamplePlan& plan, const TransformSpec& spec);

// The pixels of the source decoded at full_width x full_height (a reduced size, or the source's own) that
// render() reads for `plan`: the crop's box for training, what the resize's filter reaches of the center crop
// for evaluation. Decoding only these gives the same result as decoding everything.
PixelRegion read_region(int64_t full_height, int64_t full_width, int64_t source_height, int64_t source_width,
                        const SamplePlan& plan, const TransformSpec& spec);

// Crops plan.box out of the decoded source (possibly at a reduced size: the box is scaled by decoded/source;
// `decoded` may be a region holding at least read_region's pixels), resizes it into `out` (spec.size x spec.size,
// already allocated), flips if planned, and turns OpenCV's BGR into RGB. At full decode size the pixels equal
// torchvision's PIL transforms.
void render(const DecodedPixels& decoded, int64_t source_height, int64_t source_width, const SamplePlan& plan,
            const TransformSpec& spec, cv::Mat& out);

}  // namespace trainer
