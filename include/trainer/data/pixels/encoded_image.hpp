// A sample left encoded for the GPU (data.decode cuda): a loader worker reads the file, parses its header and
// plans the crop and flip exactly as the CPU path does (a pure function of seed, epoch, index and copy), asks the
// run's decoder whether it takes the file (DecodeIntake, in the worker: nvJPEG's support check), and either
// leaves it encoded for the decode stage (data/device/decode_stage.hpp) or decodes it itself (render_encoded).
//   if (!intake.takes(e)) render_encoded(e, slot);
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/transform.hpp"

namespace trainer {

struct EncodedImage {
  std::vector<uint8_t> bytes;  // the whole file; empty when the slot was decoded on the CPU
  ImageInfo info;              // its header: format, size, components
  SamplePlan plan;             // the crop (source pixels) and flip, as the CPU path renders them
  TransformSpec spec;          // the transform planned (output size, train or eval, interpolation)
  size_t index = 0;            // the source's sample, for a bad-sample record
  std::string name;            // the file, for errors
  // The decoder's verdict, given in the worker: it decodes only the crop's region (false: the whole image, as
  // the hardware refused the region).
  bool crop_region = true;

  bool deferred() const { return !bytes.empty(); }
};

// The batch decoder's side in the loader workers. takes() is asked for every JPEG a worker would leave encoded,
// from every worker at once (thread-safe); it may note its verdict in `e`. A file it refuses is decoded by the
// worker, so the decode stage only meets files it has said it takes.
class DecodeIntake {
 public:
  virtual ~DecodeIntake() = default;
  virtual bool takes(EncodedImage& e) const = 0;
};

// Decodes `e` exactly as the CPU path would (decode_image at the plan's reduction, then render) into `out`
// (uint8, the output size, 3 channels); DataError naming the file when it cannot be decoded.
void render_encoded(const EncodedImage& e, cv::Mat& out);

}  // namespace trainer
