// The session step, the upper of the training step's two layers (fit() and `trainer bench --config`): a loader's
// batch goes to the device, is normalised, erased and mixed by the (seed, step, micro-batch) draw, then runs the
// model step (step.hpp); after the last micro-batch the update is taken, the step counted and the EMA updated.
//   const TrainedMicroBatch m = train_micro_batch(session, batch, micro);
//   if (micro + 1 == session.config.train.accumulate_steps) { UpdateResult u = take_optimizer_step(session); }
#pragma once

#include <torch/types.h>

#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/engine/step.hpp"

namespace trainer {

struct TrainedMicroBatch {
  MicroResult out;
  torch::Tensor labels;  // the hard labels on the model's device
};

// Micro-batch `micro` (0-based) of optimizer step session.state.step + 1, batch session.state.batch_in_epoch of
// its epoch. Data-parallel: `last` (the step's last micro-batch) makes its backward pass all-reduce the
// gradients, and a rank's share of the global batch weighs its loss by its size.
TrainedMicroBatch train_micro_batch(Session& session, const ImageBatch& batch, int64_t micro, bool last = true);

// Data-parallel: the averaged gradients are waited for; then apply_update(), the step is counted
// (session.state.step) and, unless the loss scaler skipped it, the weight EMA follows.
UpdateResult take_optimizer_step(Session& session);

}  // namespace trainer
