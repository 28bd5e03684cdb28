#include "trainer/distributed/rank_generators.hpp"

#include <torch/torch.h>

#include "trainer/util/hash.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

GeneratorRows gather_rank_generators(Collectives& group) {
  const World& w = group.world();
  // Zeros but for this rank's row: the sum over the ranks is every row, bit for bit.
  auto rows_of = [&](const torch::Tensor& mine) {
    auto rows = torch::zeros({w.size, mine.numel()}, torch::kUInt8);
    rows[w.rank].copy_(mine.flatten());
    group.all_reduce_sum({rows});
    return rows;
  };
  GeneratorRows rows;
  rows.cpu = rows_of(compat::cpu_rng_state());
  if (group.device().is_cuda()) rows.cuda = rows_of(compat::cuda_rng_state(group.device().index()));
  return rows;
}

void restore_rank_generators(const GeneratorRows& rows, int64_t rank, const torch::Device& device) {
  compat::set_cpu_rng_state(rows.cpu[rank].clone());
  if (device.is_cuda() && rows.cuda.defined()) compat::set_cuda_rng_state(device.index(), rows.cuda[rank].clone());
}

void seed_rank_generators(int64_t seed, int64_t rank, int64_t step) {
  const uint64_t stream =
      hash_combine(hash_combine(static_cast<uint64_t>(seed), static_cast<uint64_t>(rank)), static_cast<uint64_t>(step));
  torch::manual_seed(stream);  // the CPU generator and every CUDA device's
}

}  // namespace trainer
