// Where a run decodes its JPEGs (data.decode), decided once when the session starts and logged once:
//   cpu  -> the CPU;
//   cuda -> the GPU, or a config error (exit 2) when this build has no nvJPEG or the run is not on CUDA;
//   auto -> the GPU when this build has nvJPEG and the run is on CUDA, else the CPU (and the CPU, with a warning,
//           when nvJPEG cannot be opened there).
// The pixel policies (AutoAugment family, ColorJitter) work on Pillow-exact pixels on the CPU, so with one of
// them the run decodes on the CPU, for cuda as well as auto, and the reason says so.
// A run (training, eval, bench data) opens its one decoder here: the choice, and the decoder it calls for.
//   const RunDecoder d = open_run_decoder(config, device, log);
//   log.info("decode: {}", d.describe());
#pragma once

#include <spdlog/logger.h>
#include <torch/types.h>

#include <memory>
#include <string>

#include "trainer/config/config.hpp"
#include "trainer/data/device/batch_decoder.hpp"

namespace trainer {

struct DecodeChoice {
  DecodeDevice where = DecodeDevice::cpu;  // cpu or cuda
  std::string reason;                      // "cuda (data.decode auto: nvJPEG on cuda:0)"
  bool gpu() const { return where == DecodeDevice::cuda; }
};

// Throws ConfigError for data.decode cuda on a build without nvJPEG or a run that is not on CUDA.
DecodeChoice choose_decode(const Config& c, const torch::Device& device, bool nvjpeg_available);

struct RunDecoder {
  DecodeChoice choice;
  std::shared_ptr<BatchDecoder> decoder;  // null when the loader workers decode everything
  // "cuda (data.decode auto: nvJPEG on cuda:0); nvJPEG on cuda:0, hardware backend ..."
  std::string describe() const { return choice.reason + (decoder ? "; " + decoder->describe() : ""); }
};

// choose_decode() for this build, and the decoder it calls for; `log` hears of nvJPEG's failures.
RunDecoder open_run_decoder(const Config& c, const torch::Device& device, std::shared_ptr<spdlog::logger> log);

}  // namespace trainer
