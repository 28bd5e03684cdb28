// torchvision's VisionTransformer (vit_b_16, vit_b_32, vit_l_16, vit_l_32, vit_h_14), layer for layer:
// class_token [1, 1, D], conv_proj (patch x patch, stride patch), encoder.pos_embedding [1, 1 + tokens, D],
// encoder.layers.encoder_layer_{i} (pre-norm: ln_1, self_attention, ln_2, mlp.0 and mlp.3 with exact GELU),
// encoder.ln, heads.head; LayerNorm eps 1e-6; the same names, shapes and initialisation. Built for one input size
// (a multiple of the patch, not necessarily square); weights for another size load with the position embedding
// resized as torchvision's interpolate_embeddings does (bicubic, align_corners, the class token's kept).
//   ClassifierPtr net = build_model(model_config, {224, 224, 3});   // models/factory.hpp: model.arch
#pragma once

#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/data/pixels/image_shape.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct ViTSpec {
  int64_t patch = 16, layers = 12, heads = 12, hidden = 768, mlp = 3072;
};

const std::vector<std::pair<std::string, ViTSpec>>& vit_specs();

class VisionTransformer final : public Classifier {
 public:
  // Throws ConfigError when the input's sides are not multiples of the patch.
  VisionTransformer(const ViTSpec& spec, const std::string& arch, const ImageShape& input, int64_t num_classes,
                    double dropout);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;
  Tensors adapted_weights(Tensors tensors, const std::function<void(const std::string&)>& say) const override;

 private:
  ViTSpec spec_;
  int64_t grid_h_, grid_w_;
  torch::Tensor class_token_;
  torch::nn::Conv2d conv_proj_{nullptr};
  std::shared_ptr<torch::nn::Module> encoder_;
  torch::Tensor pos_embedding_;
  std::vector<std::shared_ptr<torch::nn::Module>> layers_;
  torch::nn::LayerNorm ln_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace trainer
