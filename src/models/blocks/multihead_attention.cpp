#include "trainer/models/blocks/multihead_attention.hpp"

#include <torch/nn/functional/linear.h>
#include <torch/nn/init.h>

#include "trainer/util/torch_compat.hpp"

namespace trainer {

MultiheadAttention::MultiheadAttention(int64_t dim, int64_t heads, double dropout)
    : heads_(heads), dropout_(dropout) {
  // Registered in nn.MultiheadAttention's order, so the state dict lists them as PyTorch does.
  in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * dim, dim}));
  in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * dim}));
  out_proj = register_module("out_proj", torch::nn::Linear(dim, dim));
  // PyTorch's _reset_parameters: Xavier-uniform projection, zero biases; out_proj.weight keeps Linear's default.
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(in_proj_weight);
  torch::nn::init::zeros_(out_proj->bias);
}

torch::Tensor MultiheadAttention::forward(const torch::Tensor& x) {
  const int64_t n = x.size(0), tokens = x.size(1), dim = x.size(2);
  // [N, L, 3D] -> [3, N, heads, L, D / heads]
  const torch::Tensor qkv = torch::nn::functional::linear(x, in_proj_weight, in_proj_bias)
                                .reshape({n, tokens, 3, heads_, dim / heads_})
                                .permute({2, 0, 3, 1, 4});
  const torch::Tensor y = compat::attention(qkv[0], qkv[1], qkv[2], std::nullopt, dropout_, is_training());
  return out_proj->forward(y.transpose(1, 2).reshape({n, tokens, dim}));
}

}  // namespace trainer
