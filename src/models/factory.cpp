#include "trainer/models/factory.hpp"

#include <utility>

#include "trainer/models/convnext.hpp"
#include "trainer/models/efficientnet.hpp"
#include "trainer/models/mobilenet_v3.hpp"
#include "trainer/models/regnet.hpp"
#include "trainer/models/resnet.hpp"
#include "trainer/models/simple_cnn.hpp"
#include "trainer/models/swin.hpp"
#include "trainer/models/vit.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/glob.hpp"
#include "trainer/util/text.hpp"

namespace trainer {
namespace {

ClassifierPtr build_simple_cnn(const ModelConfig& m, const ImageShape& in) {
  return std::make_shared<SimpleCnn>(SimpleCnnOptions{/*in_channels=*/m.in_channels, /*num_classes=*/m.num_classes,
                                                      /*height=*/in.height, /*width=*/in.width, /*dropout=*/m.dropout});
}

// The first `count` dot-separated parts of a parameter name ("features.3.1.block.0.weight", 3: "features.3.1").
std::string leading(const std::string& name, int count) {
  size_t end = 0;
  for (int i = 0; i < count && end != std::string::npos; ++i) end = name.find('.', end == 0 ? 0 : end + 1);
  return name.substr(0, end);
}

int64_t part_number(const std::string& name, int index) {
  const std::string part = leading(name, index + 1).substr(leading(name, index).size() + (index > 0 ? 1 : 0));
  return part.empty() || part.find_first_not_of("0123456789") != std::string::npos ? -1 : std::stoll(part);
}

// The blocks optim.layer_decay counts, family by family: stem first, classifier "".
std::string resnet_block(const std::string& p) {
  if (starts_with(p, "fc.")) return "";
  return starts_with(p, "layer") ? leading(p, 2) : "stem";
}

std::string convnext_block(const std::string& p) {  // stages at features.1, 3, 5, 7: each CNBlock a block
  if (starts_with(p, "classifier.")) return "";
  return part_number(p, 1) % 2 == 1 ? leading(p, 3) : leading(p, 2);
}

std::string mobilenet_block(const std::string& p) { return starts_with(p, "classifier.") ? "" : leading(p, 2); }

std::string regnet_block(const std::string& p) {
  if (starts_with(p, "fc.")) return "";
  return starts_with(p, "trunk_output.") ? leading(p, 3) : "stem";
}

// A row of a torchvision family: ends in adaptive pooling, so any image size from min_size up.
ModelRow family_row(const std::string& name, ModelRow::Builder build, std::vector<std::string> head) {
  ModelRow row;
  row.name = name;
  row.build = std::move(build);
  row.channels_last_on_cuda = true;
  row.any_input_size = true;
  row.head = std::move(head);
  row.weights = torchvision_weights(name);
  return row;
}

void add_resnets(std::vector<ModelRow>& t) {
  // Every ResNet (plain, wide, ResNeXt) runs its convolutions fastest in channels_last on tensor cores.
  for (const auto& [name, spec] : resnet_specs()) {
    ModelRow row =
        family_row(name,
                   [spec = spec](const ModelConfig& m, const ImageShape&) -> ClassifierPtr {
                     return std::make_shared<ResNet>(ResNetOptions{/*spec=*/spec, /*in_channels=*/m.in_channels,
                                                                   /*num_classes=*/m.num_classes, /*stem=*/m.stem,
                                                                   /*dropout=*/m.dropout,
                                                                   /*zero_init_residual=*/m.zero_init_residual});
                   },
                   {"fc.*"});
    row.resnet_options = true;
    row.block_of = resnet_block;
    t.push_back(std::move(row));
  }
}

void add_convnexts(std::vector<ModelRow>& t) {
  for (const auto& [name, spec] : convnext_specs()) {
    ModelRow row = family_row(name,
                              [spec = spec](const ModelConfig& m, const ImageShape&) -> ClassifierPtr {
                                return std::make_shared<ConvNeXt>(spec, m.in_channels, m.num_classes, m.dropout,
                                                                  m.stochastic_depth);
                              },
                              {"classifier.2.*"});
    row.stochastic_depth = spec.stochastic_depth;
    row.has_stochastic_depth = true;
    row.min_size = 32;
    row.block_of = convnext_block;
    t.push_back(std::move(row));
  }
}

void add_efficientnets(std::vector<ModelRow>& t) {
  for (const auto& [name, spec] : efficientnet_specs()) {
    ModelRow row = family_row(name,
                              [spec = spec](const ModelConfig& m, const ImageShape&) -> ClassifierPtr {
                                return std::make_shared<EfficientNet>(spec, m.in_channels, m.num_classes, m.dropout,
                                                                      m.stochastic_depth);
                              },
                              {"classifier.1.*"});
    row.dropout = spec.dropout;
    row.stochastic_depth = spec.stochastic_depth;
    row.has_stochastic_depth = true;
    // features.1 .. features.<stages> hold the MBConv stages: each block of them a block; the stem and the last
    // convolution their own.
    row.block_of = [stages = static_cast<int64_t>(spec.stages.size())](const std::string& p) -> std::string {
      if (starts_with(p, "classifier.")) return "";
      const int64_t n = part_number(p, 1);
      return n >= 1 && n <= stages ? leading(p, 3) : leading(p, 2);
    };
    t.push_back(std::move(row));
  }
}

void add_mobilenets(std::vector<ModelRow>& t) {
  for (const auto& [name, spec] : mobilenet_v3_specs()) {
    ModelRow row = family_row(name,
                              [spec = spec](const ModelConfig& m, const ImageShape&) -> ClassifierPtr {
                                return std::make_shared<MobileNetV3>(spec, m.in_channels, m.num_classes, m.dropout);
                              },
                              {"classifier.3.*"});
    row.dropout = 0.2;
    row.block_of = mobilenet_block;
    t.push_back(std::move(row));
  }
}

void add_regnets(std::vector<ModelRow>& t) {
  for (const auto& [name, spec] : regnet_specs()) {
    ModelRow row = family_row(name,
                              [spec = spec](const ModelConfig& m, const ImageShape&) -> ClassifierPtr {
                                return std::make_shared<RegNet>(spec, m.in_channels, m.num_classes, m.dropout);
                              },
                              {"fc.*"});
    row.block_of = regnet_block;
    t.push_back(std::move(row));
  }
}

// The embedding first (class token, patch projection, position embedding), each encoder layer a block, the final
// LayerNorm with the head (BEiT's layer ids).
std::string vit_block(const std::string& p) {
  if (starts_with(p, "encoder.layers.")) return leading(p, 3);
  return starts_with(p, "heads.") || starts_with(p, "encoder.ln.") ? "" : "stem";
}

void add_vits(std::vector<ModelRow>& t) {
  for (const auto& [name, spec] : vit_specs()) {
    ModelRow row = family_row(name,
                              [spec = spec, name = name](const ModelConfig& m, const ImageShape& in) -> ClassifierPtr {
                                return std::make_shared<VisionTransformer>(spec, name, in, m.num_classes, m.dropout);
                              },
                              {"heads.head.*"});
    row.channels_last_on_cuda = false;  // its tensors are tokens [N, L, D]; only the patch projection is a conv
    row.any_input_size = false;         // the position embedding is sized for the training images
    row.min_size = spec.patch;
    row.block_of = vit_block;
    t.push_back(std::move(row));
  }
}

// ConvNeXt's layout: the stem, each block of the stages at features.1, 3, 5, 7, each patch merging between them;
// the final LayerNorm with the head.
std::string swin_block(const std::string& p) {
  if (starts_with(p, "head.") || starts_with(p, "norm.")) return "";
  return convnext_block(p);
}

void add_swins(std::vector<ModelRow>& t) {
  for (const auto& [name, spec] : swin_specs()) {
    ModelRow row =
        family_row(name,
                   [spec = spec](const ModelConfig& m, const ImageShape& in) -> ClassifierPtr {
                     return std::make_shared<SwinTransformer>(spec, in, m.num_classes, m.dropout, m.stochastic_depth);
                   },
                   {"head.*"});
    row.channels_last_on_cuda = false;  // its tensors are tokens [N, H, W, C]; only the patch projection is a conv
    row.stochastic_depth = spec.stochastic_depth;
    row.has_stochastic_depth = true;
    row.min_size = 32;  // the patch (4) and three 2x2 mergings; smaller maps pad to a window anyway
    row.block_of = swin_block;
    t.push_back(std::move(row));
  }
}

// model.dropout / model.stochastic_depth: -1 is the row's own value; anything else below 0 is a mistake.
double resolved(double value, double own, const char* key) {
  if (value == -1) return own;
  if (value < 0)
    throw ConfigError(std::string("model.") + key +
                      ": expected -1 (the architecture's own) or a value in [0, 0.99], got " + format_number(value));
  return value;
}

}  // namespace

const std::vector<ModelRow>& model_rows() {
  static const std::vector<ModelRow> rows = [] {
    ModelRow cnn;
    cnn.name = "mnist_cnn";
    cnn.build = build_simple_cnn;
    cnn.head = {"fc2.*"};
    std::vector<ModelRow> t{cnn};
    add_resnets(t);
    add_convnexts(t);
    add_efficientnets(t);
    add_mobilenets(t);
    add_regnets(t);
    add_vits(t);
    add_swins(t);
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
  const ModelRow& row = model_row(model.arch);
  if (!row.resnet_options && (model.stem != StemKind::imagenet || model.zero_init_residual))
    throw ConfigError("model.stem and model.zero_init_residual apply to ResNets; " + model.arch + " has neither");
  if (input.height < row.min_size || input.width < row.min_size)
    throw ConfigError("data: " + model.arch + " takes images of at least " + std::to_string(row.min_size) + "x" +
                      std::to_string(row.min_size) + " pixels, got " + std::to_string(input.height) + "x" +
                      std::to_string(input.width));
  ModelConfig m = model;
  m.dropout = resolved(model.dropout, row.dropout, "dropout");
  m.stochastic_depth = resolved(model.stochastic_depth, row.stochastic_depth, "stochastic_depth");
  if (m.stochastic_depth > 0 && !row.has_stochastic_depth)
    throw ConfigError("model.stochastic_depth: " + model.arch +
                      " has no residual branches it drops; leave it at -1 or 0");
  ClassifierPtr net = row.build(m, input);
  if (m.head_init_scale != 1.0) {  // ConvNeXt's head_init_scale: a new head that starts near zero
    torch::NoGradGuard no_grad;
    for (auto& p : net->named_parameters())
      if (glob_match_any(row.head, p.key())) p.value().mul_(m.head_init_scale);
  }
  return net;
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
