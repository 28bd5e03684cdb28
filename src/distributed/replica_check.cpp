#include "trainer/distributed/replica_check.hpp"

#include <torch/torch.h>

#include "trainer/util/error.hpp"

namespace trainer {

namespace {

torch::ScalarType same_width_integer(const torch::Tensor& t) {
  switch (t.element_size()) {
    case 1: return torch::kInt8;
    case 2: return torch::kInt16;
    case 4: return torch::kInt32;
    case 8: return torch::kInt64;
  }
  throw Error("bit_checksum: unsupported element size " + std::to_string(t.element_size()), 1);
}

}  // namespace

int64_t bit_checksum(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  torch::Tensor sum;  // on the tensors' device: one read back for all of them, not one per tensor
  for (const auto& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    const auto part = t.detach().contiguous().view(same_width_integer(t)).sum(torch::kInt64);  // int64 sums wrap
    sum = sum.defined() ? sum + part.to(sum.device()) : part;
  }
  return sum.defined() ? sum.item<int64_t>() : 0;
}

int64_t ranks_differing_from_rank0(Collectives& group, const std::vector<torch::Tensor>& tensors) {
  return ranks_differing_from_rank0(group, bit_checksum(tensors));
}

int64_t ranks_differing_from_rank0(Collectives& group, int64_t mine) {
  auto rank0 = torch::tensor(mine, torch::kInt64);
  group.broadcast({rank0}, 0);
  auto differing = torch::tensor(rank0.item<int64_t>() == mine ? 0 : 1, torch::kInt64);
  group.all_reduce_sum({differing});
  return differing.item<int64_t>();
}

}  // namespace trainer
