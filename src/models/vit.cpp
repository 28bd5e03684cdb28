#include "trainer/models/vit.hpp"

#include <torch/torch.h>

#include <cmath>

#include "trainer/models/blocks/mlp.hpp"
#include "trainer/models/blocks/multihead_attention.hpp"
#include "trainer/models/blocks/trunc_normal.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace nn = torch::nn;

namespace {

constexpr double kVitLayerNormEps = 1e-6;

nn::LayerNorm layer_norm(int64_t dim) { return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(kVitLayerNormEps)); }

// EncoderBlock: x + dropout(attention(ln_1(x))), then + mlp(ln_2(.)).
struct EncoderBlock final : nn::Module {
  EncoderBlock(const ViTSpec& s, double dropout) : dropout(dropout) {
    ln_1 = register_module("ln_1", layer_norm(s.hidden));
    self_attention = register_module("self_attention", std::make_shared<MultiheadAttention>(s.hidden, s.heads, 0.0));
    ln_2 = register_module("ln_2", layer_norm(s.hidden));
    mlp = register_module("mlp", std::make_shared<Mlp>(s.hidden, s.mlp, dropout));
  }
  torch::Tensor forward(const torch::Tensor& input) {
    const torch::Tensor x =
        torch::dropout(self_attention->forward(ln_1->forward(input)), dropout, is_training()) + input;
    return x + mlp->forward(ln_2->forward(x));
  }
  double dropout;
  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  std::shared_ptr<MultiheadAttention> self_attention;
  std::shared_ptr<Mlp> mlp;
};

}  // namespace

const std::vector<std::pair<std::string, ViTSpec>>& vit_specs() {
  static const std::vector<std::pair<std::string, ViTSpec>> specs{
      {"vit_b_16", {16, 12, 12, 768, 3072}},  {"vit_b_32", {32, 12, 12, 768, 3072}},
      {"vit_l_16", {16, 24, 16, 1024, 4096}}, {"vit_l_32", {32, 24, 16, 1024, 4096}},
      {"vit_h_14", {14, 32, 16, 1280, 5120}},
  };
  return specs;
}

VisionTransformer::VisionTransformer(const ViTSpec& spec, const std::string& arch, const ImageShape& input,
                                     int64_t num_classes, double dropout)
    : spec_(spec), grid_h_(input.height / spec.patch), grid_w_(input.width / spec.patch) {
  if (input.height % spec.patch != 0 || input.width % spec.patch != 0)
    throw ConfigError("data: " + arch + " cuts images into " + std::to_string(spec.patch) + "x" +
                      std::to_string(spec.patch) + " patches, so their sides must be multiples of " +
                      std::to_string(spec.patch) + ", got " + std::to_string(input.height) + "x" +
                      std::to_string(input.width));
  const int64_t d = spec.hidden;
  class_token_ = register_parameter("class_token", torch::zeros({1, 1, d}));
  conv_proj_ = register_module(
      "conv_proj", nn::Conv2d(nn::Conv2dOptions(input.channels, d, spec.patch).stride(spec.patch).bias(true)));
  encoder_ = register_module("encoder", std::make_shared<nn::Module>());
  // BERT's initialisation, as torchvision's: N(0, 0.02).
  pos_embedding_ = encoder_->register_parameter("pos_embedding", torch::empty({1, grid_h_ * grid_w_ + 1, d}));
  auto layers = encoder_->register_module("layers", std::make_shared<nn::Module>());
  for (int64_t i = 0; i < spec.layers; ++i)
    layers_.push_back(
        layers->register_module("encoder_layer_" + std::to_string(i), std::make_shared<EncoderBlock>(spec, dropout)));
  ln_ = encoder_->register_module("ln", layer_norm(d));
  dropout_ = register_module("dropout", nn::Dropout(dropout));
  auto heads = register_module("heads", std::make_shared<nn::Module>());
  head_ = heads->register_module("head", nn::Linear(d, num_classes));

  torch::NoGradGuard no_grad;
  pos_embedding_.normal_(0, 0.02);
  trunc_normal_(conv_proj_->weight, std::sqrt(1.0 / static_cast<double>(input.channels * spec.patch * spec.patch)));
  nn::init::zeros_(conv_proj_->bias);
  nn::init::zeros_(head_->weight);
  nn::init::zeros_(head_->bias);
}

