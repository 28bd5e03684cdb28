#include "trainer/data/sources/encoded_sample.hpp"

#include "trainer/data/pixels/encoded_image.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/pixels/sample_pixels.hpp"

namespace trainer {

bool render_or_defer(std::vector<uint8_t>& bytes, const std::string& name, size_t i, const ReadContext& context,
                     const TransformSpec& spec, int64_t channels, cv::Mat& out, bool defer, EncodedImage& deferred,
                     Clock::time_point start, Clock::time_point read_at) {
  SampleTimes* times = context.times;  // bench data's stage times: the clock is read only when they are asked for
  const ImageInfo info = probe_image(bytes);
  const uint64_t seed = sample_seed(context, i);
  const int c = static_cast<int>(channels);
  // The header names the format and size (or the file is refused here): plan first, then decode no more than the
  // crop needs, or leave it to the GPU.
  check_image_header(info, name);
  const SamplePlan plan = plan_sample(spec, info.height, info.width, seed);
  if (defer && c == 3 && gpu_decodable(info)) {
    deferred = EncodedImage{std::move(bytes), info, plan, spec, i, name};
    return true;
  }
  const auto planned_at = times ? Clock::now() : Clock::time_point();
  render_sample(bytes, info, plan, spec, c, name, out, times);
  if (times) {
    times->read_s = seconds_between(start, read_at);
    times->plan_s = seconds_between(read_at, planned_at);
  }
  return false;
}

std::string describe_transform(const TransformSpec& spec) {
  return (spec.train ? "random resized crop " + std::to_string(spec.size) + ", flip"
                     : "resize " + std::to_string(spec.resize) + ", center crop " + std::to_string(spec.size)) +
         (spec.reduce ? ", reduced JPEG decode" : "");
}

}  // namespace trainer
