// The elementwise activations the families use, applied in a forward pass or written into a layer graph.
//   x = activate(x, Activation::hardswish);   v = describe_activation(graph, v, Activation::hardswish);
#pragma once

#include <torch/types.h>

#include <string>

#include "trainer/models/layer_graph.hpp"

namespace trainer {

// gelu is the exact (erf) GELU, torch.nn.GELU's default.
enum class Activation { none, relu, silu, sigmoid, hardswish, hardsigmoid, gelu };

torch::Tensor activate(const torch::Tensor& x, Activation activation);
// `x` itself for Activation::none.
std::string describe_activation(LayerGraph& graph, const std::string& x, Activation activation);

}  // namespace trainer
