#include "trainer/models/blocks/activation.hpp"

#include <torch/torch.h>

namespace trainer {

torch::Tensor activate(const torch::Tensor& x, Activation a) {
  switch (a) {
    case Activation::none: return x;
    case Activation::relu: return torch::relu(x);
    case Activation::silu: return torch::silu(x);
    case Activation::sigmoid: return torch::sigmoid(x);
    case Activation::hardswish: return torch::hardswish(x);
    case Activation::hardsigmoid: return torch::hardsigmoid(x);
    case Activation::gelu: return torch::gelu(x);
  }
  return x;
}

std::string describe_activation(LayerGraph& g, const std::string& x, Activation a) {
  switch (a) {
    case Activation::none: return x;
    case Activation::relu: return g.activation(x, LayerKind::relu);
    case Activation::silu: return g.activation(x, LayerKind::silu);
    case Activation::sigmoid: return g.activation(x, LayerKind::sigmoid);
    case Activation::hardswish: return g.activation(x, LayerKind::hardswish);
    case Activation::hardsigmoid: return g.activation(x, LayerKind::hardsigmoid);
    case Activation::gelu: return g.activation(x, LayerKind::gelu);
  }
  return x;
}

}  // namespace trainer
