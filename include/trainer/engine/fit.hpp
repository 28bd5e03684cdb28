// The training loop: epochs of optimizer steps, evaluation, checkpoints. Reads top to bottom in fit.cpp.
//   FitResult r = fit(session);                          // to config.train.epochs
//   FitResult r = fit(session, {.epoch = 1});            // --smoke stops early to exercise resume
#pragma once

#include <optional>

#include "trainer/engine/evaluate.hpp"
#include "trainer/engine/session.hpp"

namespace trainer {

// Where a run stops early with a checkpoint, as for time-limited jobs: after this epoch, or after this
// optimizer step (mid-epoch).
struct FitLimits {
  std::optional<int64_t> epoch;
  std::optional<int64_t> step;
};

struct FitResult {
  TrainState state;
  std::optional<EvalResult> last_eval;
  std::optional<EvalResult> last_ema_eval;
  int interrupted_by = 0;  // SIGINT or SIGTERM when a signal stopped the run (after saving last.pt)
};

// Trains from session.state up to config.train.epochs (or the limits). Writes last.pt, step-N.pt, epoch-E.pt
// and best.pt into the run folder; throws TrainError on a non-finite loss, naming the last good checkpoint.
FitResult fit(Session& session, FitLimits limits = {});

}  // namespace trainer
