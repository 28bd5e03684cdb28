// The named stages of fit() (fit.cpp), private to the engine: what a run works out once (FitPlan), what the
// stages share (FitRun), and one function per labelled block of the training loop.
#pragma once

#include <spdlog/logger.h>

#include <optional>

#include "trainer/data/loader/loaders.hpp"
#include "trainer/distributed/stop_vote.hpp"
#include "trainer/engine/fit.hpp"
#include "trainer/engine/progress.hpp"
#include "trainer/engine/run_checkpoints.hpp"
#include "trainer/engine/train_meter.hpp"
#include "trainer/optim/schedule.hpp"
#include "trainer/platform/stop_requests.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

// The run's length and learning rate, worked out once from the config and the training set.
struct FitPlan {
  int64_t batches_per_epoch = 0;
  int64_t steps_per_epoch = 0;  // an epoch ends with an optimizer step even when its last accumulation is short
  int64_t last_epoch = 0;       // train.epochs, or --stop-after-epoch
  ScheduleLength length;
  double base_lr = 0.0;  // optim.lr, or optim.lr_per_256 scaled to the global batch
};

// What every stage reads and updates.
struct FitRun {
  FitRun(Session& session, FitLimits limits);

  Session& s;
  const FitLimits limits;
  const FitPlan plan;
  // The training batches from the session's position to the last epoch, one stream across epoch edges.
  std::unique_ptr<Loader> loader;
  // The evaluation's loader, made while the last batch of an epoch that ends in an evaluation trains.
  std::shared_ptr<Loader> eval_loader;
  RunCheckpoints checkpoints;
  ProgressLine progress;
  StopRequests stop;
  std::unique_ptr<StopVote> stop_vote;  // data-parallel: the ranks' agreement to stop (null: one process)
  spdlog::logger& log;                  // console and train.log
  spdlog::logger& step_log;             // the step lines: train.log alone while the console shows the progress line
  double lr = 0.0;                      // the learning rate of the latest optimizer step

  double lr_now() const;  // the schedule's rate for the next optimizer step
};

// One epoch as run_epoch() ends it.
struct EpochRun {
  int64_t start_batch = 0;               // > 0 when the epoch was resumed mid-way
  std::optional<StopReason> stopped_by;  // the run stopped mid-epoch
  TrainFigures figures;                  // the whole epoch, when it was not stopped
};

// "training 3 epochs x 188 steps (batch 64, 2 loader workers), lr 0.01 (0 warmup steps), float32"
void log_start(FitRun& r);
EpochRun run_epoch(FitRun& r, int64_t epoch);
// A step that cannot complete: a libtorch error in its forward or backward pass (CUDA out of memory, a kernel's
// check), or training data that went away (its folder deleted or unmounted: more unreadable images than
// data.max_bad_fraction). The weights, optimizer, scaler and EMA are still those of the last completed step, so
// they are saved as last.pt with that step's data position and generator states (`--resume` then runs the step
// as if it had never begun). `started`: the failure came inside the step (its generators are rewound to
// `step_start`); `micro` micro-batches of it had been taken. Returns the end of the error message: "; saved
// RUN/last.pt at step N: resume with ..." (or the last good checkpoint, when nothing could be saved).
std::string save_last_completed_step(FitRun& r, int64_t micro, bool started, const compat::GeneratorStates& step_start);

// Closes the open log interval: a non-finite loss stops the run; otherwise a log line and a "train" row.
void close_log_interval(FitRun& r, TrainMeter& meter, int64_t epoch);
// A step checkpoint, --stop-after-step or a signal: saves last.pt (and step-N.pt); returns the stop, if any.
std::optional<StopReason> save_mid_epoch(FitRun& r, int64_t epoch, bool epoch_done);
void show_progress(FitRun& r, const TrainMeter& meter, int64_t epoch);
// The epoch's log line and "epoch" row, unreadable images, and the state moved on to the next epoch.
void finish_epoch(FitRun& r, int64_t epoch, const EpochRun& run);
// Whether an evaluation follows the epoch that makes `epochs_done` (train.eval_every, the last epoch).
bool evaluation_due(const FitRun& r, int64_t epochs_done);
// When `epoch` ends in an evaluation: its loader starts reading the eval images now, beside the last steps.
void start_evaluation_loader(FitRun& r, int64_t epoch);
// Evaluates when due; true when train.best_metric improved on the best so far. Counts, for early stopping, the
// evaluations since its metric last improved by more than train.early_stopping.min_delta.
bool evaluate_and_track_best(FitRun& r, FitResult& result);
// Whether train.early_stopping's patience has run out, and the log line that says so.
bool early_stop_due(const Session& s);
std::string early_stop_reason(const Session& s);
void draw_curves(FitRun& r);
// last.pt when due (train.checkpoint_every, the last epoch, a new best, the run `stopping` early), with best.pt and
// epoch-E.pt as links.
void save_epoch_checkpoint(FitRun& r, bool improved, bool stopping = false);

}  // namespace trainer
