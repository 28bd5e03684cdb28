// The training loop: epochs of optimizer steps, evaluation, checkpoints. fit.cpp reads top to bottom as the
// recipe; each labelled stage is one function in fit_stages.cpp.
//   FitResult r = fit(session);                          // to config.train.epochs
//   FitLimits limits;  limits.epoch = 1;
//   FitResult r = fit(session, limits);                  // --smoke stops early to exercise resume
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

// Why a run stopped mid-epoch: a signal (SIGINT or SIGTERM, after saving last.pt) or FitLimits::step.
struct StopReason {
  enum class Kind { signal, step_limit };
  Kind kind = Kind::signal;
  int signal_number = 0;  // with Kind::signal

  // The process's exit code: 128 + the signal (130 SIGINT, 143 SIGTERM), 0 for a step limit.
  int exit_code() const { return kind == Kind::signal ? 128 + signal_number : 0; }
};

struct FitResult {
  TrainState state;
  std::optional<EvalResult> last_eval;
  std::optional<EvalResult> last_ema_eval;
  std::optional<StopReason> stopped_by;  // the run stopped mid-epoch, after saving last.pt
  bool stopped_early = false;             // train.early_stopping ended it after an epoch (last.pt saved)
};

// Trains from session.state up to config.train.epochs (or the limits). Writes last.pt, step-N.pt, epoch-E.pt
// and best.pt into the run folder; throws TrainError on a non-finite loss, naming the last good checkpoint.
FitResult fit(Session& session, FitLimits limits = {});

}  // namespace trainer
