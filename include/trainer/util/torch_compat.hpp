// The one place that knows about LibTorch version differences (1.13 locally, 2.x with CUDA).
// Code elsewhere calls these helpers instead of testing TORCH_VERSION_* itself.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

// CMake defines TRAINER_CUDA when the LibTorch found has CUDA; CPU builds never see CUDA headers.
#if defined(TRAINER_CUDA) && __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define TRAINER_HAS_CUDA_ALLOCATOR_STATS 1
#endif

namespace c10d {
class ProcessGroup;
class Backend;
}  // namespace c10d

namespace trainer::compat {

#define TRAINER_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

inline std::string torch_version() { return TORCH_VERSION; }

// The alternative T of a module option's variant (padding, padding mode), or null: LibTorch 1.13's options hold
// c10::variant, 2.x's std::variant; argument-dependent lookup picks the matching get_if.
template <class T, class Variant>
const T* variant_get_if(const Variant& v) {
  using std::get_if;
  return get_if<T>(&v);
}

// Peak bytes allocated and reserved by the CUDA caching allocator on device `index`; nullopt without CUDA.
inline std::optional<std::pair<int64_t, int64_t>> cuda_memory_peaks(c10::DeviceIndex index) {
#ifdef TRAINER_HAS_CUDA_ALLOCATOR_STATS
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
  constexpr size_t aggregate = 0;  // StatType::AGGREGATE in every version
  return std::make_pair(static_cast<int64_t>(stats.allocated_bytes[aggregate].peak),
                        static_cast<int64_t>(stats.reserved_bytes[aggregate].peak));
#else
  (void)index;
  return std::nullopt;
#endif
}

// The CPU generator's state, as a uint8 tensor that round-trips bit for bit.
inline torch::Tensor cpu_rng_state() { return at::detail::getDefaultCPUGenerator().get_state(); }

inline void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The generator state of CUDA device `index` (call only when CUDA is available). The generic accessor keeps
// this header free of CUDA includes, so CPU-only builds compile it too.
inline torch::Tensor cuda_rng_state(c10::DeviceIndex index) {
  return at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, index)).get_state();
}

inline void set_cuda_rng_state(c10::DeviceIndex index, const torch::Tensor& state) {
  auto gen = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, index));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Every default generator dropout draws from (the CPU's and each CUDA device's), captured to be put back later.
struct GeneratorStates {
  torch::Tensor cpu;
  std::vector<torch::Tensor> cuda;  // by device index

  static GeneratorStates capture() {
    GeneratorStates g{cpu_rng_state(), {}};
    if (torch::cuda::is_available())
      for (c10::DeviceIndex i = 0; i < static_cast<c10::DeviceIndex>(torch::cuda::device_count()); ++i)
        g.cuda.push_back(cuda_rng_state(i));
    return g;
  }
  void restore() const {
    set_cpu_rng_state(cpu);
    for (size_t i = 0; i < cuda.size(); ++i) set_cuda_rng_state(static_cast<c10::DeviceIndex>(i), cuda[i]);
  }
};

// Autocast for one device type (CPU or CUDA) in one dtype while the guard lives, as Python's torch.autocast:
// the previous state comes back on exit and the cast cache is cleared when the outermost guard ends, so
// cached low-precision weight copies never outlive a step. LibTorch 2.4 replaced the per-device setters
// (set_enabled / set_cpu_enabled ...) with ones that take the device type.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype) : device_(device) {
    previous_enabled_ = enabled();
    previous_dtype_ = get_dtype();
    set(true, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set(previous_enabled_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
#if TRAINER_TORCH_AT_LEAST(2, 4)
  bool enabled() const { return at::autocast::is_autocast_enabled(device_); }
  at::ScalarType get_dtype() const { return at::autocast::get_autocast_dtype(device_); }
  void set(bool on, at::ScalarType dtype) {
    at::autocast::set_autocast_enabled(device_, on);
    at::autocast::set_autocast_dtype(device_, dtype);
  }
#else
  bool cpu() const { return device_ == c10::DeviceType::CPU; }
  bool enabled() const { return cpu() ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled(); }
  at::ScalarType get_dtype() const {
    return cpu() ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
  }
  void set(bool on, at::ScalarType dtype) {
    if (cpu()) {
      at::autocast::set_cpu_enabled(on);
      at::autocast::set_autocast_cpu_dtype(dtype);
    } else {
      at::autocast::set_enabled(on);
      at::autocast::set_autocast_gpu_dtype(dtype);
    }
  }
#endif
  c10::DeviceType device_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// The common base of c10d's Gloo and NCCL process groups: ProcessGroup on 1.13, Backend since 2.0 (where a
// ProcessGroup became a dispatcher over backends). Declared only: code that uses it includes the c10d headers.
#if TRAINER_TORCH_AT_LEAST(2, 0)
using ProcessGroupBackend = c10d::Backend;
#else
using ProcessGroupBackend = c10d::ProcessGroup;
#endif

// c10d's TCPStore options (a template, so this header needs no c10d include). LibTorch 2.4 and later serve the
// store through libuv by default, but builds without libuv (Debian's 2.6) then fail to start it; the classic
// server exists in every version, so it is taken everywhere.
template <class TcpStoreOptions>
void use_classic_tcp_store(TcpStoreOptions& options) {
#if TRAINER_TORCH_AT_LEAST(2, 1)  // the option exists since 2.1
  options.useLibUV = false;
#else
  (void)options;
#endif
}

// softmax(q k^T * scale + bias) v over the last two dimensions ([..., L, d] each), scale 1 / sqrt(d) unless given
// (Swin V2's cosine attention scales q itself and passes 1), with dropout p on the weights when training:
// PyTorch's own math, written out (the only path LibTorch 1.13 has, and the reference the fused kernels are
// checked against).
torch::Tensor attention_math(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const std::optional<torch::Tensor>& bias, double dropout, bool training,
                             std::optional<double> scale = std::nullopt);

// The same through LibTorch's scaled_dot_product_attention where it exists (2.1 and later: fused flash and
// memory-efficient kernels on CUDA, an additive bias through the kernels that take one); attention_math on 1.13.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const std::optional<torch::Tensor>& bias, double dropout, bool training,
                        std::optional<double> scale = std::nullopt);

}  // namespace trainer::compat
