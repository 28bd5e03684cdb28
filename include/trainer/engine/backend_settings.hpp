// run.cudnn_benchmark, run.tf32 and run.deterministic applied to LibTorch's process-wide switches, once per run
// before the model is built.
//   apply_backend_settings(config.run);
//   log->info("backend: {}", describe_backend_settings());
#pragma once

#include <string>

#include "trainer/config/config.hpp"

namespace trainer {

// tf32 covers both cuDNN convolutions and cuBLAS float32 matrix products ("high" float32 matmul precision):
// PyTorch's own defaults are TF32 convolutions and full float32 matmuls, but a CNN's only matmul is its
// classifier, where TF32 costs nothing in accuracy (NVIDIA's and timm's recipes train with it on).
// deterministic also turns cudnn_benchmark off (autotuning picks among algorithms by timing) and sets
// CUBLAS_WORKSPACE_CONFIG=:4096:8 unless already set, which cuBLAS needs for reproducible matmuls.
void apply_backend_settings(const RunConfig& run);

// "cudnn.benchmark on, tf32 on, deterministic off" as they are now in this process.
std::string describe_backend_settings();

}  // namespace trainer
