// Where a run decodes its JPEGs (data.decode), decided once when the session starts and logged once:
//   cpu  -> the CPU;
//   cuda -> the GPU, or a config error (exit 2) when this build has no nvJPEG or the run is not on CUDA;
//   auto -> the GPU when this build has nvJPEG and the run is on CUDA, else the CPU.
// The pixel policies (AutoAugment family, ColorJitter) work on Pillow-exact pixels on the CPU, so with one of
// them the run decodes on the CPU, for cuda as well as auto, and the reason says so.
//   const DecodeChoice d = choose_decode(config, device, nvjpeg_built());
//   log.info("decode: {}", d.reason);
#pragma once

#include <torch/types.h>

#include <string>

#include "trainer/config/config.hpp"

namespace trainer {

struct DecodeChoice {
  DecodeDevice where = DecodeDevice::cpu;  // cpu or cuda
  std::string reason;                      // "cuda (data.decode auto: nvJPEG on cuda:0)"
  bool gpu() const { return where == DecodeDevice::cuda; }
};

// Throws ConfigError for data.decode cuda on a build without nvJPEG or a run that is not on CUDA.
DecodeChoice choose_decode(const Config& c, const torch::Device& device, bool nvjpeg_available);

}  // namespace trainer
