// Shared by the tests that compare with Debian's python3-torchvision (PilParity, AugmentParity, Interop): whether
// it is there, the test image of the pixel comparisons, and the byte comparison.
#pragma once

#include <opencv2/core.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"

namespace trainer::testing {

inline bool torchvision_available() {
  static const bool available =
      run_command(std::string(TRAINER_PYTHON) + " -c 'import PIL, torchvision'").exit_code == 0;
  return available;
}

// Smooth gradients with noise and a checkerboard edge: any rounding difference in a resize, warp or blend
// changes some of these pixels.
inline cv::Mat parity_image(int rows, int cols, int channels, uint64_t seed = 12345) {
  cv::Mat image(rows, cols, CV_8UC(channels));
  cv::RNG rng(seed);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      for (int ch = 0; ch < channels; ++ch) {
        const int edge = (c / 9 + r / 7) % 2 == 0 ? 60 : 0;
        const int v = (r * 255 / rows + c * (ch + 1) * 97 / cols + edge) % 256 + rng.uniform(-20, 21);
        image.ptr<uint8_t>(r)[c * channels + ch] = cv::saturate_cast<uint8_t>(v);
      }
  return image;
}

// How many bytes of `ours` differ from `expected`, and by how much at most.
struct ByteDiff {
  size_t differing = 0;
  int worst = 0;
};
inline ByteDiff byte_diff(const std::vector<uint8_t>& expected, const cv::Mat& ours) {
  ByteDiff d;
  for (size_t j = 0; j < expected.size(); ++j) {
    const int delta = std::abs(static_cast<int>(expected[j]) - static_cast<int>(ours.data[j]));
    d.differing += delta != 0;
    d.worst = std::max(d.worst, delta);
  }
  return d;
}

}  // namespace trainer::testing
