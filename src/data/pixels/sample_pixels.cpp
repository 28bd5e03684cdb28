#include "trainer/data/pixels/sample_pixels.hpp"

#include "trainer/data/pixels/jpeg_region_decoder.hpp"
#include "trainer/util/clock.hpp"

namespace trainer {

namespace {

// One decoder per thread that decodes (the loader's workers live as long as the pipeline), so its libjpeg object
// and buffer are made once per worker, and reused without a lock: the ImageSource interface carries no worker
// state, and this is the one piece that needs it.
JpegRegionDecoder& this_threads_decoder() {
  thread_local JpegRegionDecoder decoder;
  return decoder;
}

}  // namespace

void render_sample(const std::vector<uint8_t>& bytes, const ImageInfo& info, const SamplePlan& plan,
                   const TransformSpec& spec, int channels, const std::filesystem::path& file, cv::Mat& out,
                   SampleTimes* times) {
  const auto start = times ? Clock::now() : Clock::time_point();
  check_image_header(info, file);
  const int reduction = info.format == ImageFormat::jpeg ? decode_reduction(plan, spec) : 1;
  DecodedPixels decoded;
  if (JpegRegionDecoder::takes(info)) {
    const int64_t full_h = reduced_size(info.height, reduction), full_w = reduced_size(info.width, reduction);
    const PixelRegion region = read_region(full_h, full_w, info.height, info.width, plan, spec);
    decoded = this_threads_decoder().decode(bytes, info, channels, reduction, region, file);
  } else {
    decoded = whole_image(decode_image(bytes, info, channels, reduction, file));
  }
  const auto decoded_at = times ? Clock::now() : Clock::time_point();
  render(decoded, info.height, info.width, plan, spec, out);
  if (times) {
    times->decode_s = seconds_between(start, decoded_at);
    times->render_s = seconds_since(decoded_at);
    times->pixels_decoded = static_cast<int64_t>(decoded.pixels.total());
    times->pixels_full = info.height * info.width;
  }
}

}  // namespace trainer
