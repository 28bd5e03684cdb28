// Whether every rank of a data-parallel run still holds rank 0's weights bit for bit. Each rank sums the bit
// patterns of its tensors (one pass over the weights, on their device) and the sums are compared with rank 0's
// (two one-element collectives). Run once per epoch: ranks that drifted apart (a rank that skipped a step, a
// non-deterministic reduction) would otherwise go on training different models in silence.
//   if (const int64_t n = ranks_differing_from_rank0(group, model.parameters())) throw TrainError(...);
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "trainer/distributed/collectives.hpp"

namespace trainer {

// The sum of the tensors' elements read as integers of their width (wrapping in 64 bits): equal tensors give
// equal sums; a change of any bit changes it.
int64_t bit_checksum(const std::vector<torch::Tensor>& tensors);

// How many ranks hold a `value` other than rank 0's (0: all agree). A collective.
int64_t ranks_differing_from_rank0(Collectives& group, int64_t value);

// How many ranks hold tensors whose checksum differs from rank 0's (0: all identical). A collective.
int64_t ranks_differing_from_rank0(Collectives& group, const std::vector<torch::Tensor>& tensors);

}  // namespace trainer
