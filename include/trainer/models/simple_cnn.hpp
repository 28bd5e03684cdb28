// The CNN of PyTorch's classic MNIST example: conv 3x3 (32), ReLU, conv 3x3 (64), ReLU, max-pool 2,
// flatten, linear (128), ReLU, linear (classes). Names conv1, conv2, fc1, fc2 as in that example.
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "trainer/models/classifier.hpp"

namespace trainer {

struct SimpleCnnOptions {
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  int64_t height = 28;  // input size fixes fc1's width: 64 * ((h - 4) / 2) * ((w - 4) / 2), 9216 for 28x28
  int64_t width = 28;
  double dropout = 0.0;
};

class SimpleCnn final : public Classifier {
 public:
  explicit SimpleCnn(const SimpleCnnOptions& options);
  torch::Tensor forward(torch::Tensor images) override;
  std::optional<LayerGraph> inference_graph() const override;

 private:
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};

}  // namespace trainer
