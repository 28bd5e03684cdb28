#include "trainer/models/factory.hpp"

#include <utility>

#include "trainer/models/resnet.hpp"
#include "trainer/models/simple_cnn.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {
namespace {

ClassifierPtr build_simple_cnn(const ModelConfig& m, const ImageShape& in) {
  if (m.stem != StemKind::imagenet || m.zero_init_residual)
    throw ConfigError("model.stem and model.zero_init_residual apply to ResNets; mnist_cnn has neither");
  return std::make_shared<SimpleCnn>(SimpleCnnOptions{/*in_channels=*/m.in_channels, /*num_classes=*/m.num_classes,
                                                      /*height=*/in.height, /*width=*/in.width, /*dropout=*/m.dropout});
}

}  // namespace

const std::vector<ModelRow>& model_rows() {
  static const std::vector<ModelRow> rows = [] {
    std::vector<ModelRow> t{{"mnist_cnn", build_simple_cnn, /*channels_last_on_cuda=*/false, /*any_input_size=*/false,
                             /*head=*/{"fc2.*"}, /*weights=*/{}}};
    // Every ResNet (plain, wide, ResNeXt) ends in adaptive pooling and runs its convolutions fastest in
    // channels_last on tensor cores.
    for (const auto& [name, spec] : resnet_specs()) {
      auto build = [spec = spec](const ModelConfig& m, const ImageShape&) -> ClassifierPtr {
        return std::make_shared<ResNet>(ResNetOptions{/*spec=*/spec, /*in_channels=*/m.in_channels,
                                                      /*num_classes=*/m.num_classes, /*stem=*/m.stem,
                                                      /*dropout=*/m.dropout,
                                                      /*zero_init_residual=*/m.zero_init_residual});
      };
      t.push_back({name, build, /*channels_last_on_cuda=*/true, /*any_input_size=*/true, /*head=*/{"fc.*"},
                   /*weights=*/torchvision_weights(name)});
    }
    return t;
  }();
  return rows;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& row : model_rows()) names.push_back(row.name);
  return names;
}

const ModelRow& model_row(const std::string& arch) {
  for (const auto& row : model_rows())
    if (row.name == arch) return row;
  const std::string guess = closest_match(arch, model_names());
  throw ConfigError("model.arch: unknown architecture \"" + arch + "\"" +
                    (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") + " (valid: " + join(model_names()) +
                    ")");
}

ClassifierPtr build_model(const ModelConfig& model, const ImageShape& input) {
  if (model.num_classes < 2)
    throw ConfigError("model.num_classes is " + std::to_string(model.num_classes) +
                      ": a model needs at least 2 classes (0 is resolved from the training set when a run starts)");
  if (input.channels != model.in_channels)
    throw ConfigError("model.in_channels: the data has " + std::to_string(input.channels) +
                      " channel(s) but model.in_channels is " + std::to_string(model.in_channels));
  return model_row(model.arch).build(model, input);
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
