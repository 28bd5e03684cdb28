#include "input_stream.hpp"

#ifdef TRAINER_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <array>
#include <mutex>

namespace trainer {

c10::cuda::CUDAStream input_stream(c10::DeviceIndex device) {
  // Process-wide by nature (a CUDA stream outlives every run and loader that uses it): made once per device.
  static std::mutex made;
  static std::array<cudaStream_t, 64> streams{};
  const std::lock_guard<std::mutex> lock(made);
  cudaStream_t& s = streams.at(static_cast<size_t>(device));
  if (!s) {
    const c10::cuda::CUDAGuard guard(device);
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return c10::cuda::getStreamFromExternal(s, device);
}

}  // namespace trainer
#endif
