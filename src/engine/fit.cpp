#include "trainer/engine/fit.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "fit_stages.hpp"
#include "trainer/data/device/device_stager.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/engine/session_step.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/text.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

// One epoch of optimizer steps, from the saved position after a mid-epoch resume. Each optimizer step is
// train.accumulate_steps micro-batches; the epoch's last step may have fewer.
EpochRun run_epoch(FitRun& r, int64_t epoch) {
  Session& s = r.s;
  const Config& c = s.config;
  // ---- train.unfreeze_at_epoch: the frozen layers start training with this epoch ----
  apply_freeze_schedule(s);
  train_mode(s);
  EpochRun run;
  run.start_batch = epoch == s.state.epoch ? s.state.batch_in_epoch : 0;
  s.state.batch_in_epoch = run.start_batch;
  TrainMeter meter(s.device, s.state.step + 1, s.group.get());
  r.lr = r.lr_now();
  int64_t micro = 0;
  compat::GeneratorStates step_start;  // the generators before the step's first micro-batch
  auto ready = Clock::now();
  // The run's loader is already making this epoch's batches (and, as it drains, the next epoch's).
  const auto batches = static_cast<size_t>(r.plan.batches_per_epoch - run.start_batch);
  const StageDecode decode{s.decode.decoder.get(), {s.train_bad, BadSlot::replace}};
  try {
    for_each_device_batch(*r.loader, s.device, decode, batches, [&](ImageBatch& batch) {
      const double waited = seconds_since(ready);
      const auto compute_start = Clock::now();
      if (micro == 0) {
        set_learning_rate(*s.optimizer, r.lr = r.lr_now(), s.lr_mult);
        if (r.checkpoints.enabled()) step_start = compat::GeneratorStates::capture();
      }
      const bool last_of_epoch = s.state.batch_in_epoch + 1 == r.plan.batches_per_epoch;
      // ---- the epoch's last batch: an evaluation after it starts reading its images now ----
      if (last_of_epoch) start_evaluation_loader(r, epoch);
      const bool last = micro + 1 == c.train.accumulate_steps || last_of_epoch;
      try {
        // Timed in its own statement: arguments of one call are evaluated in no fixed order, so
        // seconds_since() beside train_micro_batch() could run before the step does.
        const TrainedMicroBatch trained = train_micro_batch(s, batch, micro, last);
        meter.add_micro_batch(trained, waited, seconds_since(compute_start));
      } catch (const c10::Error& e) {
        const std::string what = "libtorch failed in step " + std::to_string(s.state.step + 1) + " (epoch " +
                                 std::to_string(epoch + 1) + "): " + first_line(e.what_without_backtrace());
        throw TrainError(what + save_last_completed_step(r, micro, /*started=*/true, step_start));
      }
      ++s.state.batch_in_epoch;
      const bool epoch_done = s.state.batch_in_epoch == r.plan.batches_per_epoch;
      if (++micro == c.train.accumulate_steps || epoch_done) {
        micro = 0;
        // ---- the optimizer step; its loss and gradient norm stay on the device until the interval closes ----
        const auto update_start = Clock::now();
        const UpdateResult update = take_optimizer_step(s);
        meter.end_step(update, seconds_since(update_start));
        // ---- every log_every steps: check, log and record the interval ----
        if (s.state.step % c.train.log_every == 0 && !meter.interval_empty()) close_log_interval(r, meter, epoch);
        // ---- step checkpoints, early stops and signals (mid-epoch; the epoch end saves on its own) ----
        run.stopped_by = save_mid_epoch(r, epoch, epoch_done);
        if (run.stopped_by) return false;
      }
      show_progress(r, meter, epoch);
      ready = Clock::now();
      return true;
    });
  } catch (const DataError& e) {
    // The loader could not make the next batch: the data went away mid-run. The last completed step is saved.
    throw DataError(e.message() + save_last_completed_step(r, micro, /*started=*/micro > 0, step_start));
  } catch (const c10::Error& e) {
    // Making the next batch failed on the device (the copy, or the decode stage out of GPU memory); the step's own
    // failures are handled above. The last completed step is saved.
    throw TrainError("libtorch failed making a batch for step " + std::to_string(s.state.step + 1) + " (epoch " +
                     std::to_string(epoch + 1) + "): " + first_line(e.what_without_backtrace()) +
                     save_last_completed_step(r, micro, /*started=*/micro > 0, step_start));
  }
  r.progress.clear();
  if (!run.stopped_by) run.figures = meter.close_epoch();
  return run;
}

namespace {

// The epochs from the session's position to the last one (or a stop).
void run_epochs(FitRun& r, FitResult& result) {
  Session& s = r.s;
  for (int64_t epoch = s.state.epoch; epoch < r.plan.last_epoch; ++epoch) {
    // ---- one epoch of optimizer steps, logged every train.log_every steps; a stop saves and ends the run ----
    const EpochRun run = run_epoch(r, epoch);
    if (run.stopped_by) {
      result.stopped_by = run.stopped_by;
      break;
    }
    // ---- the epoch's figures: a log line and a metrics row; the state moves on to the next epoch ----
    finish_epoch(r, epoch, run);
    // ---- every eval_every epochs, and after the last: evaluate the weights (and their EMA), track the best ----
    bool improved = false;
    try {
      improved = evaluate_and_track_best(r, result);
    } catch (const c10::Error& e) {
      throw TrainError("libtorch failed evaluating after epoch " + std::to_string(epoch + 1) + ": " +
                       first_line(e.what_without_backtrace()) + r.checkpoints.last_good());
    }
    // ---- curves.png from the metrics so far; a drawing problem never stops the run ----
    draw_curves(r);
    // ---- train.early_stopping: its patience ran out, the run ends after this epoch's checkpoint ----
    const bool stopping = early_stop_due(s);
    // ---- every checkpoint_every epochs, after the last, on a new best and when stopping: last.pt, best.pt,
    // epoch-E.pt ----
    save_epoch_checkpoint(r, improved, stopping);
    if (stopping) {
      r.log.info("{}", early_stop_reason(s));
      result.stopped_early = true;
      break;
    }
  }
}

}  // namespace

FitResult fit(Session& s, FitLimits limits) {
  FitResult result;
  if (s.state.epoch < s.config.train.epochs && s.state.batch_in_epoch == 0 && early_stop_due(s)) {
    // Resuming a run that early stopping ended: nothing is left to train.
    s.logs.main->info("the run had stopped early (train.early_stopping) after epoch {}: nothing left to train",
                      s.state.epoch);
    result.state = s.state;
    result.stopped_early = true;
    return result;
  }
  FitRun r(s, limits);
  log_start(r);
  try {
    run_epochs(r, result);
  } catch (const WriteError& e) {
    // A full or failing disk: the file and the cause, then what is safe to resume from.
    throw WriteError(e.message() + r.checkpoints.last_good());
  }
  result.state = s.state;
  return result;
}

}  // namespace trainer
