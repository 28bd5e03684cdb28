// The model step, the lower of the training step's two layers (the session step, session_step.hpp, runs it on a
// loader's batches), so every benchmark times exactly what training runs. One optimizer step is
// `accumulate_steps` micro-batches, each forward and backward, then one update.
//
// Session-free (`trainer bench --arch` calls it on random images): forward_backward() (autocast forward and loss,
// loss / accumulate_steps, scaled backward) and apply_update() (unscale, overflow check, clipping, optimizer step,
// scale update, gradients dropped).
//   StepOptions o = step_options(config.train, device);
//   LossScaler scaler(config.train.amp, o.uses_scaler());
//   auto r = forward_backward(*model, mix_batch(x, y, mix, seed), o, scaler);
//   if (last micro-batch) { UpdateResult u = apply_update(*model, *optimizer, scaler, o); }
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <optional>

#include "trainer/config/config.hpp"
#include "trainer/engine/loss_scaler.hpp"
#include "trainer/engine/mix.hpp"
#include "trainer/models/classifier.hpp"

namespace trainer {

struct StepOptions {
  double label_smoothing = 0.0;
  int64_t accumulate_steps = 1;
  double clip_grad_norm = 0.0;             // 0: no clipping
  std::optional<at::ScalarType> autocast;  // the autocast dtype, when mixed precision is on
  c10::DeviceType device = c10::DeviceType::CPU;
  torch::Tensor class_weights = {};  // train.class_weights per class on the model's device; undefined: unweighted

  bool uses_scaler() const { return autocast == at::kHalf; }
};

// Resolves train.amp for `device`: float16 autocast exists only on CUDA (a ConfigError on CPU);
// amp.cuda_only turns mixed precision off on CPU.
StepOptions step_options(const TrainConfig& train, const torch::Device& device);

// "float32", "bfloat16 autocast", "float16 autocast with loss scaling": for logs and bench output.
std::string describe_precision(const StepOptions& options);

struct MicroResult {
  torch::Tensor logits;  // detached, float32
  torch::Tensor loss;    // detached scalar, the micro-batch's mean loss (not divided, not scaled); reading it
                         // waits for the device, so callers accumulate instead
};

// `loss_weight` multiplies the loss before backward (micro_batch_weight): a micro-batch holding more or fewer
// images than the step's average one weighs its mean loss so that the step's gradient is the mean over its images.
// Then the loss is divided by accumulate_steps.
MicroResult forward_backward(Classifier& model, const MixedBatch& batch, const StepOptions& options,
                             const LossScaler& scaler, double loss_weight = 1.0);

// The loss weight of a micro-batch of `images` (this process's share) in an optimizer step that holds
// `step_images` over all its micro-batches and `world` processes: images * world * accumulate_steps / step_images,
// so that with forward_backward's division by accumulate_steps and the ranks' average the step's gradient is the
// mean over the images it holds. Exactly 1 in every full step. An epoch's last step may hold one smaller
// micro-batch, or fewer micro-batches: its 16 images weigh 16/16, not 16/(2 x 16).
double micro_batch_weight(int64_t images, int64_t step_images, int64_t world, int64_t accumulate_steps);

struct UpdateResult {
  bool skipped = false;     // the loss scaler found inf/NaN gradients: no update was made
  torch::Tensor grad_norm;  // total gradient norm before clipping, a device scalar; defined when
                            // clipping is on (reading it waits for the device)
};

UpdateResult apply_update(Classifier& model, torch::optim::Optimizer& optimizer, LossScaler& scaler,
                          const StepOptions& options);

}  // namespace trainer
