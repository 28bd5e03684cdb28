// Measuring helpers shared by the bench commands: peak memory of CUDA devices, medians (the process's own peak
// is peak_resident_mib() in platform/process.hpp).
#pragma once

#include <torch/types.h>

#include <vector>

#include "trainer/platform/process.hpp"

namespace trainer {

struct CudaMemory {
  bool known = false;  // false on CPU builds or CPU devices
  double peak_allocated_mib = 0;
  double peak_reserved_mib = 0;
};
// The caching allocator's peaks on `device` since the process started.
CudaMemory cuda_peak_memory(const torch::Device& device);

double median(std::vector<double> values);

}  // namespace trainer
