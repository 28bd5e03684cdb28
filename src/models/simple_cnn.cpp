#include "trainer/models/simple_cnn.hpp"

#include <torch/torch.h>

#include "trainer/util/error.hpp"

namespace trainer {

SimpleCnn::SimpleCnn(const SimpleCnnOptions& o) {
  const int64_t pooled_h = (o.height - 4) / 2, pooled_w = (o.width - 4) / 2;
  if (pooled_h < 1 || pooled_w < 1)
    throw ConfigError("model.arch: mnist_cnn needs images of at least 6x6, got " + std::to_string(o.height) + "x" +
                      std::to_string(o.width));
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.in_channels, 32, 3)));
  conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)));
  fc1 = register_module("fc1", torch::nn::Linear(64 * pooled_h * pooled_w, 128));
  fc2 = register_module("fc2", torch::nn::Linear(128, o.num_classes));
  dropout = register_module("dropout", torch::nn::Dropout(o.dropout));
}

torch::Tensor SimpleCnn::forward(torch::Tensor x) {
  x = torch::relu(conv1->forward(x));
  x = torch::relu(conv2->forward(x));
  x = torch::max_pool2d(x, 2).flatten(1);
  x = torch::relu(fc1->forward(dropout->forward(x)));
  return fc2->forward(dropout->forward(x));
}

std::optional<LayerGraph> SimpleCnn::inference_graph() const {
  LayerGraph g;
  std::string x = g.relu(g.conv(g.relu(g.conv(g.input, "conv1", *conv1)), "conv2", *conv2));
  x = g.relu(g.linear(g.flatten(g.max_pool(x, 2, 2, 0)), "fc1"));  // dropout is the identity in eval mode
  g.output = g.linear(x, "fc2");
  return g;
}

}  // namespace trainer
