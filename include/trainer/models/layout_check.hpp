// The start-up self-check of the convolution kernels a model will run: before a model trains or evaluates in
// channels_last, its forward pass in that layout is compared with a float64 contiguous reference on the same
// weights and input (batch 2 at the run's image size). Some LibTorch builds compute channels_last convolutions
// wrongly (seen: Debian 13's LibTorch 2.6 with its system oneDNN 3.7 on AVX-512, a 1x1 stride-2 convolution off
// by up to 1.3); a run must never train on such kernels silently. On a mismatch the model falls back to a layout
// that passes, and the caller logs the one-line warning.
//   const KernelLayout layout = place_in_checked_layout(*model, c.model, shape, device, warn);
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct KernelLayout {
  bool channels_last = false;
  bool mkldnn = true;    // oneDNN (mkldnn) CPU kernels; false: they were switched off for this process
  bool checked = false;  // the self-check ran (it runs only for channels_last requests)
  double error = 0.0;    // the chosen layout's relative error against the reference
  std::string warning;   // non-empty when the request was overridden: which layout, and why
};

// model.channels_last resolved for a device: auto is on on CUDA for the models whose row says so (every ResNet,
// wide and ResNeXt included), off elsewhere.
bool wants_channels_last(const ModelConfig& model, const torch::Device& device);

// max |output - reference| / max |reference| of one candidate layout; mkldnn false runs with oneDNN off.
using LayoutProbe = std::function<double(bool channels_last, bool mkldnn)>;

// Relative error above which a layout's kernels count as wrong. float32 against float64 through a ResNet-50 is
// about 1e-6; TF32 (switched off while probing) would be about 1e-3; broken kernels are 1e-1 and more.
inline constexpr double kLayoutTolerance = 1e-3;

// A relative error with two significant digits ("5.1e-07"), as the warnings and doctor print it.
std::string describe_error(double error);

// The decision, apart from the model: channels_last as requested if it passes; else contiguous; else the requested
// layout with oneDNN off. Throws TrainError when no candidate passes. `subject` names the model in the warning.
KernelLayout choose_layout(bool channels_last, const LayoutProbe& probe, const std::string& subject);

// The probe for a model config at an input shape on a device (fresh weights from a fixed seed; LibTorch's
// default generator is left as it was).
LayoutProbe model_layout_probe(const ModelConfig& model, const ImageShape& input, const torch::Device& device);

// wants_channels_last + choose_layout with the model's probe, cached per process by (model, shape, device), and
// applied: oneDNN is switched off process-wide when that is the fallback chosen.
KernelLayout resolve_layout(const ModelConfig& model, const ImageShape& input, const torch::Device& device);

// What every command does with a built model: resolve_layout, hand its warning (prefixed "model.channels_last: ")
// to `warn`, and place the model on the device in the chosen layout (place_model).
KernelLayout place_in_checked_layout(Classifier& model, const ModelConfig& config, const ImageShape& input,
                                     const torch::Device& device, const std::function<void(const std::string&)>& warn);

}  // namespace trainer
