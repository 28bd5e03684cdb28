#include "trainer/data/pixels/color_jitter.hpp"

#include <algorithm>
#include <array>

#include "trainer/data/pixels/pil_color.hpp"

namespace trainer {

void apply_color_jitter(cv::Mat& image, const ColorJitterConfig& c, SplitMix64& rng) {
  if (!c.enabled()) return;
  std::array<int, 4> order{0, 1, 2, 3};
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  // Factors in torchvision's order of draws: brightness, contrast, saturation, hue.
  auto factor = [&](double x) {
    const double lo = std::max(0.0, 1.0 - x), hi = 1.0 + x;
    return lo + (hi - lo) * uniform01(rng);
  };
  const double b = c.brightness > 0 ? factor(c.brightness) : 1.0;
  const double k = c.contrast > 0 ? factor(c.contrast) : 1.0;
  const double s = c.saturation > 0 ? factor(c.saturation) : 1.0;
  const double h = c.hue > 0 ? -c.hue + 2.0 * c.hue * uniform01(rng) : 0.0;
  for (int fn : order) {
    if (fn == 0 && c.brightness > 0) pil_brightness(image, static_cast<float>(b));
    if (fn == 1 && c.contrast > 0) pil_contrast(image, static_cast<float>(k));
    if (fn == 2 && c.saturation > 0) pil_color(image, static_cast<float>(s));
    if (fn == 3 && c.hue > 0) pil_adjust_hue(image, h);
  }
}

}  // namespace trainer
