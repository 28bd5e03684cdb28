// The interface every model implements: normalized float images [N, C, H, W] in, logits [N, classes] out.
// Parameter names follow the Python references (torchvision for ResNets) so weights move both ways.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/models/layer_graph.hpp"

namespace trainer {

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  // The eval-mode forward pass as layers over the model's named parameters, which the deployment formats
  // (ONNX, TorchScript) translate; nullopt for a model that cannot be exported.
  virtual std::optional<LayerGraph> inference_graph() const { return std::nullopt; }
  // A state dict from elsewhere (torchvision's file, a fine-tune at another image size) as this model loads it
  // strictly: names older published files use, tensors sized for another input resized to this model's (ViT's
  // position embedding), as torchvision's loading hooks do. `say` tells the user what changed. Default: as it is.
  using Tensors = std::vector<std::pair<std::string, torch::Tensor>>;
  virtual Tensors adapted_weights(Tensors tensors, const std::function<void(const std::string&)>& say) const {
    (void)say;
    return tensors;
  }
};

using ClassifierPtr = std::shared_ptr<Classifier>;

// Whether `module` itself is a BatchNorm layer (1-, 2- or 3-d, or the synchronised one).
bool is_batch_norm(const torch::nn::Module& module);

// Whether any submodule is a BatchNorm layer (1-, 2- or 3-d), which cannot train on a batch of one image.
bool has_batch_norm(const torch::nn::Module& model);

// The model's float32 logits for `images`, its forward pass run under autocast in `autocast` on `device` when
// given (training and evaluation share this, so both see the same mixed-precision forward).
torch::Tensor float_logits(Classifier& model, const torch::Tensor& images, c10::DeviceType device,
                           std::optional<at::ScalarType> autocast);

}  // namespace trainer
