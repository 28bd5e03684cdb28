// The part of a read that every source of image files shares once a sample's encoded bytes are in memory (a folder's
// file, a shard's member): the header parsed and checked, the crop planned from (seed, epoch, index, copy), then the
// decode and render into the batch slot, or, on the GPU path, the bytes left encoded for the decode stage.
//   const auto start = Clock::now();  read the bytes ...
//   return render_or_defer(bytes, name, i, context, spec, channels, out, defer, deferred, start, read_at);
#pragma once

#include <opencv2/core.hpp>

#include <string>
#include <vector>

#include "trainer/data/pixels/transform.hpp"
#include "trainer/data/sources/image_source.hpp"
#include "trainer/util/clock.hpp"

namespace trainer {

// `bytes` may be moved into `deferred` (true returned: `out` is untouched). `start` and `read_at` time the read for
// context.times (bench data). Throws DataError naming `name` for a file that is not an image it can decode.
bool render_or_defer(std::vector<uint8_t>& bytes, const std::string& name, size_t i, const ReadContext& context,
                     const TransformSpec& spec, int64_t channels, cv::Mat& out, bool defer, EncodedImage& deferred,
                     Clock::time_point start, Clock::time_point read_at);

// For describe(): "random resized crop 224, flip" or "resize 256, center crop 224", and the reduced decode.
std::string describe_transform(const TransformSpec& spec);

}  // namespace trainer
