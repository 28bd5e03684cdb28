// Device selection from run.device ("auto", "cpu", "cuda", "cuda:N") and a description of what
// this LibTorch build can use, for `trainer --version` and the run log.
#pragma once

#include <torch/types.h>

#include <string>

namespace trainer {

// Throws ConfigError (naming run.device) for an unknown name or a CUDA device that is not present.
torch::Device select_device(const std::string& name);

// One line per fact: LibTorch version, CUDA availability and devices, intra-op threads.
std::string describe_runtime();

}  // namespace trainer
