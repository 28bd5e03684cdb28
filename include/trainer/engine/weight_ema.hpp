// An exponential moving average of a model's weights, kept in a second model of the same architecture so it
// can be evaluated and saved like the first: after every `every`-th optimizer step,
//   ema = decay * ema + (1 - decay) * weights      (floating parameters and buffers; integer buffers copied)
// with decay = min(decay, (1 + n) / (10 + n)) over the first updates n when `warmup` is set (timm's ramp).
//   WeightEma ema(config.train.ema, build_model(config.model, shape), *model);
//   ... optimizer.step(); ema.after_step(step);   evaluate(ema.model(), ...)
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

class WeightEma {
 public:
  // `shadow` is a fresh model of the same architecture, on the same device and memory format as `model`;
  // it starts as a copy of `model`. The average follows `model`'s tensors, which must stay in place (weights
  // are restored into them with copy_, never by replacing them).
  WeightEma(const EmaConfig& config, ClassifierPtr shadow, Classifier& model);

  // Call after each optimizer step that was taken, with the number of steps taken so far.
  void after_step(int64_t step);

  Classifier& model() { return *shadow_; }
  const Classifier& model() const { return *shadow_; }
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n) { updates_ = n; }

 private:
  EmaConfig config_;
  ClassifierPtr shadow_;
  std::vector<torch::Tensor> float_shadow_, float_source_;  // parameters and floating buffers, in model order
  std::vector<torch::Tensor> int_shadow_, int_source_;      // integer buffers (num_batches_tracked)
  int64_t updates_ = 0;
};

}  // namespace trainer
