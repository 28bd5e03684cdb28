#include "trainer/data/pixels/encoded_image.hpp"

namespace trainer {

void render_encoded(const EncodedImage& e, cv::Mat& out) {
  const int reduction = e.info.format == ImageFormat::jpeg ? decode_reduction(e.plan, e.spec) : 1;
  render(decode_image(e.bytes, e.info, 3, reduction, std::filesystem::path(e.name)), e.info.height, e.info.width,
         e.plan, e.spec, out);
}

}  // namespace trainer
