// The collectives of a data-parallel run on PyTorch's own engine (c10d): a TCPStore rendezvous served by rank 0
// at the world's master address, and a Gloo process group over it (CPU tensors; NCCL for CUDA comes with the
// distributed training loop). Every call blocks until done or until the timeout, which ends the run with an
// error naming the operation rather than leaving the ranks waiting on a dead peer.
//   Collectives group(world, std::chrono::seconds(300));
//   group.all_reduce_sum(grads);   group.broadcast(weights, /*root=*/0);
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "trainer/dist/world.hpp"

namespace trainer {

class Collectives {
 public:
  // Throws UsageError when rank 0 cannot listen on the master port (in use) and TrainError when the other
  // ranks do not all arrive within `timeout`.
  Collectives(const World& world, std::chrono::milliseconds timeout);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  const World& world() const;
  // Sums each tensor over the ranks, in place (one collective per tensor, all in flight together).
  void all_reduce_sum(const std::vector<torch::Tensor>& tensors);
  // One tensor's sum, started in the background: the tensor must stay untouched until the returned function,
  // which waits for the result, has been called.
  std::function<void()> start_all_reduce_sum(const torch::Tensor& tensor);
  // Every rank's tensors become `root`'s, in place.
  void broadcast(const std::vector<torch::Tensor>& tensors, int64_t root = 0);
  void barrier();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainer
