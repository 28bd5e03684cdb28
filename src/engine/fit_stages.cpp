#include "fit_stages.hpp"

#include <torch/torch.h>

#include <cmath>

#include "trainer/data/loader/loaders.hpp"
#include "trainer/distributed/replica_check.hpp"
#include "trainer/engine/confusion.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/plot/curves.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

FitPlan plan_fit(const Session& s, const FitLimits& limits) {
  const Config& c = s.config;
  FitPlan p;
  p.batches_per_epoch = static_cast<int64_t>(train_batches_per_epoch(s.train_data->size(), c.data, s.drop_last));
  if (p.batches_per_epoch == 0)
    throw ConfigError("data.batch_size: " + std::to_string(c.data.batch_size) + " is larger than the " +
                      std::to_string(s.train_data->size()) + " training images with data.drop_last");
  p.steps_per_epoch = (p.batches_per_epoch + c.train.accumulate_steps - 1) / c.train.accumulate_steps;
  p.last_epoch = std::min(c.train.epochs, limits.epoch.value_or(c.train.epochs));
  p.length = ScheduleLength{p.steps_per_epoch * c.train.epochs, p.steps_per_epoch};
  p.base_lr = base_learning_rate(c);
  return p;
}

TrainError non_finite(const FitRun& r, const std::string& what, double value, const std::string& where) {
  return TrainError(what + " is " + std::to_string(value) + " " + where + r.checkpoints.last_good());
}

// Larger is better for every metric but the loss.
// Whether `value` improves on `best` by more than `min_delta` (lower is better for the loss).
bool better(BestMetric metric, double value, const std::optional<double>& best, double min_delta = 0.0) {
  if (!best) return true;
  return metric == BestMetric::loss ? value < *best - min_delta : value > *best + min_delta;
}

double metric_value(BestMetric metric, const EvalResult& raw, const std::optional<EvalResult>& ema) {
  switch (metric) {
    case BestMetric::top1: return raw.top1();
    case BestMetric::top5: return raw.top5();
    case BestMetric::loss: return raw.loss();
    case BestMetric::ema_top1: return ema ? ema->top1() : raw.top1();
  }
  return raw.top1();
}

EvalOptions run_eval_options(const Session& s) {
  EvalOptions options = eval_options(s.config, s.device, s.layout.channels_last, s.eval_bad);
  options.group = s.group.get();
  options.decoder = s.decode.decoder;
  return options;
}

// A GPU-decoding run's decode counts since the last call, into `row` and as the log line's part: what nvJPEG
// decoded, what it refused (the workers decoded those), what the CPU decoded after a failed batched call, and
// what no decoder could read.
std::string take_decode_counts(Session& s, MetricsRow& row) {
  if (!s.decode.decoder) return std::string();
  const DecodeCounts n = s.decode.decoder->take_counts();
  row.decoded_gpu = static_cast<double>(n.gpu);
  row.decoded_cpu = static_cast<double>(n.cpu);
  row.decode_refused = static_cast<double>(n.refused);
  row.decode_failed = static_cast<double>(n.failed);
  row.decode_failed_calls = static_cast<double>(n.failed_calls);
  row.decode_blank = static_cast<double>(n.blank);
  return fmt::format(
      "; decoded: {} by nvJPEG, {} refused by it (decoded by the workers), {} by the CPU after {} "
      "failed nvJPEG call(s) and {} image(s) it left blank, {} unreadable",
      n.gpu, n.refused, n.cpu, n.failed_calls, n.blank, n.failed);
}

// Evaluates `model` on the eval split: a log line and an "eval" or "eval_ema" row. The weights' evaluation takes
// the loader start_evaluation_loader() began while the epoch finished.
EvalResult evaluate_weights(FitRun& r, Classifier& model, bool ema) {
  Session& s = r.s;
  EvalOptions options = run_eval_options(s);
  if (!ema) options.loader = std::move(r.eval_loader);
  const EvalResult e = evaluate(model, s.eval_data, options);
  if (e.dropped)
    r.log.warn("eval epoch {}: {} unreadable image(s) left out; the figures cover the other {}", s.state.epoch,
               e.dropped, e.count);
  MetricsRow row(ema ? "eval_ema" : "eval", s.state.epoch, s.state.step);
  const std::string decoded = take_decode_counts(s, row);
  r.log.info("eval{} epoch {}: loss {:.4f} top1 {:.4f} ({}/{}) top5 {:.4f} balanced {:.4f} in {:.1f}s{}",
             ema ? " (ema)" : "", s.state.epoch, e.loss(), e.top1(), e.correct1, e.count, e.top5(),
             balanced_accuracy(e.classes), e.seconds, decoded);
  if (s.metrics) {
    row.lr = r.lr;
    row.loss = e.loss();
    row.top1 = e.top1();
    row.top5 = e.top5();
    row.images_per_s = static_cast<double>(e.read) / e.seconds;
    row.compute_s = e.seconds;
    s.metrics->write(row);
  }
  return e;
}

}  // namespace

