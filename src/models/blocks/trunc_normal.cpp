#include "trainer/models/blocks/trunc_normal.hpp"

#include <torch/torch.h>

#include <cmath>

namespace trainer {

void trunc_normal_(torch::Tensor& t, double std) {
  torch::NoGradGuard no_grad;
  const double a = -2.0, b = 2.0;
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double l = cdf(a / std), u = cdf(b / std);
  t.uniform_(2 * l - 1, 2 * u - 1).erfinv_().mul_(std * std::sqrt(2.0)).clamp_(a, b);
}

}  // namespace trainer
