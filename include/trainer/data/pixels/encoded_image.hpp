// A sample left encoded for the GPU (data.decode cuda): a loader worker reads the file, parses its header and
// plans the crop and flip exactly as the CPU path does (a pure function of seed, epoch, index and copy); the
// batch decoder (batch_decoder.hpp) then decodes and renders it on the device into its slot of the batch.
#pragma once

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

  bool deferred() const { return !bytes.empty(); }
};

}  // namespace trainer