torch::Tensor VisionTransformer::forward(torch::Tensor images) {
  const int64_t n = images.size(0);
  // [N, D, gh, gw] -> [N, gh * gw, D], the class token first.
  torch::Tensor x = conv_proj_->forward(images).reshape({n, spec_.hidden, -1}).permute({0, 2, 1});
  x = torch::cat({class_token_.expand({n, -1, -1}), x}, 1);
  x = dropout_->forward(x + pos_embedding_);
  for (auto& layer : layers_) x = layer->as<EncoderBlock>()->forward(x);
  x = ln_->forward(x);
  return head_->forward(x.select(1, 0));
}

// Tokens as [N, D, 1, L] (layer_graph.hpp), so LayerNorm, the MLP and GELU are the per-pixel kinds.
std::optional<LayerGraph> VisionTransformer::inference_graph() const {
  LayerGraph g;
  std::string x = g.vit_embedding(g.conv(g.input, "conv_proj", *conv_proj_), "");
  for (int64_t i = 0; i < spec_.layers; ++i) {
    const std::string p = "encoder.layers.encoder_layer_" + std::to_string(i) + ".";
    x = g.add(g.self_attention(g.layer_norm_2d(x, p + "ln_1", kVitLayerNormEps), p + "self_attention", spec_.heads), x);
    const std::string h = g.pixel_linear(g.layer_norm_2d(x, p + "ln_2", kVitLayerNormEps), p + "mlp.0");
    x = g.add(x, g.pixel_linear(g.activation(h, LayerKind::gelu), p + "mlp.3"));
  }
  g.output = g.linear(g.first_token(g.layer_norm_2d(x, "encoder.ln", kVitLayerNormEps)), "heads.head");
  return g;
}

Classifier::Tensors VisionTransformer::adapted_weights(Tensors tensors,
                                                       const std::function<void(const std::string&)>& say) const {
  for (auto& [name, t] : tensors) {
    // MLPBlock's version 1 names (torchvision's first ViT files): mlp.linear_1 and mlp.linear_2.
    for (const auto& [old_part, new_part] : {std::pair{".mlp.linear_1.", ".mlp.0."}, {".mlp.linear_2.", ".mlp.3."}}) {
      const size_t at = name.find(old_part);
      if (at != std::string::npos) name.replace(at, std::string(old_part).size(), new_part);
    }
    if (name != "encoder.pos_embedding" || t.dim() != 3 || t.size(0) != 1 || t.size(2) != spec_.hidden ||
        t.size(1) == pos_embedding_.size(1))
      continue;
    // interpolate_embeddings: a square grid of the file's tokens, resized bicubically (align_corners) to ours.
    const int64_t tokens = t.size(1) - 1;
    const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(tokens))));
    if (side * side != tokens) continue;  // not a square grid: the load names the shape mismatch
    torch::NoGradGuard no_grad;
    const torch::Tensor grid = t.slice(1, 1).permute({0, 2, 1}).reshape({1, spec_.hidden, side, side});
    const torch::Tensor resized =
        torch::nn::functional::interpolate(grid.to(torch::kFloat), torch::nn::functional::InterpolateFuncOptions()
                                                                       .size(std::vector<int64_t>{grid_h_, grid_w_})
                                                                       .mode(torch::kBicubic)
                                                                       .align_corners(true))
            .to(t.scalar_type());
    if (say)
      say("encoder.pos_embedding: a " + std::to_string(side) + "x" + std::to_string(side) +
          " patch grid in the file, resized to this model's " + std::to_string(grid_h_) + "x" +
          std::to_string(grid_w_) + " (bicubic, as torchvision's interpolate_embeddings)");
    t = torch::cat({t.slice(1, 0, 1), resized.reshape({1, spec_.hidden, -1}).permute({0, 2, 1})}, 1);
  }
  return tensors;
}

}  // namespace trainer
