#include "trainer/cli/doctor_checks.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <thread>

#include "trainer/engine/loss_scaler.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/text.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

namespace {

// The BLAS library mapped into this process: Debian's LibTorch uses whichever libblas.so.3 the alternatives
// system points at, and the generic reference one is several times slower for linear layers.
std::string loaded_blas() {
  std::string found;
  for (const std::string& path : loaded_library_paths()) {
    for (const char* name : {"openblas", "mkl_rt", "libmkl", "blis", "/blas/libblas", "libblas"})
      if (path.find(name) != std::string::npos && found.empty()) found = path;
  }
  return found;
}

// Name and total memory through the CUDA driver API, loaded at run time so CPU builds need no CUDA headers.
struct DriverInfo {
  std::string name;
  size_t total = 0;
};
DriverInfo cuda_driver_info(int index) {
  DriverInfo info;
  void* lib = load_cuda_driver();
  if (!lib) return info;
  using Init = int (*)(unsigned);
  using Get = int (*)(int*, int);
  using Name = int (*)(char*, int, int);
  using Total = int (*)(size_t*, int);
  auto init = reinterpret_cast<Init>(library_symbol(lib, "cuInit"));
  auto get = reinterpret_cast<Get>(library_symbol(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<Name>(library_symbol(lib, "cuDeviceGetName"));
  auto total = reinterpret_cast<Total>(library_symbol(lib, "cuDeviceTotalMem_v2"));
  int device = 0;
  char buffer[256] = {};
  if (init && get && name && init(0) == 0 && get(&device, index) == 0 && name(buffer, sizeof(buffer) - 1, device) == 0)
    info.name = buffer;
  if (total && get && get(&device, index) == 0) total(&info.total, device);
  return info;
}

void check_cuda_device(Report& report, int index) {
  const std::string label = "cuda:" + std::to_string(index);
  const DriverInfo info = cuda_driver_info(index);
  try {
    const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    // A real allocation of 256 MiB, written and read back.
    auto block = torch::ones({64 * 1024 * 1024}, torch::TensorOptions().device(device));
    const double sum = block.sum().item<double>();
    block.reset();
    // A matrix product, against the CPU's.
    torch::manual_seed(0);
    const auto a = torch::randn({512, 512}), b = torch::randn({512, 512});
    const double error = (a.to(device).mm(b.to(device)).cpu() - a.mm(b)).abs().max().item<double>();
    // One float16 autocast step with the loss scaler, on a small linear model.
    torch::nn::Linear linear(64, 10);
    linear->to(device);
    const auto before = linear->weight.detach().clone();
    AmpConfig amp;
    amp.enabled = true;
    amp.dtype = AmpDtype::float16;
    LossScaler scaler(amp, true);
    torch::optim::SGD sgd(linear->parameters(), torch::optim::SGDOptions(0.1));
    torch::Tensor loss;
    {
      compat::AutocastGuard autocast(torch::kCUDA, torch::kHalf);
      const auto x = torch::randn({32, 64}, torch::TensorOptions().device(device));
      const auto y = torch::randint(10, {32}, torch::TensorOptions().device(device).dtype(torch::kLong));
      loss = torch::nn::functional::cross_entropy(linear(x).to(torch::kFloat), y);
    }
    scaler.scale(loss).backward();
    const bool overflow = scaler.unscale(linear->parameters());
    if (!overflow) sgd.step();
    scaler.update(overflow);
    const bool moved = !torch::equal(before, linear->weight.detach());
    const bool good = sum == 64.0 * 1024 * 1024 && error < 1e-2 && std::isfinite(loss.item<double>()) && moved;
    report.add(good ? Verdict::ok : Verdict::failed, label,
               (info.name.empty() ? std::string("CUDA device") : info.name) +
                   (info.total ? ", " + gib(static_cast<double>(info.total)) : std::string()) +
                   ": 256 MiB allocation, 512x512 matmul (max error " + format_number(error) +
                   "), float16 autocast + loss scaler step " + (good ? "all fine" : "FAILED"),
               good ? "" : "check the driver and CUDA versions against this LibTorch build");
  } catch (const std::exception& e) {
    report.add(Verdict::failed, label,
               (info.name.empty() ? std::string() : info.name + ": ") +
                   std::string(e.what()).substr(0, std::string(e.what()).find('\n')),
               "check the driver (nvidia-smi) and that LibTorch was built for this CUDA");
  }
}

}  // namespace

void check_runtime(Report& report, DoctorContext&) {
  const std::string parallel = at::get_parallel_info();
  const bool openmp = parallel.find("OpenMP") != std::string::npos;
  report.add(Verdict::ok, "libtorch",
             "LibTorch " + compat::torch_version() + ", CUDA " + (torch::cuda::is_available() ? "yes" : "no") +
                 ", cuDNN " + (torch::cuda::cudnn_is_available() ? "yes" : "no") + ", parallel backend " +
                 (openmp ? "OpenMP" : "native"));
  const std::string blas = loaded_blas();
  if (blas.empty())
    report.add(Verdict::warning, "blas", "no BLAS library found mapped in the process",
               "on Debian, install libopenblas0-pthread");
  else if (blas.find("/blas/libblas") != std::string::npos)
    report.add(Verdict::warning, "blas", "reference BLAS " + blas + " (slow linear layers)",
               "apt-get install libopenblas0-pthread");
  else report.add(Verdict::ok, "blas", blas);
  const unsigned cores = std::thread::hardware_concurrency();
  const int threads = at::get_num_threads();
  report.add(threads > static_cast<int>(cores) ? Verdict::warning : Verdict::ok, "threads",
             std::to_string(threads) + " intra-op, " + std::to_string(at::get_num_interop_threads()) + " inter-op, " +
                 std::to_string(cores) + " cores",
             threads > static_cast<int>(cores) ? "more threads than cores slows training: set run.threads" : "");
}

void check_cuda_devices(Report& report, DoctorContext&) {
  if (!torch::cuda::is_available()) {
    report.add(Verdict::ok, "cuda", "no CUDA device: training runs on the CPU",
               "for a GPU, build against a CUDA LibTorch (CMake preset cuda)");
    return;
  }
  for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) check_cuda_device(report, i);
}

}  // namespace trainer