FitRun::FitRun(Session& session, FitLimits fit_limits)
    : s(session),
      limits(fit_limits),
      plan(plan_fit(session, fit_limits)),
      loader(make_train_loader(session, session.state.epoch, static_cast<size_t>(session.state.batch_in_epoch),
                               plan.last_epoch - session.state.epoch)),
      checkpoints(session),
      progress(session.logs.interactive),
      stop_vote(session.group ? std::make_unique<StopVote>(*session.group) : nullptr),
      log(*session.logs.main),
      step_log(session.logs.interactive ? *session.logs.file : *session.logs.main) {}

double FitRun::lr_now() const { return lr_at(s.config.schedule, plan.base_lr, s.state.step, plan.length); }

void log_start(FitRun& r) {
  const Config& c = r.s.config;
  const int64_t accumulate = c.train.accumulate_steps;
  // Data-parallel: data.batch_size is the global batch, split across the ranks.
  const int64_t ranks = r.s.world.size, low = c.data.batch_size / ranks;
  const std::string shares =
      ranks == 1 ? std::string()
                 : fmt::format(" = {}{} per process x {} processes", low,
                               c.data.batch_size % ranks ? "-" + std::to_string(low + 1) : std::string(), ranks);
  r.log.info("training {} epochs x {} steps (batch {}{}{}, {} loader workers), lr {}{} ({} warmup steps), {}",
             c.train.epochs, r.plan.steps_per_epoch, c.data.batch_size, shares,
             accumulate > 1 ? " x " + std::to_string(accumulate) + " accumulated" : std::string(), c.data.workers,
             r.plan.base_lr,
             c.optim.lr_per_256 > 0 ? " (optim.lr_per_256 " + format_number(c.optim.lr_per_256) + " x " +
                                          std::to_string(c.data.batch_size * accumulate) + " / 256)"
                                    : std::string(),
             warmup_steps(c.schedule, r.plan.length), describe_precision(r.s.step_options));
}

std::string save_last_completed_step(FitRun& r, int64_t micro, bool started,
                                     const compat::GeneratorStates& step_start) {
  Session& s = r.s;
  if (!r.checkpoints.enabled() || s.state.step == 0) return r.checkpoints.last_good();
  s.state.batch_in_epoch -= micro;  // back to the step's first micro-batch
  if (started) step_start.restore();
  r.progress.clear();
  if (s.run_dir.empty()) return std::string();  // a rank other than 0: nothing to save here
  try {
    r.checkpoints.save_after_failure(s);
  } catch (const Error& e) {
    return "; saving the last completed step failed too: " + e.message();
  }
  return "; saved " + r.checkpoints.last().string() + " at step " + std::to_string(s.state.step) +
         ": resume with trainer --resume " + r.checkpoints.last().string();
}

void close_log_interval(FitRun& r, TrainMeter& meter, int64_t epoch) {
  Session& s = r.s;
  const Config& c = s.config;
  const int64_t step = s.state.step;
  const TrainFigures f = meter.close_interval(step + 1);
  const std::string where = f.first_step == step
                                ? "at step " + std::to_string(step)
                                : "in steps " + std::to_string(f.first_step) + "-" + std::to_string(step);
  if (c.train.clip_grad_norm > 0 && !std::isfinite(f.max_grad_norm))
    throw non_finite(r, "the gradient norm", f.max_grad_norm, where);
  if (!std::isfinite(f.loss)) throw non_finite(r, "the training loss", f.loss, where);
  std::string extra;
  if (c.train.clip_grad_norm > 0) extra += fmt::format(" grad norm {:.3g}", f.max_grad_norm);
  if (s.scaler.enabled()) extra += fmt::format(" scale {:g} skipped {}", s.scaler.scale_value(), f.skipped);
  r.progress.clear();
  r.step_log.info("epoch {} step {}/{} loss {:.4f} top1 {:.4f} lr {:.5g} {:.0f} img/s data {:.0f}%{}", epoch + 1, step,
                  r.plan.length.total_steps, f.loss, f.top1, r.lr, f.images_per_s(), 100.0 * f.data_wait_share(),
                  extra);
  if (s.metrics)
    s.metrics->write(train_row(epoch + 1, step, r.lr, f, c.train.clip_grad_norm > 0,
                               s.scaler.enabled() ? std::optional<double>(s.scaler.scale_value()) : std::nullopt));
}

