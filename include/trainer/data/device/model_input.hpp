// The device side of the data flow: a uint8 NHWC batch from the loader becomes the model's float input on the
// model's device, normalised per channel, contiguous or channels_last.
//   const Normalization norm = make_normalization(c.data.mean, c.data.std, c.model.in_channels, device);
//   torch::Tensor x = to_model_input(batch.images, norm, session.layout.channels_last);
#pragma once

#include <torch/types.h>

#include <vector>

namespace trainer {

// Per-channel normalisation constants, ready on the model's device.
struct Normalization {
  torch::Tensor mean;  // float [1, C, 1, 1], 0..255 scale
  torch::Tensor inv_std;
};
Normalization make_normalization(const std::vector<double>& mean, const std::vector<double>& std, int64_t channels,
                                 const torch::Device& device);

// uint8 NHWC on any device -> normalized float NCHW on `norm`'s device, contiguous or channels_last.
// With `reuse` (CPU only): the tensor it holds is written again when it has the shape and nothing else holds it or
// a view of it (the previous step's input, released after its backward); the result is left in it for the next
// call. A ResNet batch of 256 at 224 px is 147 MiB of floats: allocated every step, it is page-faulted and
// zeroed every step, and its place in the heap decides how fast the step runs.
torch::Tensor to_model_input(const torch::Tensor& images, const Normalization& norm, bool channels_last,
                             torch::Tensor* reuse = nullptr);

}  // namespace trainer
