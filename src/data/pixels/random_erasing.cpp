#include "trainer/data/pixels/random_erasing.hpp"

#include <cmath>

namespace trainer {

namespace {

// A 31-bit integer hash in int64 tensor arithmetic that never overflows (31-bit values times a 27-bit
// constant), so CPU and CUDA give the same integers.
torch::Tensor hash31(torch::Tensor x) {
  constexpr int64_t kMask = 0x7FFFFFFF, kMul = 0x45D9F3B;
  for (int round = 0; round < 3; ++round) x = ((x.bitwise_xor(x.__rshift__(16))) * kMul).bitwise_and(kMask);
  return x;
}

// Standard normal values from position counters under a per-sample seed (Box-Muller over two hashes).
torch::Tensor normal_at(const torch::Tensor& seed, const torch::Tensor& counter) {
  const auto key = hash31(seed.bitwise_xor(hash31(counter * 2)));
  const auto key2 = hash31(seed.bitwise_xor(hash31(counter * 2 + 1)));
  const auto u1 = (key.to(torch::kDouble) + 1.0) / 2147483648.0;  // (0, 1]
  const auto u2 = key2.to(torch::kDouble) / 2147483648.0;
  return (torch::sqrt(-2.0 * torch::log(u1)) * torch::cos(2.0 * M_PI * u2)).to(torch::kFloat);
}

}  // namespace

EraseBox plan_erase(const RandomErasingConfig& c, int64_t height, int64_t width, SplitMix64& rng) {
  EraseBox box;
  if (!(uniform01(rng) < c.prob)) return box;
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(c.ratio.at(0)), log_hi = std::log(c.ratio.at(1));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * (c.scale.at(0) + (c.scale.at(1) - c.scale.at(0)) * uniform01(rng));
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * uniform01(rng));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    box.top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(height - h + 1)));
    box.left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(width - w + 1)));
    box.height = h;
    box.width = w;
    box.noise_seed = static_cast<int64_t>(rng.next() & 0x7FFFFFFF);
    return box;
  }
  return box;
}

torch::Tensor erase_noise(int64_t noise_seed, int64_t channels, int64_t height, int64_t width) {
  const auto counter = torch::arange(channels * height * width, torch::kInt64).view({channels, height, width});
  return normal_at(torch::full({1}, noise_seed, torch::kInt64), counter);
}

void erase_batch(torch::Tensor& x, const torch::Tensor& boxes, ErasingValue value) {
  if (!boxes.defined() || boxes.numel() == 0) return;
  if (!x.is_cpu()) return erase_batch_masked(x, boxes, value);
  // On the CPU, sample by sample: only the rectangles' pixels are touched.
  const auto rows = boxes.to(torch::kCPU).contiguous();
  const int64_t* b = rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows.size(0); ++i, b += kEraseColumns) {
    if (b[2] == 0) continue;
    auto region = x[i].slice(1, b[0], b[0] + b[2]).slice(2, b[1], b[1] + b[3]);
    if (value == ErasingValue::zero) region.zero_();
    else region.copy_(erase_noise(b[4], x.size(1), b[2], b[3]));
  }
}

void erase_batch_masked(torch::Tensor& x, const torch::Tensor& boxes, ErasingValue value) {
  if (!boxes.defined() || boxes.numel() == 0) return;
  const auto b = boxes.to(x.device()).view({-1, kEraseColumns, 1, 1, 1});
  const int64_t channels = x.size(1), height = x.size(2), width = x.size(3);
  const auto opts = torch::TensorOptions().dtype(torch::kInt64).device(x.device());
  const auto rows = torch::arange(height, opts).view({1, 1, height, 1});
  const auto cols = torch::arange(width, opts).view({1, 1, 1, width});
  const auto top = b.select(1, 0), left = b.select(1, 1), h = b.select(1, 2), w = b.select(1, 3);
  // [B, 1, H, W]: inside each sample's rectangle (empty when its height is 0).
  const auto inside =
      rows.ge(top).logical_and(rows.lt(top + h)).logical_and(cols.ge(left)).logical_and(cols.lt(left + w));
  if (value == ErasingValue::zero) {
    x.masked_fill_(inside, 0.0);
    return;
  }
  // Position of each pixel inside its rectangle, counted as erase_noise counts: (c * h + row) * w + column.
  const auto ch = torch::arange(channels, opts).view({1, channels, 1, 1});
  const auto counter = ((ch * h + (rows - top)) * w + (cols - left)).clamp_min(0);
  const auto noise = normal_at(b.select(1, 4), counter);
  x.copy_(torch::where(inside, noise.to(x.scalar_type()), x));
}

}  // namespace trainer