std::optional<StopReason> save_mid_epoch(FitRun& r, int64_t epoch, bool epoch_done) {
  const Session& s = r.s;
  const Config& c = s.config;
  const bool save_due =
      c.train.checkpoint_every_minutes > 0 && r.checkpoints.minutes_since_write() >= c.train.checkpoint_every_minutes;
  const StopVote::Decision agreed =
      r.stop_vote ? r.stop_vote->cast(r.stop.pending(), save_due) : StopVote::Decision{r.stop.pending(), save_due};
  const int sig = agreed.stop;
  const bool stop_at_step = r.limits.step && s.state.step >= *r.limits.step;
  const bool step_checkpoint = c.train.checkpoint_every_steps > 0 && s.state.step % c.train.checkpoint_every_steps == 0;
  const bool timed = agreed.save && !epoch_done;  // the epoch end saves anyway
  if ((sig || stop_at_step || timed || (step_checkpoint && !epoch_done)) && r.checkpoints.enabled()) {
    if (step_checkpoint) r.checkpoints.save_step(s);
    else r.checkpoints.save(s);
    r.progress.clear();
    r.log.info("saved {}{} at epoch {} step {} (batch {}/{})", r.checkpoints.last().string(),
               step_checkpoint ? " and " + r.checkpoints.step(s.state.step).string() : "", epoch + 1, s.state.step,
               s.state.batch_in_epoch, r.plan.batches_per_epoch);
  }
  if (sig) return StopReason{StopReason::Kind::signal, sig};
  if (stop_at_step) return StopReason{StopReason::Kind::step_limit, 0};
  return std::nullopt;
}

void show_progress(FitRun& r, const TrainMeter& meter, int64_t epoch) {
  if (!r.progress.enabled()) return;
  const Config& c = r.s.config;
  const double speed = meter.epoch_images_per_s();
  const int64_t left_steps = r.plan.length.total_steps - r.s.state.step;
  const double left_images = static_cast<double>(left_steps * c.data.batch_size * c.train.accumulate_steps);
  r.progress.show(fmt::format("epoch {}/{} step {}/{} {:.0f} img/s lr {:.5g} ETA {}", epoch + 1, c.train.epochs,
                              r.s.state.step, r.plan.length.total_steps, speed, r.lr,
                              format_duration(left_images / speed)));
}

namespace {

// Data-parallel: the ranks must still hold rank 0's weights bit for bit (a TrainError otherwise). Returns the
// epoch line's data-parallel part: the gradient all-reduce time that backward did not hide (Gloo, where it blocks
// the host) and the check's result.
std::string check_replicas(FitRun& r, int64_t epoch, const TrainFigures& f) {
  Session& s = r.s;
  if (!s.group) return std::string();
  const double waited = s.reducer->take_waited_seconds();
  if (const int64_t n = ranks_differing_from_rank0(*s.group, s.model->parameters()))
    throw TrainError("data-parallel: after epoch " + std::to_string(epoch + 1) + ", " + std::to_string(n) + " of " +
                     std::to_string(s.world.size) + " ranks hold weights other than rank 0's" +
                     r.checkpoints.last_good());
  const std::string wait = s.group->backend() == DistBackend::gloo
                               ? fmt::format(", all-reduce wait {:.0f}%", 100.0 * waited / std::max(1e-9, f.seconds))
                               : std::string();
  return fmt::format("{}, weights identical on {} rank{}", wait, s.world.size, s.world.size == 1 ? "" : "s");
}

}  // namespace

