// The partial JPEG decode on its own (data/pixels/jpeg_region_decoder.hpp), in the way of libjpeg-turbo's
// fuzz/decompress_partial.cc: the first 9 bytes are the region (left, top, width, height as 16-bit little-endian)
// and a byte picking the reduction and the channels, the rest is the file. A region outside the image is refused
// before libjpeg sees it (std::invalid_argument), a damaged file with DataError. Headers over 4 megapixels are
// skipped (see image_decode_fuzz.cpp).
#include "fuzz/fuzz_support.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/jpeg_region_decoder.hpp"

#include <stdexcept>

TRAINER_FUZZ_TARGET(jpeg_region) {
  if (size < 9) return 0;
  const auto u16 = [&](size_t at) { return int64_t{data[at]} | int64_t{data[at + 1]} << 8; };
  const trainer::PixelRegion region{u16(0), u16(2), u16(4), u16(6)};
  const int reduction = 1 << (data[8] & 3);
  const int channels = data[8] & 4 ? 1 : 3;
  const std::vector<uint8_t> bytes(data + 9, data + size);
  const trainer::ImageInfo info = trainer::probe_image(bytes);
  if (!trainer::JpegRegionDecoder::takes(info) || info.height * info.width > (int64_t{4} << 20)) return 0;
  static trainer::JpegRegionDecoder decoder;  // reused across inputs, as a worker's is across images
  try {
    trainer::fuzz::refused_cleanly([&] { decoder.decode(bytes, info, channels, reduction, region, "fuzz.jpg"); });
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
