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

torch::Tensor ConvNormAct::forward(torch::Tensor x) { return activate(norm->forward(conv->forward(x)), activation_); }

std::string ConvNormAct::describe(LayerGraph& g, const std::string& x, const std::string& prefix) const {
  const std::string y = g.batch_norm(g.conv(x, prefix + ".0", *conv), prefix + ".1", norm->eps());
  return describe_activation(g, y, activation_);
}

void init_convs_and_norms(torch::nn::Module& model, const std::function<void(torch::nn::LinearImpl&)>& linear) {
  namespace nn = torch::nn;
  torch::NoGradGuard no_grad;
  for (auto& module : model.modules(/*include_self=*/false)) {
    if (auto* c = module->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut);
      if (c->bias.defined()) nn::init::zeros_(c->bias);
    } else if (auto* b = module->as<SyncBatchNorm2d>()) {
      nn::init::ones_(b->weight);
      nn::init::zeros_(b->bias);
    } else if (auto* l = module->as<nn::Linear>()) {
      linear(*l);
    }
  }
}

}  // namespace trainer
