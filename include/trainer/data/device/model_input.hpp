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
torch::Tensor to_model_input(const torch::Tensor& images, const Normalization& norm, bool channels_last);

}  // namespace trainer
