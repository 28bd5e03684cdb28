#include "trainer/util/torch_compat.hpp"

#include <cmath>

namespace trainer::compat {

torch::Tensor attention_math(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const std::optional<torch::Tensor>& bias, double dropout, bool training,
                             std::optional<double> scale) {
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  torch::Tensor scores = torch::matmul(s == 1.0 ? q : q * s, k.transpose(-2, -1));
  if (bias) scores = scores + *bias;
  torch::Tensor weights = torch::softmax(scores, -1);
  if (dropout > 0 && training) weights = torch::dropout(weights, dropout, true);
  return torch::matmul(weights, v);
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const std::optional<torch::Tensor>& bias, double dropout, bool training,
                        std::optional<double> scale) {
#if TRAINER_TORCH_AT_LEAST(2, 1)
  return at::scaled_dot_product_attention(q, k, v, bias, training ? dropout : 0.0, /*is_causal=*/false, scale);
#else
  return attention_math(q, k, v, bias, dropout, training, scale);
#endif
}

}  // namespace trainer::compat
