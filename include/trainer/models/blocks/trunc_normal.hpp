// torch.nn.init.trunc_normal_(t, std=std) with its default bounds a = -2, b = 2 (absolute values, so at std 0.02
// nothing is cut): the same inverse-CDF method, in place. ConvNeXt's and ViT's initialisation.
#pragma once

#include <torch/types.h>

namespace trainer {

void trunc_normal_(torch::Tensor& t, double std);

}  // namespace trainer
