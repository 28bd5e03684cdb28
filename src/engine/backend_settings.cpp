#include "trainer/engine/backend_settings.hpp"

#include <ATen/Context.h>

#include "trainer/platform/process.hpp"

namespace trainer {

void apply_backend_settings(const RunConfig& run) {
  auto& context = at::globalContext();
  if (run.deterministic) set_environment_default("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
  context.setDeterministicAlgorithms(run.deterministic, /*warn_only=*/false);
  context.setDeterministicCuDNN(run.deterministic);
  context.setBenchmarkCuDNN(run.cudnn_benchmark && !run.deterministic);
  context.setAllowTF32CuDNN(run.tf32);
  context.setFloat32MatmulPrecision(run.tf32 ? "high" : "highest");
  context.setUserEnabledMkldnn(run.onednn);
}

std::string describe_backend_settings() {
  const auto& context = at::globalContext();
  auto on = [](bool b) { return b ? "on" : "off"; };
  const bool tf32_matmul = context.float32MatmulPrecision() != at::Float32MatmulPrecision::HIGHEST;
  return std::string("cudnn.benchmark ") + on(context.benchmarkCuDNN()) + ", tf32 conv " +
         on(context.allowTF32CuDNN()) + " matmul " + on(tf32_matmul) + ", deterministic " +
         on(context.deterministicAlgorithms()) + ", oneDNN " + on(context.userEnabledMkldnn());
}

}  // namespace trainer
