#include "trainer/models/blocks/stochastic_depth.hpp"

#include <torch/torch.h>

namespace trainer {

torch::Tensor stochastic_depth(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  const double survival = 1.0 - p;
  std::vector<int64_t> size(static_cast<size_t>(x.dim()), 1);
  size[0] = x.size(0);
  torch::Tensor noise = torch::empty(size, x.options()).bernoulli_(survival);
  if (survival > 0.0) noise.div_(survival);
  return x * noise;
}

double depth_rate(double rate, int64_t index, int64_t denominator) {
  return denominator > 0 ? rate * static_cast<double>(index) / static_cast<double>(denominator) : 0.0;
}

}  // namespace trainer
