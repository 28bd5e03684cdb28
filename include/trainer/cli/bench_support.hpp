// Measuring helpers shared by the bench commands: peak memory of the process and of CUDA devices, medians.
#pragma once

#include <torch/types.h>

#include <vector>

namespace trainer {

// Peak resident set size of this process so far, MiB.
double peak_rss_mib();

struct CudaMemory {
  bool known = false;  // false on CPU builds or CPU devices
  double peak_allocated_mib = 0;
  double peak_reserved_mib = 0;
};
// The caching allocator's peaks on `device` since the process started.
CudaMemory cuda_peak_memory(const torch::Device& device);

double median(std::vector<double> values);

}  // namespace trainer
