// The model behind `trainer predict` and `trainer bench predict`: a checkpoint rebuilt in its checked kernel
// layout on its configured device, or an exported ONNX or TorchScript file (on the CPU) with the run's config,
// input shape and classes taken from the metadata that export wrote.
//   Predictor p = open_predictor(args.checkpoint, args.model, args.trust_model);
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct Predictor {
  Config config;
  ImageShape input;
  std::vector<std::string> names;  // one per class (numbers where the run recorded none)
  ClassifierPtr model;             // in eval mode
  torch::Device device{torch::kCPU};
  bool channels_last = false;
};

Predictor predictor_from_checkpoint(const std::string& path);
// A format whose files are programs (TorchScript) only with `trust_model` (--trust-model); UsageError otherwise.
Predictor predictor_from_export(const std::string& path, bool trust_model);

// Exactly one of the two, as --checkpoint and --model give them; UsageError otherwise.
Predictor open_predictor(const std::string& checkpoint, const std::string& model, bool trust_model);

}  // namespace trainer
