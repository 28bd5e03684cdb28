// The table of models: one row per model.arch with its constructor and the properties the rest of the program
// asks about (default layout, input sizes). No code outside this table looks at an arch's name.
//   const ModelRow& row = model_row(config.model.arch);   // ConfigError listing the valid names when unknown
//   ClassifierPtr m = build_model(config.model, source->shape());
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/models/classifier.hpp"
#include "trainer/models/published_weights.hpp"

namespace trainer {

struct ModelRow {
  std::string name;
  // Parameters are initialised from LibTorch's default generator; the builder may throw ConfigError for keys that
  // do not apply to the model.
  using Builder = std::function<ClassifierPtr(const ModelConfig&, const ImageShape&)>;
  Builder build;
  // model.channels_last auto turns channels_last on for this model on CUDA, where its convolutions then run the
  // tensor-core kernels without layout conversions.
  bool channels_last_on_cuda = false;
  // The model takes any image size (it ends in adaptive pooling), so eval images may be larger than training
  // images (FixRes); false: the classifier is sized for one input.
  bool any_input_size = false;
  // Glob patterns of the classifier layer's keys: model.weights from another task (ImageNet's 1000 classes) leaves
  // these freshly initialised when their shapes differ from the run's.
  std::vector<std::string> head;
  // torchvision's published weights for this arch, which model.weights takes by name.
  std::vector<PublishedWeights> weights;
  // What model.dropout and model.stochastic_depth at -1 stand for (torchvision's defaults); a builder gets them
  // resolved. has_stochastic_depth false: the arch has no residual branch to drop (model.stochastic_depth > 0 is a
  // config error).
  double dropout = 0;
  double stochastic_depth = 0;
  bool has_stochastic_depth = false;
  // The smallest image side the arch takes (its stride product where a layer has no padding: ConvNeXt's 4x4 stem
  // and 2x2 downsampling need 32); a smaller one is a config error.
  int64_t min_size = 1;
  // The block each parameter belongs to in the model's depth order ("" for the classifier), which
  // optim.layer_decay decays the learning rate over; empty for a model without one (mnist_cnn).
  std::function<std::string(const std::string& parameter)> block_of;
  // Takes model.stem and model.zero_init_residual (the ResNets); for any other arch setting them is a config error.
  bool resnet_options = false;
};

// In the order they are listed to users.
const std::vector<ModelRow>& model_rows();
std::vector<std::string> model_names();

// Throws ConfigError for an unknown model.arch (with the closest name and the valid ones); call it before loading
// data to fail fast.
const ModelRow& model_row(const std::string& arch);

// Parameters are initialised from LibTorch's default generator: seed it first for a reproducible start.
ClassifierPtr build_model(const ModelConfig& model, const ImageShape& input);

// Moves the model to `device` and, with channels_last, converts its 4-D parameters and buffers to that memory
// format (Module::to has no memory-format overload). Call before creating the optimizer or restoring it.
void place_model(Classifier& model, const torch::Device& device, bool channels_last);

}  // namespace trainer
