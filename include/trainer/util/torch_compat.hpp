// The one place that knows about LibTorch version differences (1.13 locally, 2.x with CUDA).
// Code elsewhere calls these helpers instead of testing TORCH_VERSION_* itself.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <string>

namespace trainer::compat {

#define TRAINER_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

inline std::string torch_version() { return TORCH_VERSION; }

// The CPU generator's state, as a uint8 tensor that round-trips bit for bit.
inline torch::Tensor cpu_rng_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

inline void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace trainer::compat
