#include "trainer/util/device.hpp"

#include <torch/torch.h>

#ifdef TRAINER_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "trainer/util/error.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

torch::Device select_device(const std::string& name) {
  if (name == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (name.size() > 5) {
      try {
        size_t used = 0;
        index = std::stoi(name.substr(5), &used);
        if (used != name.size() - 5 || index < 0) throw std::invalid_argument(name);
      } catch (const std::exception&) {
        throw ConfigError("run.device: expected \"cuda:N\" with N a device index, got \"" + name + "\"");
      }
    }
    const int count = static_cast<int>(torch::cuda::device_count());
    if (index >= count)
      throw ConfigError("run.device: \"" + name + "\" requested but this machine has " + std::to_string(count) +
                        " CUDA device(s); use \"cpu\" or \"auto\"");
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw ConfigError("run.device: unknown device \"" + name + "\" (valid: auto, cpu, cuda, cuda:N)");
}

torch::Device rank_device(const torch::Device& selected, int64_t local_rank, int64_t local_size) {
  if (!selected.is_cuda()) return selected;
  const auto devices = static_cast<int64_t>(torch::cuda::device_count());
  if (local_size > devices)
    throw UsageError("data-parallel: " + std::to_string(local_size) + " processes on this machine but " +
                     std::to_string(devices) + " CUDA device(s); start at most one process per GPU");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

void make_current(const torch::Device& device) {
#ifdef TRAINER_CUDA
  if (device.is_cuda() && device.index() >= 0) c10::cuda::set_device(device.index());
#else
  (void)device;
#endif
}

std::string describe_runtime() {
  std::string out = "LibTorch " + compat::torch_version();
  out += torch::cuda::is_available() ? ", CUDA devices: " + std::to_string(torch::cuda::device_count())
                                     : ", CUDA: not available";
  out += ", CPU threads: " + std::to_string(torch::get_num_threads());
  return out;
}

}  // namespace trainer
