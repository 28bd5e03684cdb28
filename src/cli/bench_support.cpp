#include "trainer/cli/bench_support.hpp"

#include <algorithm>

#include "trainer/util/torch_compat.hpp"

namespace trainer {

CudaMemory cuda_peak_memory(const torch::Device& device) {
  CudaMemory m;
  if (!device.is_cuda()) return m;
  const auto peaks = compat::cuda_memory_peaks(device.index() < 0 ? 0 : device.index());
  if (!peaks) return m;
  m.known = true;
  m.peak_allocated_mib = static_cast<double>(peaks->first) / (1024.0 * 1024.0);
  m.peak_reserved_mib = static_cast<double>(peaks->second) / (1024.0 * 1024.0);
  return m;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace trainer
