// The table from model.arch to a constructor. An unknown name is a ConfigError listing the valid ones.
//   ClassifierPtr m = build_model(config.model, source->shape());
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/image_shape.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

std::vector<std::string> model_names();

// Throws ConfigError for an unknown model.arch; call it before loading data to fail fast.
void check_model_arch(const ModelConfig& model);

// Whether the model takes any image size (ResNets end in adaptive pooling), so eval images may be larger than
// training images (FixRes); mnist_cnn's classifier is sized for one input.
bool accepts_any_input_size(const ModelConfig& model);

// Parameters are initialised from LibTorch's default generator: seed it first for a reproducible start.
ClassifierPtr build_model(const ModelConfig& model, const ImageShape& input);

// Moves the model to `device` and, with channels_last, converts its 4-D parameters and buffers to that memory
// format (Module::to has no memory-format overload). Call before creating the optimizer or restoring it.
void place_model(Classifier& model, const torch::Device& device, bool channels_last);

}  // namespace trainer
