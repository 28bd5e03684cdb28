#include "trainer/engine/run_step.hpp"

#include <torch/torch.h>

#include "trainer/engine/mix.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

TrainedMicroBatch train_micro_batch(Session& s, const ImageBatch& batch, int64_t micro) {
  const Config& c = s.config;
  const auto x = to_model_input(batch.images, s.norm, s.layout.channels_last);
  auto y = batch.labels.to(s.device, /*non_blocking=*/true);
  // The mix draw is a function of (seed, step, micro-batch): resumed runs mix as uninterrupted ones.
  const uint64_t mix_seed = hash_combine(
      hash_combine(static_cast<uint64_t>(c.run.seed) ^ 0x313A71Bull, static_cast<uint64_t>(s.state.step)),
      static_cast<uint64_t>(micro));
  return {forward_backward(*s.model, mix_batch(x, y, c.train.mix, mix_seed), s.step, s.scaler), std::move(y)};
}

UpdateResult take_optimizer_step(Session& s) {
  const UpdateResult u = apply_update(*s.model, *s.optimizer, s.scaler, s.step);
  ++s.state.step;
  if (!u.skipped && s.ema) s.ema->after_step(s.state.step);
  return u;
}

}  // namespace trainer
