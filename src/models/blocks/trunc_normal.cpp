#include "trainer/models/blocks/trunc_normal.hpp"

#include <torch/torch.h>

namespace trainer {

void trunc_normal_(torch::Tensor& t, double std) {
  torch::NoGradGuard no_grad;
  const double a = -2.0, b = 2.0;
  t.normal_(0.0, std);
  // Each redraw keeps a value with probability P(a <= X <= b), over 0.95 for any std up to 1: a few rounds.
  for (;;) {
    const torch::Tensor outside = t.lt(a).logical_or_(t.gt(b));
    const int64_t count = outside.sum().item<int64_t>();
    if (count == 0) return;
    t.masked_scatter_(outside, torch::empty({count}, t.options()).normal_(0.0, std));
  }
}

}  // namespace trainer
