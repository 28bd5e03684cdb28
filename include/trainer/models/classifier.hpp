// The interface every model implements: normalized float images [N, C, H, W] in, logits [N, classes] out.
// Parameter names follow the Python references (torchvision for ResNets) so weights move both ways.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>

namespace trainer {

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
};

using ClassifierPtr = std::shared_ptr<Classifier>;

}  // namespace trainer
