// A model's weights as named tensors, under the names torchvision's state_dict() uses, and loading such a set
// into a model with the checks a fine-tuning user needs (strict, with excludes by glob pattern).
//   write_safetensors(path, model_state(*model), metadata);
//   WeightsReport r = load_weights(*model, read_safetensors(path).tensors, {"fc.*"}, path.string());
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "trainer/io/safetensors.hpp"

namespace trainer {

// Parameters and buffers (running statistics, num_batches_tracked) with dotted names, in PyTorch's state_dict order:
// each module's own parameters, then its buffers, then its children's, depth first.
NamedTensors model_state(const torch::nn::Module& model);

struct WeightsReport {
  std::vector<std::string> loaded;     // copied from the file, in model order
  std::vector<std::string> excluded;   // model keys matching an exclude pattern: left as initialised
  std::vector<std::string> ignored;    // file keys matching an exclude pattern, absent from the model
  std::vector<std::string> defaulted;  // *.num_batches_tracked absent from the file (older torchvision files)
  std::vector<std::string> unused_patterns;
  int64_t values = 0;  // elements copied
};

// Copies every model key from `tensors` except those matching an `exclude` glob ("fc.*", "layer4.*.bn?.*").
// Floating-point values are converted to the model's dtype (F16/BF16 files load into F32 models). Throws
// WeightsError naming `source` with the missing, unexpected and mismatched keys when anything else differs;
// the model is left unchanged then.
WeightsReport load_weights(torch::nn::Module& model, const NamedTensors& tensors,
                           const std::vector<std::string>& exclude, const std::string& source);

// "loaded 122 tensors (11,689,512 values); excluded 2 (fc.weight, fc.bias)" for the log.
std::string describe(const WeightsReport& report);

}  // namespace trainer
