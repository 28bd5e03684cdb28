#include "trainer/engine/session_step.hpp"

#include <torch/torch.h>

#include <algorithm>

#include "trainer/data/pixels/random_erasing.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

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
  auto x = to_model_input(batch.images, s.norm, s.layout.channels_last, &s.input_buffer);
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
