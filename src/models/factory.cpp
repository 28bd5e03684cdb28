#include "trainer/models/factory.hpp"

#include <functional>
#include <utility>

#include "trainer/models/resnet.hpp"
#include "trainer/models/simple_cnn.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {
namespace {

using Builder = std::function<ClassifierPtr(const ModelConfig&, const ImageShape&)>;

ClassifierPtr build_simple_cnn(const ModelConfig& m, const ImageShape& in) {
  if (m.stem != StemKind::imagenet || m.zero_init_residual)
    throw ConfigError("model.stem and model.zero_init_residual apply to ResNets; mnist_cnn has neither");
  return std::make_shared<SimpleCnn>(SimpleCnnOptions{m.in_channels, m.num_classes, in.height, in.width, m.dropout});
}

const std::vector<std::pair<std::string, Builder>>& builders() {
  static const std::vector<std::pair<std::string, Builder>> table = [] {
    std::vector<std::pair<std::string, Builder>> t{{"mnist_cnn", build_simple_cnn}};
    for (const auto& [name, spec] : resnet_specs())
      t.emplace_back(name, [spec = spec](const ModelConfig& m, const ImageShape&) -> ClassifierPtr {
        return std::make_shared<ResNet>(
            ResNetOptions{spec, m.in_channels, m.num_classes, m.stem, m.dropout, m.zero_init_residual});
      });
    return t;
  }();
  return table;
}

const Builder& find_builder(const std::string& arch) {
  for (const auto& entry : builders())
    if (entry.first == arch) return entry.second;
  const std::string guess = closest_match(arch, model_names());
  throw ConfigError("model.arch: unknown architecture \"" + arch + "\"" +
                    (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") + " (valid: " + join(model_names()) + ")");
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : builders()) names.push_back(entry.first);
  return names;
}

void check_model_arch(const ModelConfig& model) { find_builder(model.arch); }

bool accepts_any_input_size(const ModelConfig& model) { return model.arch != "mnist_cnn"; }

ClassifierPtr build_model(const ModelConfig& model, const ImageShape& input) {
  if (model.num_classes < 2)
    throw ConfigError("model.num_classes is " + std::to_string(model.num_classes) +
                      ": a model needs at least 2 classes (0 is resolved from the training set when a run starts)");
  if (input.channels != model.in_channels)
    throw ConfigError("model.in_channels: the data has " + std::to_string(input.channels) +
                      " channel(s) but model.in_channels is " + std::to_string(model.in_channels));
  return find_builder(model.arch)(model, input);
}

void place_model(Classifier& model, const torch::Device& device, bool channels_last) {
  model.to(device);
  if (!channels_last) return;
  // Tensor::to, not contiguous(): a 1x1 kernel [O, I, 1, 1] counts as contiguous in both layouts, so
  // contiguous(ChannelsLast) keeps its NCHW strides and the kernels treat it as NCHW (measured: resnet50 with its
  // many 1x1 convs ran ~25% slower). to() restrides whatever suggest_memory_format() calls NCHW, as PyTorch's
  // Module.to(memory_format=...) does.
  torch::NoGradGuard no_grad;
  auto convert = [](torch::Tensor& t) {
    if (t.dim() == 4)
      t.set_data(t.to(t.options(), /*non_blocking=*/false, /*copy=*/false, torch::MemoryFormat::ChannelsLast));
  };
  for (auto& p : model.parameters()) convert(p);
  for (auto& b : model.buffers()) convert(b);
}

}  // namespace trainer
