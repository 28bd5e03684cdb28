// torchvision's _make_divisible (from TensorFlow's MobileNet): `v` rounded to the nearest multiple of `divisor`, at
// least `min_value` (the divisor when 0), and never more than 10% below `v`. EfficientNet's and MobileNetV3's
// channel counts come from it, so it is computed exactly as there (truncation of v + divisor / 2).
#pragma once

#include <cstdint>

namespace trainer {

int64_t make_divisible(double v, int64_t divisor, int64_t min_value = 0);

}  // namespace trainer
