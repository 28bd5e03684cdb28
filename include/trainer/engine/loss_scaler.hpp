// Dynamic loss scaling for float16 mixed precision, with PyTorch GradScaler's semantics: the loss is
// multiplied by `scale` before backward; before the optimizer step the gradients are divided by it and checked;
// a step whose gradients hold inf or NaN is skipped and the scale multiplied by backoff_factor; after
// growth_interval clean steps in a row the scale is multiplied by growth_factor.
//   LossScaler scaler(config.train.amp, /*enabled=*/dtype == float16);
//   scaler.scale(loss).backward();
//   const bool overflow = scaler.unscale(params);   // before clipping
//   if (!overflow) optimizer.step();
//   scaler.update(overflow);
// CUDA gradients go through ATen's fused AMP kernels; other devices through plain tensor ops (same result),
// so the logic runs, and is tested, on CPU. Disabled, every call is a no-op and scale() returns the loss.
#pragma once

#include <torch/types.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

class LossScaler {
 public:
  LossScaler() = default;  // disabled
  LossScaler(const AmpConfig& amp, bool enabled);

  bool enabled() const { return enabled_; }
  double scale_value() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }

  torch::Tensor scale(const torch::Tensor& loss) const;
  // Divides the gradients of `parameters` by the scale. Returns true when any of them holds inf or NaN.
  bool unscale(const std::vector<torch::Tensor>& parameters) const;
  // After each optimizer step (taken or skipped).
  void update(bool overflow);

  // For checkpoints: scale, growth tracker and skipped-step count.
  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

 private:
  bool enabled_ = false;
  double scale_ = 1.0;
  double growth_factor_ = 2.0;
  double backoff_factor_ = 0.5;
  int64_t growth_interval_ = 2000;
  int64_t growth_tracker_ = 0;  // clean steps since the last change of scale
  int64_t skipped_ = 0;
};

}  // namespace trainer
