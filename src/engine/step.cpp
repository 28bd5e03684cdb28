#include "trainer/engine/step.hpp"

#include <torch/torch.h>

#include "trainer/engine/grad_clip.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

StepOptions step_options(const TrainConfig& train, const torch::Device& device) {
  StepOptions o{train.label_smoothing, train.accumulate_steps, train.clip_grad_norm, std::nullopt, device.type()};
  const AmpConfig& amp = train.amp;
  if (!amp.enabled || (amp.cuda_only && !device.is_cuda())) return o;
  if (!device.is_cuda() && !device.is_cpu())
    throw ConfigError("train.amp: mixed precision runs on CPU or CUDA, not on " + device.str());
  if (device.is_cpu() && amp.dtype == AmpDtype::float16)
    throw ConfigError(
        "train.amp.dtype: float16 autocast needs CUDA; on CPU use \"bfloat16\" (or set "
        "train.amp.cuda_only to train in float32 there)");
  o.autocast = amp.dtype == AmpDtype::float16 ? at::kHalf : at::kBFloat16;
  return o;
}

std::string describe_precision(const StepOptions& o) {
  if (!o.autocast) return "float32";
  return o.uses_scaler() ? "float16 autocast with dynamic loss scaling" : "bfloat16 autocast";
}

MicroResult forward_backward(Classifier& model, const MixedBatch& batch, const StepOptions& options,
                             const LossScaler& scaler, double loss_weight) {
  // The loss is taken in float32 whatever the autocast dtype, as torch.autocast does for cross-entropy.
  const torch::Tensor logits = float_logits(model, batch.images, options.device, options.autocast);
  const torch::Tensor loss = mixed_cross_entropy(logits, batch, options.label_smoothing, options.class_weights);
  torch::Tensor divided = loss_weight != 1.0 ? loss * loss_weight : loss;
  if (options.accumulate_steps > 1) divided = divided / static_cast<double>(options.accumulate_steps);
  scaler.scale(divided).backward();
  return {logits.detach(), loss.detach()};
}

double micro_batch_weight(int64_t images, int64_t step_images, int64_t world, int64_t accumulate_steps) {
  // Whole numbers far below 2^53: the product is exact, and equal ones divide to exactly 1.
  return static_cast<double>(images * world * accumulate_steps) / static_cast<double>(step_images);
}

UpdateResult apply_update(Classifier& model, torch::optim::Optimizer& optimizer, LossScaler& scaler,
                          const StepOptions& options) {
  UpdateResult result;
  const auto parameters = model.parameters();
  result.skipped = scaler.unscale(parameters);  // clipping below sees the true gradients
  if (!result.skipped) {
    if (options.clip_grad_norm > 0) result.grad_norm = clip_grad_norm(parameters, options.clip_grad_norm);
    optimizer.step();
  }
  scaler.update(result.skipped);
  // Dropping the gradients (rather than zeroing them) spares a pass over every parameter; backward
  // allocates them afresh. Module::zero_grad takes the flag on both LibTorch 1.13 and 2.x.
  model.zero_grad(/*set_to_none=*/true);
  return result;
}

}  // namespace trainer
