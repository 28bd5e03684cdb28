// Tensors written again instead of allocated anew: the loader's batches and a CPU step's float input are the
// same few blocks from batch to batch (see BatchPipeline and to_model_input). A block is reused only when its
// holder is the last one holding it or any view of it, and for any size that fits in it (an epoch's smaller last
// batch), so a run's steady state allocates nothing whatever its batch sizes.
//   if (only_holder(spare)) t = in_memory_of(spare, {n, h, w, c}, contiguous_strides({n, h, w, c}), options);
#pragma once

#include <torch/types.h>

#include <vector>

namespace trainer {

// Nobody but the caller's handle holds `t` or a view of its memory.
inline bool only_holder(const torch::Tensor& t) {
  return t.defined() && t.use_count() == 1 && t.storage().use_count() == 1;
}

// Row-major strides of `sizes`; for 4-d sizes (N, C, H, W) and channels_last, those of the NHWC order.
inline std::vector<int64_t> dense_strides(at::IntArrayRef sizes, torch::MemoryFormat format) {
  std::vector<int64_t> strides(sizes.size(), 1);
  if (format == torch::MemoryFormat::ChannelsLast && sizes.size() == 4) {
    const int64_t c = sizes[1], h = sizes[2], w = sizes[3];
    return {h * w * c, 1, w * c, c};
  }
  for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * sizes[i];
  return strides;
}

// A tensor of `sizes` laid out as `format`, over `spare`'s memory when that has the dtype and device of `options`
// and room for it; a new one otherwise. The caller has checked that nobody else holds `spare`.
inline torch::Tensor in_memory_of(const torch::Tensor& spare, at::IntArrayRef sizes,
                                  const torch::TensorOptions& options,
                                  torch::MemoryFormat format = torch::MemoryFormat::Contiguous) {
  const std::vector<int64_t> strides = dense_strides(sizes, format);
  int64_t elements = 1;
  for (int64_t s : sizes) elements *= s;
  if (spare.defined() && spare.scalar_type() == options.dtype() && spare.device() == options.device() &&
      static_cast<int64_t>(spare.storage().nbytes()) >= elements * static_cast<int64_t>(spare.element_size()))
    return torch::empty({0}, options).set_(spare.storage(), 0, sizes, strides);
  return torch::empty(sizes, options.memory_format(format));
}

}  // namespace trainer
