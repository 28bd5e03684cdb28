// The shape every image of a source has once loaded: the batch shape without the batch dimension.
#pragma once

#include <cstdint>

namespace trainer {

struct ImageShape {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
};

}  // namespace trainer
