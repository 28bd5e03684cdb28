// Device selection from run.device ("auto", "cpu", "cuda", "cuda:N") and a description of what
// this LibTorch build can use, for `trainer --version` and the run log.
#pragma once

#include <torch/types.h>

#include <string>

namespace trainer {

// Throws ConfigError (naming run.device) for an unknown name or a CUDA device that is not present.
torch::Device select_device(const std::string& name);

// A data-parallel rank's device: on CUDA, process LOCAL_RANK of a machine takes cuda:LOCAL_RANK. Throws
// UsageError when the machine runs more processes than it has CUDA devices.
torch::Device rank_device(const torch::Device& selected, int64_t local_rank, int64_t local_size);

// Makes `device` this thread's current CUDA device (nothing on the CPU), once at the start of a run: NCCL's
// communicator, cuDNN's handles and any tensor made without a device then land on the rank's own GPU.
void make_current(const torch::Device& device);

// One line per fact: LibTorch version, CUDA availability and devices, intra-op threads.
std::string describe_runtime();

}  // namespace trainer
