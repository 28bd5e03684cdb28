#include "trainer/data/pixels/encoded_image.hpp"

#include "trainer/data/pixels/sample_pixels.hpp"

namespace trainer {

void render_encoded(const EncodedImage& e, cv::Mat& out) {
  render_sample(e.bytes, e.info, e.plan, e.spec, 3, std::filesystem::path(e.name), out);
}

}  // namespace trainer
