// torch.nn.init.trunc_normal_(t, std=std) with its default bounds a = -2, b = 2 (absolute values, so at std 0.02
// nothing is cut): ConvNeXt's, ViT's and Swin's initialisation. The same distribution as torch's inverse-CDF
// method, drawn by rejection instead (normal draws, the ones outside [a, b] drawn again): torch's erfinv costs ~4x a
// normal draw per value, seconds at start-up for a ViT-L or a Swin-B.
#pragma once

#include <torch/types.h>

namespace trainer {

void trunc_normal_(torch::Tensor& t, double std);

}  // namespace trainer
