// libjpeg-turbo's partial decode: only the rows and columns of a JPEG that a transform reads. Rows below the
// region are never touched; rows above it are entropy-decoded but skip the inverse DCT, upsampling and colour
// conversion (jpeg_skip_scanlines); columns outside it are cut at the iMCU boundaries around it
// (jpeg_crop_scanline). The pixels are those of a whole decode with OpenCV (which uses the same library with the
// same settings: slow-integer DCT, fancy upsampling, BGR output), bit for bit: fancy upsampling treats the edges
// of a cropped row as the image's edges, so one spare column is decoded on each side and dropped, as DALI's CPU
// decoder does. tests/unit/jpeg_region_test.cpp holds that over chroma layouts, progressive files, restart
// markers and crops touching every edge.
// One decoder per thread, reused for every image: the libjpeg object and the output buffer are allocated once.
// libjpeg-turbo 2.1 keeps its SIMD choice per thread, so an image is started and finished on one thread (one call).
//   JpegRegionDecoder d;
//   if (JpegRegionDecoder::takes(info)) DecodedPixels r = d.decode(bytes, info, 3, 2, {10, 20, 100, 80}, path);
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/pixel_region.hpp"

namespace trainer {

class JpegRegionDecoder {
 public:
  JpegRegionDecoder();
  ~JpegRegionDecoder();
  JpegRegionDecoder(const JpegRegionDecoder&) = delete;
  JpegRegionDecoder& operator=(const JpegRegionDecoder&) = delete;

  // Files it decodes: complete 8-bit Huffman-coded JPEGs (baseline, extended or progressive), grey or YCbCr with
  // a common chroma layout, of a known size. Others (CMYK, arithmetic coding, 4:1:1, 12-bit) are decoded whole.
  static bool takes(const ImageInfo& info);

  // `region` of the image decoded at 1/`reduction` (1, 2, 4 or 8; the decoded image is ceil(width / reduction)
  // wide), as `channels` 1 (grey) or 3 (BGR). The pixels stay valid until the next decode on this object.
  // std::invalid_argument for a region outside the image (checked before libjpeg sees it); DataError naming
  // `file` when the data cannot be decoded.
  DecodedPixels decode(const std::vector<uint8_t>& bytes, const ImageInfo& info, int channels, int reduction,
                       PixelRegion region, const std::filesystem::path& file);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The size of an image decoded at 1/reduction, as libjpeg's DCT scaling computes it (rounded up).
int64_t reduced_size(int64_t size, int reduction);

}  // namespace trainer
