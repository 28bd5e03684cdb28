// Dropout draws from LibTorch's default generators: the CPU's, and on CUDA the rank's device's. In a data-parallel
// run every rank has its own stream, so the ranks' masks differ as a one-process run's differ across its batch:
// rank 0 keeps the seed's stream (a one-process run's), rank r > 0 is reseeded from (seed, r, step) once the
// model is built. Checkpoints hold every rank's states, gathered over the group, so a run resumed on as many
// ranks draws the same masks on each; on another number of ranks, ranks > 0 start new streams.
//   const GeneratorRows rows = gather_rank_generators(group);      // every rank, as a collective
//   restore_rank_generators(rows, rank, device);                   // on resume
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "trainer/distributed/collectives.hpp"
#include "trainer/io/checkpoint.hpp"

namespace trainer {

// Every rank's current generator states, one row per rank; a collective (each rank contributes its own row).
GeneratorRows gather_rank_generators(Collectives& group);

// This rank's row put back into the CPU generator and, on CUDA, its device's.
void restore_rank_generators(const GeneratorRows& rows, int64_t rank, const torch::Device& device);

// A rank's own stream, a pure function of (seed, rank, step); rank 0 never takes it.
void seed_rank_generators(int64_t seed, int64_t rank, int64_t step);

}  // namespace trainer
