#include "trainer/engine/step.hpp"

#include <torch/torch.h>

#include "trainer/data/random_erasing.hpp"
#include "trainer/engine/grad_clip.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

// ---- the model step ----

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
  const torch::Tensor loss = mixed_cross_entropy(logits, batch, options.label_smoothing);
  torch::Tensor divided = loss_weight != 1.0 ? loss * loss_weight : loss;
  if (options.accumulate_steps > 1) divided = divided / static_cast<double>(options.accumulate_steps);
  scaler.scale(divided).backward();
  return {logits.detach(), loss.detach()};
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

// ---- the session step ----

namespace {

// Data-parallel: this rank's images over the average share of its global batch (1 when the shares are equal).
double share_weight(const Session& s, int64_t images) {
  if (s.world.size == 1) return 1.0;
  const auto batch = static_cast<size_t>(s.config.data.batch_size);
  const size_t global = std::min(batch, s.train_data->size() - static_cast<size_t>(s.state.batch_in_epoch) * batch);
  return static_cast<double>(images * s.world.size) / static_cast<double>(global);
}

}  // namespace

TrainedMicroBatch train_micro_batch(Session& s, const ImageBatch& batch, int64_t micro, bool last) {
  const Config& c = s.config;
  if (s.reducer) s.reducer->arm(last);
  auto x = to_model_input(batch.images, s.norm, s.layout.channels_last);
  if (batch.erase.defined()) erase_batch(x, batch.erase, c.data.augment.random_erasing.value);
  auto y = batch.labels.to(s.device, /*non_blocking=*/true);
  // The mix draw is a function of (seed, step, micro-batch): resumed runs mix as uninterrupted ones.
  const uint64_t mix_seed =
      hash_combine(hash_combine(static_cast<uint64_t>(c.run.seed) ^ 0x313A71Bull, static_cast<uint64_t>(s.state.step)),
                   static_cast<uint64_t>(micro));
  const double weight = share_weight(s, batch.labels.size(0));
  return {forward_backward(*s.model, mix_batch(x, y, c.train.mix, mix_seed), s.step_options, s.scaler, weight),
          std::move(y)};
}

UpdateResult take_optimizer_step(Session& s) {
  if (s.reducer) s.reducer->finish();
  const UpdateResult u = apply_update(*s.model, *s.optimizer, s.scaler, s.step_options);
  ++s.state.step;
  if (!u.skipped && s.ema) s.ema->after_step(s.state.step);
  return u;
}

}  // namespace trainer
