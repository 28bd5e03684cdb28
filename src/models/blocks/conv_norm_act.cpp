#include "trainer/models/blocks/conv_norm_act.hpp"

#include <torch/torch.h>

namespace trainer {

ConvNormAct::ConvNormAct(const ConvNormActOptions& o) : activation_(o.activation) {
  conv = register_module("0", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.in, o.out, o.kernel)
                                                    .stride(o.stride)
                                                    .padding((o.kernel - 1) / 2)
                                                    .groups(o.groups)
                                                    .bias(false)));
  norm = register_module("1", SyncBatchNorm2d(o.out, o.norm.eps, o.norm.momentum));
}

torch::Tensor ConvNormAct::forward(torch::Tensor x) {
  return activate(norm->forward(conv->forward(x)), activation_);
}

std::string ConvNormAct::describe(LayerGraph& g, const std::string& x, const std::string& prefix) const {
  const std::string y = g.batch_norm(g.conv(x, prefix + ".0", *conv), prefix + ".1", norm->eps());
  return describe_activation(g, y, activation_);
}

}  // namespace trainer
