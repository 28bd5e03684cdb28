// torchvision's RandomErasing, split in two so it can run over the whole batch on the device: the loader plans
// each sample's rectangle (a pure function of the sample's seed) and the training step erases the normalised
// batch in one pass. value "0" writes zeros (the mean pixel); "random" writes standard normal noise whose value
// at (channel, row, column) of the rectangle is a hash of (noise seed, position), so the same on any device and
// with any batch composition.
//   EraseBox box = plan_erase(config, 224, 224, rng);            // in BatchDataset, per sample
//   erase_batch(x, batch.erase, ErasingValue::zero);             // x: float [B, C, H, W], normalised
#pragma once

#include <torch/torch.h>

#include "trainer/config/config.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

struct EraseBox {
  int64_t top = 0, left = 0, height = 0, width = 0;  // height 0: nothing erased
  int64_t noise_seed = 0;                            // 31 bits, for ErasingValue::random
};

// torchvision's forward and get_params: erase with probability prob; up to 10 tries at an area and a
// log-uniform aspect ratio (height / width) whose rectangle fits strictly inside; none fits: nothing erased.
EraseBox plan_erase(const RandomErasingConfig& config, int64_t height, int64_t width, SplitMix64& rng);

// Columns of ImageBatch::erase: top, left, height, width, noise seed (int64, one row per sample).
constexpr int64_t kEraseColumns = 5;

// Erases the planned rectangles of `x` (float, [B, C, H, W], any memory format, on any device) in place: on the
// CPU rectangle by rectangle, elsewhere with erase_batch_masked.
void erase_batch(torch::Tensor& x, const torch::Tensor& boxes, ErasingValue value);

// The same in one pass over the whole batch (masks from the rectangles, noise from position counters): a few
// kernels on a GPU however many samples are erased.
void erase_batch_masked(torch::Tensor& x, const torch::Tensor& boxes, ErasingValue value);

// The noise of one rectangle, [C, height, width] float on the CPU: the per-sample definition erase_batch follows.
torch::Tensor erase_noise(int64_t noise_seed, int64_t channels, int64_t height, int64_t width);

}  // namespace trainer