void finish_epoch(FitRun& r, int64_t epoch, const EpochRun& run) {
  Session& s = r.s;
  const TrainFigures& f = run.figures;
  if (!std::isfinite(f.loss)) throw non_finite(r, "the training loss", f.loss, "in epoch " + std::to_string(epoch + 1));
  const std::string replicas = check_replicas(r, epoch, f);  // every rank: collectives
  MetricsRow row = epoch_row(epoch + 1, s.state.step, r.lr, f);
  const std::string decoded = take_decode_counts(s, row);
  r.log.info("epoch {}/{} done in {:.1f}s: train loss {:.4f} top1 {:.4f}, {:.0f} img/s, data wait {:.0f}%{}{}{}{}",
             epoch + 1, s.config.train.epochs, f.seconds, f.loss, f.top1, f.images_per_s(), 100.0 * f.data_wait_share(),
             replicas, run.start_batch > 0 ? fmt::format(" (resumed at batch {})", run.start_batch) : std::string(),
             s.scaler.enabled() ? fmt::format(", loss scale {:g}, {} skipped step(s) in all", s.scaler.scale_value(),
                                              s.scaler.skipped_steps())
                                : std::string(),
             decoded);
  if (const size_t failed = s.train_bad->take_failed_reads())
    r.log.warn("epoch {}: {} unreadable training image(s) replaced by others ({} distinct so far)", epoch + 1, failed,
               s.train_bad->distinct());
  if (const std::string news = s.train_data->take_news(); !news.empty()) r.log.info("train data: {}", news);
  if (const std::string news = s.eval_data->take_news(); !news.empty()) r.log.info("eval data: {}", news);
  if (s.metrics) s.metrics->write(row);
  s.state.epoch = epoch + 1;
  s.state.batch_in_epoch = 0;
}

bool evaluation_due(const FitRun& r, int64_t epochs_done) {
  const TrainConfig& t = r.s.config.train;
  return epochs_done % t.eval_every == 0 || epochs_done == t.epochs;
}

void start_evaluation_loader(FitRun& r, int64_t epoch) {
  if (!r.eval_loader && evaluation_due(r, epoch + 1))
    r.eval_loader = make_evaluation_loader(r.s.eval_data, run_eval_options(r.s));
}

bool evaluate_and_track_best(FitRun& r, FitResult& result) {
  Session& s = r.s;
  const TrainConfig& t = s.config.train;
  if (!evaluation_due(r, s.state.epoch)) return false;
  sync_buffers(s);  // data-parallel: every shard is evaluated with rank 0's BatchNorm statistics
  result.last_eval = evaluate_weights(r, *s.model, /*ema=*/false);
  if (s.ema) result.last_ema_eval = evaluate_weights(r, s.ema->model(), /*ema=*/true);
  train_mode(s);
  if (t.early_stopping.enabled()) {
    // Early stopping's count, kept in the state (and so in every checkpoint) for an exact resume.
    const double watched = metric_value(t.watched_metric(), *result.last_eval, result.last_ema_eval);
    if (better(t.watched_metric(), watched, s.state.watched_best, t.early_stopping.min_delta)) {
      s.state.watched_best = watched;
      s.state.evals_without_improvement = 0;
    } else {
      ++s.state.evals_without_improvement;
    }
  }
  const double value = metric_value(t.best_metric, *result.last_eval, result.last_ema_eval);
  if (!better(t.best_metric, value, s.state.best)) return false;
  s.state.best = value;
  r.log.info("best {} so far: {:.4f}", enum_name(best_metrics(), t.best_metric), value);
  return true;
}

void draw_curves(FitRun& r) {
  if (!r.s.config.run.plot || r.s.run_dir.empty()) return;
  try {
    plot_run(r.s.run_dir);
  } catch (const std::exception& e) {
    r.log.warn("curves.png not drawn: {}", e.what());
  }
}

bool early_stop_due(const Session& s) {
  const EarlyStoppingConfig& e = s.config.train.early_stopping;
  return e.enabled() && s.state.evals_without_improvement >= e.patience;
}

std::string early_stop_reason(const Session& s) {
  const TrainConfig& t = s.config.train;
  const TrainState& state = s.state;
  return fmt::format(
      "early stopping: eval {} has not improved by more than {:g} in {} evaluation(s) (the value to beat: {:.4f}); "
      "stopped after epoch {} of {}",
      enum_name(best_metrics(), t.watched_metric()), t.early_stopping.min_delta, state.evals_without_improvement,
      state.watched_best.value_or(0.0), state.epoch, t.epochs);
}

void save_epoch_checkpoint(FitRun& r, bool improved, bool stopping) {
  const Session& s = r.s;
  const TrainConfig& t = s.config.train;
  const int64_t epoch = s.state.epoch;
  if (!r.checkpoints.enabled()) return;
  if (epoch % t.checkpoint_every != 0 && epoch != r.plan.last_epoch && !improved && !stopping) return;
  std::vector<fs::path> also;
  if (improved) also.push_back(r.checkpoints.best());
  if (t.keep_every_epochs > 0 && epoch % t.keep_every_epochs == 0) also.push_back(r.checkpoints.epoch(epoch));
  r.checkpoints.save(s, also);
  std::string names;
  for (const auto& p : also) names += " and " + p.filename().string();
  r.log.info("saved {}{}", r.checkpoints.last().string(), names);
}

}  // namespace trainer
