// The collectives of a data-parallel run on PyTorch's own engine (c10d): a TCPStore rendezvous served by rank 0
// at the world's master address (or torchrun's agent), and a process group over it: Gloo (CPU and CUDA tensors)
// or NCCL (CUDA tensors; CPU tensors given to it travel through the rank's device). A Gloo call blocks until done
// or until the timeout, which ends the run with an error naming the operation rather than leaving the ranks
// waiting on a dead peer; NCCL's own watchdog enforces the same timeout on the GPU's queue.
//   Collectives group(world, {std::chrono::seconds(300), DistBackend::gloo, torch::kCPU});
//   group.all_reduce_sum(grads);   group.broadcast(weights, /*root=*/0);
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/distributed/world.hpp"

namespace trainer {

struct CollectivesOptions {
  std::chrono::milliseconds timeout{1800 * 1000};
  DistBackend backend = DistBackend::gloo;  // gloo or nccl (resolve auto with resolve_backend first)
  torch::Device device = torch::kCPU;       // this rank's device: NCCL's, and where staged tensors go
};

// auto: NCCL on CUDA when this build has it (else Gloo, which reduces CUDA tensors too), Gloo on the CPU.
// Throws UsageError for nccl on the CPU or in a build without NCCL.
DistBackend resolve_backend(DistBackend requested, const torch::Device& device);
bool nccl_available();  // whether this build has c10d's NCCL process group (nccl.h found at build time)

class Collectives {
 public:
  // Throws UsageError when rank 0 cannot listen on the master port (in use) and TrainError when the other
  // ranks do not all arrive within `timeout`.
  Collectives(const World& world, const CollectivesOptions& options);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  const World& world() const;
  DistBackend backend() const;
  const torch::Device& device() const;  // this rank's device
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
