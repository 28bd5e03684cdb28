// The interface every model implements: normalized float images [N, C, H, W] in, logits [N, classes] out.
// Parameter names follow the Python references (torchvision for ResNets) so weights move both ways.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>
#include <optional>

#include "trainer/models/layer_graph.hpp"

namespace trainer {

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  // The eval-mode forward pass as layers over the model's named parameters, which the deployment formats
  // (ONNX, TorchScript) translate; nullopt for a model that cannot be exported.
  virtual std::optional<LayerGraph> inference_graph() const { return std::nullopt; }
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
