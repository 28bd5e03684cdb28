// The training loop: epochs of optimizer steps, evaluation, checkpoints. Reads top to bottom in fit.cpp.
//   FitResult r = fit(session);                       // to config.train.epochs
//   FitResult r = fit(session, /*stop_after_epoch=*/1);  // --smoke stops early to exercise resume
#pragma once

#include <optional>

#include "trainer/engine/evaluate.hpp"
#include "trainer/engine/session.hpp"

namespace trainer {

struct FitResult {
  TrainState state;
  std::optional<EvalResult> last_eval;
};

// Trains from session.state.epoch up to config.train.epochs (or stop_after_epoch, when given and smaller).
// Writes last.pt / best.pt into the run folder; throws TrainError on a non-finite loss.
FitResult fit(Session& session, std::optional<int64_t> stop_after_epoch = std::nullopt);

}  // namespace trainer
