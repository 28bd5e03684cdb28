#include "trainer/data/device/model_input.hpp"

#include <torch/torch.h>

#include <array>

#include "trainer/util/reused_memory.hpp"

namespace trainer {

Normalization make_normalization(const std::vector<double>& mean, const std::vector<double>& std, int64_t channels,
                                 const torch::Device& device) {
  auto per_channel = [&](const std::vector<double>& v, bool invert) {
    std::vector<float> out;
    for (int64_t c = 0; c < channels; ++c) {
      const double x = v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
      out.push_back(static_cast<float>(invert ? 1.0 / (255.0 * x) : 255.0 * x));
    }
    return torch::tensor(out).view({1, channels, 1, 1}).to(device);
  };
  return {per_channel(mean, false), per_channel(std, true)};
}

namespace {

// One pass over a CPU batch: uint8 NHWC in, (v - mean[c]) * inv_std[c] out in the requested layout, the same
// float operations as the tensor ops below (so the same bits), but reading the bytes once and writing each
// float once instead of three passes over a 38 MiB float batch (64 x 224 x 224 x 3).
torch::Tensor normalize_on_cpu(const torch::Tensor& images, const Normalization& norm, torch::MemoryFormat format,
                               torch::Tensor* reuse) {
  const int64_t n = images.size(0), h = images.size(1), w = images.size(2), c = images.size(3);
  // The last input's memory, once everything that used it has let it go, written again in place (its first n
  // samples for a smaller batch); `reuse` keeps the largest block.
  const bool spare = reuse && only_holder(*reuse);
  const torch::Tensor out =
      in_memory_of(spare ? *reuse : torch::Tensor(), {n, c, h, w}, torch::TensorOptions().dtype(torch::kFloat), format);
  if (reuse && (!spare || !out.is_alias_of(*reuse))) *reuse = out;
  const auto mean_t = norm.mean.to(torch::kFloat).contiguous(), inv_t = norm.inv_std.to(torch::kFloat).contiguous();
  const float* mean = mean_t.data_ptr<float>();
  const float* inv = inv_t.data_ptr<float>();
  const uint8_t* in = images.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  const int64_t plane = h * w, sample = plane * c;
  const bool pixel_order = format == torch::MemoryFormat::ChannelsLast || c == 1;
  constexpr int64_t kBlock = 48;
  std::array<float, kBlock> m{}, v{};
  for (int64_t k = 0; k < kBlock; ++k) {
    m[static_cast<size_t>(k)] = mean[k % c];
    v[static_cast<size_t>(k)] = inv[k % c];
  }
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const uint8_t* src = in + s * sample;
      float* o = dst + s * sample;
      if (pixel_order) {
        // Blocks of kBlock values repeat the channel pattern (kBlock is a multiple of 1, 2, 3 and 4), so the
        // fixed-length inner loop is contiguous and vectorises.
        int64_t i = 0;
        for (; i + kBlock <= sample; i += kBlock)
          for (int64_t k = 0; k < kBlock; ++k) o[i + k] = (static_cast<float>(src[i + k]) - m[k]) * v[k];
        for (; i < sample; ++i) o[i] = (static_cast<float>(src[i]) - mean[i % c]) * inv[i % c];
      } else {
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t p = 0; p < plane; ++p)
            o[ch * plane + p] = (static_cast<float>(src[p * c + ch]) - mean[ch]) * inv[ch];
      }
    }
  });
  return out;
}

}  // namespace

torch::Tensor to_model_input(const torch::Tensor& images, const Normalization& norm, bool channels_last,
                             torch::Tensor* reuse) {
  // The format is explicit either way: for one channel both layouts have the same bytes, and LibTorch would
  // otherwise guess from the strides which convolution path to take.
  const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  if (norm.mean.device().is_cpu() && images.is_cpu() && images.scalar_type() == torch::kUInt8 && images.dim() == 4 &&
      images.is_contiguous())
    return normalize_on_cpu(images, norm, format, reuse);
  // permute() of NHWC is NCHW with channels_last strides, so the channels_last conversion is a plain cast.
  auto x = images.to(norm.mean.device(), /*non_blocking=*/true)
               .permute({0, 3, 1, 2})
               .to(torch::kFloat, /*non_blocking=*/false, /*copy=*/false, format);
  // In place: one float batch allocated instead of three.
  return x.sub_(norm.mean).mul_(norm.inv_std);
}

}  // namespace trainer
