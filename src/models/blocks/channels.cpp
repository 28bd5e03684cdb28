#include "trainer/models/blocks/channels.hpp"

#include <algorithm>

namespace trainer {

int64_t make_divisible(double v, int64_t divisor, int64_t min_value) {
  if (min_value == 0) min_value = divisor;
  int64_t rounded = std::max(min_value, static_cast<int64_t>(v + static_cast<double>(divisor) / 2) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

}  // namespace trainer
