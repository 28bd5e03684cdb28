#include "trainer/engine/session_step.hpp"

#include <torch/torch.h>

#include <algorithm>

#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/pixels/random_erasing.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

namespace {

// The images of the optimizer step whose micro-batch `micro` this is, over all ranks: its global batches from the
// step's first, each full but the epoch's last (dropped under data.drop_last).
int64_t step_images(const Session& s, int64_t micro) {
  const int64_t batch = s.config.data.batch_size, size = static_cast<int64_t>(s.train_data->size());
  const auto batches = static_cast<int64_t>(train_batches_per_epoch(s.train_data->size(), s.config.data, s.drop_last));
  const int64_t epoch_images = std::min(batches * batch, size);
  const int64_t first = s.state.batch_in_epoch - micro;
  const int64_t last = std::min(first + s.config.train.accumulate_steps, batches);
  return std::min(last * batch, epoch_images) - first * batch;
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
  const double weight = micro_batch_weight(batch.labels.size(0), step_images(s, micro), s.world.size,
                                          c.train.accumulate_steps);
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
