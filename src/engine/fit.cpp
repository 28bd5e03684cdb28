#include "trainer/engine/fit.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <regex>

#include "trainer/config/load.hpp"
#include "trainer/data/batch_dataset.hpp"
#include "trainer/engine/mix.hpp"
#include "trainer/engine/progress.hpp"
#include "trainer/engine/train_step.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/optim/schedule.hpp"
#include "trainer/plot/curves.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"
#include "trainer/util/stop_signals.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Step-interval accumulators. Loss and hits stay on the device so a step never waits for the GPU.
// A step adds to the current log interval only; the epoch totals absorb each interval when it closes.
struct Interval {
  torch::Tensor loss_sum, correct;
  int64_t images = 0;
  int64_t first_step = 0;  // first optimizer step of the interval (1-based)
  double data_wait = 0.0, compute = 0.0;
  double max_grad_norm = 0.0;
  int64_t skipped = 0;     // optimizer steps skipped by the loss scaler
  Clock::time_point start = Clock::now();

  Interval(const torch::Device& device, int64_t first)
      : loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device))),
        correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device))),
        first_step(first) {}

  void absorb(const Interval& other) {
    loss_sum += other.loss_sum;
    correct += other.correct;
    images += other.images;
    data_wait += other.data_wait;
    compute += other.compute;
    max_grad_norm = std::max(max_grad_norm, other.max_grad_norm);
    skipped += other.skipped;
  }
};

// Larger is better for every metric but the loss.
bool better(BestMetric metric, double value, const std::optional<double>& best) {
  if (!best) return true;
  return metric == BestMetric::loss ? value < *best : value > *best;
}

double metric_value(BestMetric metric, const EvalResult& raw, const std::optional<EvalResult>& ema) {
  switch (metric) {
    case BestMetric::top1:
      return raw.top1();
    case BestMetric::top5:
      return raw.top5();
    case BestMetric::loss:
      return raw.loss();
    case BestMetric::ema_top1:
      return ema ? ema->top1() : raw.top1();
  }
  return raw.top1();
}

// step-N.pt beyond the newest `keep` are removed, oldest first. Only files matching the pattern are touched,
// and only after the newest one was written, so the newest good checkpoint always survives.
void prune_step_checkpoints(const fs::path& dir, int64_t keep) {
  static const std::regex pattern("step-([0-9]+)\\.pt");
  std::vector<std::pair<int64_t, fs::path>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, pattern)) found.emplace_back(std::stoll(m[1]), entry.path());
  }
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < found.size(); ++i) fs::remove(found[i].second);
}

}  // namespace

FitResult fit(Session& s, FitLimits limits) {
  const Config& c = s.config;
  auto& log = *s.logs.main;
  auto& step_log = s.logs.interactive ? *s.logs.file : *s.logs.main;
  const auto batch_size = static_cast<size_t>(c.data.batch_size);
  const int64_t accumulate = c.train.accumulate_steps;
  const auto norm = make_normalization(c.data.mean, c.data.std, c.model.in_channels, s.device);
  const int64_t last_epoch = std::min(c.train.epochs, limits.epoch.value_or(c.train.epochs));
  auto sampler_options = [&](int64_t epoch, size_t start_batch) {
    return SamplerOptions{s.train_data->size(), batch_size, static_cast<uint64_t>(c.run.seed), epoch,
                          c.data.shuffle, c.data.drop_last, start_batch};
  };
  const auto batches_per_epoch = static_cast<int64_t>(EpochSampler(sampler_options(0, 0)).batches_per_epoch());
  if (batches_per_epoch == 0)
    throw ConfigError("data.batch_size: " + std::to_string(batch_size) + " is larger than the " +
                      std::to_string(s.train_data->size()) + " training images with data.drop_last");
  // An epoch ends with an optimizer step even when its last accumulation is short.
  const int64_t steps_per_epoch = (batches_per_epoch + accumulate - 1) / accumulate;
  const ScheduleLength length{steps_per_epoch * c.train.epochs, steps_per_epoch};
  const double base_lr = base_learning_rate(c);
  const fs::path last_path = s.run_dir / "last.pt", best_path = s.run_dir / "best.pt";
  const nlohmann::json resolved = config_to_json(c);
  ProgressLine progress(s.logs.interactive);
  const auto parameters = s.model->parameters();
  auto last_good = [&] {
    return fs::exists(last_path) ? "; the last good checkpoint is " + last_path.string()
                                 : std::string("; no checkpoint was written yet");
  };
  auto non_finite = [&](const std::string& what, double value, const std::string& where) {
    return TrainError(what + " is " + std::to_string(value) + " " + where + last_good());
  };
  // Writes last.pt (and its other names). A model that went non-finite is never written.
  auto save = [&](const std::vector<fs::path>& also) {
    const CheckpointMeta meta{resolved,
                              s.state.epoch,
                              s.state.step,
                              s.state.batch_in_epoch,
                              s.state.best,
                              s.train_data->class_names(),
                              s.train_data->shape(),
                              s.scaler.enabled() ? s.scaler.state() : nlohmann::json(),
                              s.ema ? s.ema->updates() : 0};
    try {
      save_checkpoint(last_path, meta, {*s.model, *s.optimizer, s.ema ? &s.ema->model() : nullptr});
    } catch (const TrainError& e) {
      // Re-raised with the step and the last good checkpoint; the message loses its own "train: " prefix.
      const std::string what = e.what(), prefix = "train: ";
      throw TrainError((what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what) + " (after step " +
                       std::to_string(s.state.step) + ")" + last_good());
    }
    for (const auto& path : also) link_checkpoint(last_path, path);
  };
  auto step_path = [&] { return s.run_dir / ("step-" + std::to_string(s.state.step) + ".pt"); };
  FitResult result;
  StopSignals stop;
  log.info("training {} epochs x {} steps (batch {}{}, {} loader workers), lr {}{} ({} warmup steps), {}",
           c.train.epochs, steps_per_epoch, batch_size,
           accumulate > 1 ? " x " + std::to_string(accumulate) + " accumulated" : std::string(), c.data.workers, base_lr,
           c.optim.lr_per_256 > 0 ? " (optim.lr_per_256 " + format_number(c.optim.lr_per_256) + " x " +
                                        std::to_string(batch_size * static_cast<size_t>(accumulate)) + " / 256)"
                                  : std::string(),
           warmup_steps(c.schedule, length), describe_precision(s.step));

  for (int64_t epoch = s.state.epoch; epoch < last_epoch; ++epoch) {
    // ---- one epoch of optimizer steps (from the saved position after a mid-epoch resume) ----
    s.model->train();
    const ReadContext context{static_cast<uint64_t>(c.run.seed), epoch};
    const auto start_batch = static_cast<size_t>(epoch == s.state.epoch ? s.state.batch_in_epoch : 0);
    s.state.batch_in_epoch = static_cast<int64_t>(start_batch);
    auto loader = make_loader(BatchDataset(s.train_data, s.device.is_cuda(), context, s.train_bad),
                              EpochSampler(sampler_options(epoch, start_batch)), batch_size,
                              static_cast<size_t>(c.data.workers), static_cast<size_t>(c.data.prefetch));
    Interval interval(s.device, s.state.step + 1), whole(s.device, s.state.step + 1);
    // The micro-batches of the optimizer step in progress: counted only once the step is taken.
    Interval pending(s.device, 0);
    int64_t micro = 0;
    const auto epoch_start = Clock::now();
    auto ready = Clock::now();
    double lr = lr_at(c.schedule, base_lr, s.state.step, length);
    bool stop_now = false;
    // A loader thread's error arrives wrapped in LibTorch's WorkerException: rethrow the original, so a
    // DataError stays a one-line user error.
    try {
      for (ImageBatch& batch : *loader) {
        const double waited = seconds_since(ready);
        const auto compute_start = Clock::now();
        if (micro == 0) {
          lr = lr_at(c.schedule, base_lr, s.state.step, length);
          set_learning_rate(*s.optimizer, lr);
        }
        const auto x = to_model_input(batch.images, norm, c.model.channels_last);
        const auto y = batch.labels.to(s.device, /*non_blocking=*/true);
        // The mix draw is a function of (seed, step, micro-batch): resumed runs mix as uninterrupted ones.
        const uint64_t mix_seed = hash_combine(hash_combine(static_cast<uint64_t>(c.run.seed) ^ 0x313A71Bull,
                                                            static_cast<uint64_t>(s.state.step)),
                                               static_cast<uint64_t>(micro));
        const MicroResult out = forward_backward(*s.model, mix_batch(x, y, c.train.mix, mix_seed), s.step, s.scaler);
        ++s.state.batch_in_epoch;
        ++micro;
        const int64_t n = y.size(0);
        pending.loss_sum += out.loss.to(torch::kDouble) * static_cast<double>(n);
        pending.correct += out.logits.argmax(1).eq(y).sum();
        pending.images += n;
        pending.data_wait += waited;
        pending.compute += seconds_since(compute_start);

        const bool epoch_done = s.state.batch_in_epoch == batches_per_epoch;
        if (micro == accumulate || epoch_done) {
          // ---- the optimizer step ----
          const auto update_start = Clock::now();
          const UpdateResult u = apply_update(*s.model, *s.optimizer, s.scaler, s.step);
          micro = 0;
          ++s.state.step;
          if (u.grad_norm && !std::isfinite(*u.grad_norm) && !s.scaler.enabled())
            throw non_finite("the gradient norm", *u.grad_norm, "at step " + std::to_string(s.state.step));
          pending.compute += seconds_since(update_start);
          if (u.skipped) {  // an AMP overflow: nothing was learnt, the losses do not count
            interval.skipped += 1;
            interval.data_wait += pending.data_wait;
            interval.compute += pending.compute;
          } else {
            if (s.ema) s.ema->after_step(s.state.step);
            if (u.grad_norm) pending.max_grad_norm = *u.grad_norm;
            interval.absorb(pending);
          }
          pending = Interval(s.device, 0);

          // ---- every log_every steps: check, log and record the interval ----
          if (s.state.step % c.train.log_every == 0 && interval.images > 0) {
            const double mean_loss = interval.loss_sum.item<double>() / static_cast<double>(interval.images);
            if (!std::isfinite(mean_loss))
              throw non_finite("the training loss", mean_loss,
                               interval.first_step == s.state.step
                                   ? "at step " + std::to_string(s.state.step)
                                   : "in steps " + std::to_string(interval.first_step) + "-" +
                                         std::to_string(s.state.step));
            const double elapsed = seconds_since(interval.start);
            const double top1 = static_cast<double>(interval.correct.item<int64_t>()) / static_cast<double>(interval.images);
            const double speed = static_cast<double>(interval.images) / elapsed;
            std::string extra;
            if (c.train.clip_grad_norm > 0) extra += fmt::format(" grad norm {:.3g}", interval.max_grad_norm);
            if (s.scaler.enabled())
              extra += fmt::format(" scale {:g} skipped {}", s.scaler.scale_value(), interval.skipped);
            progress.clear();
            step_log.info("epoch {} step {}/{} loss {:.4f} top1 {:.4f} lr {:.5g} {:.0f} img/s data {:.0f}%{}", epoch + 1,
                          s.state.step, length.total_steps, mean_loss, top1, lr, speed,
                          100.0 * interval.data_wait / std::max(1e-9, interval.data_wait + interval.compute), extra);
            if (s.metrics) {
              MetricsRow row{"train", epoch + 1, s.state.step, lr, mean_loss, top1, MetricsRow::none, speed,
                             interval.data_wait, interval.compute};
              if (c.train.clip_grad_norm > 0) row.grad_norm = interval.max_grad_norm;
              if (s.scaler.enabled()) {
                row.loss_scale = s.scaler.scale_value();
                row.skipped_steps = static_cast<double>(interval.skipped);
              }
              s.metrics->write(row);
            }
            whole.absorb(interval);
            interval = Interval(s.device, s.state.step + 1);
          }

          // ---- step checkpoints, early stops and signals (mid-epoch; the epoch end saves on its own) ----
          const int sig = stop.pending();
          const bool stop_at_step = limits.step && s.state.step >= *limits.step;
          const bool step_checkpoint = c.train.checkpoint_every_steps > 0 &&
                                       s.state.step % c.train.checkpoint_every_steps == 0 && !s.run_dir.empty();
          if ((sig || stop_at_step || (step_checkpoint && !epoch_done)) && !s.run_dir.empty()) {
            const bool keep = step_checkpoint;
            save(keep ? std::vector<fs::path>{step_path()} : std::vector<fs::path>{});
            if (keep) prune_step_checkpoints(s.run_dir, c.train.keep_last);
            progress.clear();
            log.info("saved {}{} at epoch {} step {} (batch {}/{})", last_path.string(),
                     keep ? " and " + step_path().string() : "", epoch + 1, s.state.step, s.state.batch_in_epoch,
                     batches_per_epoch);
          }
          if (sig || stop_at_step) {
            result.interrupted_by = sig;
            stop_now = true;
            break;
          }
        }
        if (progress.enabled()) {
          const double done = static_cast<double>(whole.images + interval.images) / seconds_since(epoch_start);
          const int64_t left_steps = length.total_steps - s.state.step;
          progress.show(fmt::format("epoch {}/{} step {}/{} {:.0f} img/s lr {:.5g} ETA {}", epoch + 1, c.train.epochs,
                                    s.state.step, length.total_steps, done, lr,
                                    format_duration(static_cast<double>(left_steps) *
                                                    static_cast<double>(batch_size * static_cast<size_t>(accumulate)) /
                                                    done)));
        }
        ready = Clock::now();
      }
    } catch (const torch::data::WorkerException& e) {
      std::rethrow_exception(e.original_exception);
    }
    progress.clear();
    if (stop_now) break;
    whole.absorb(interval);  // the steps after the last log line
    const double epoch_seconds = seconds_since(epoch_start);
    const double train_loss = whole.loss_sum.item<double>() / static_cast<double>(std::max<int64_t>(1, whole.images));
    if (!std::isfinite(train_loss)) throw non_finite("the training loss", train_loss, "in epoch " + std::to_string(epoch + 1));
    const double train_top1 =
        static_cast<double>(whole.correct.item<int64_t>()) / static_cast<double>(std::max<int64_t>(1, whole.images));
    const double epoch_speed = static_cast<double>(whole.images) / epoch_seconds;
    log.info("epoch {}/{} done in {:.1f}s: train loss {:.4f} top1 {:.4f}, {:.0f} img/s, data wait {:.0f}%{}{}",
             epoch + 1, c.train.epochs, epoch_seconds, train_loss, train_top1, epoch_speed,
             100.0 * whole.data_wait / std::max(1e-9, whole.data_wait + whole.compute),
             start_batch > 0 ? fmt::format(" (resumed at batch {})", start_batch) : std::string(),
             s.scaler.enabled() ? fmt::format(", loss scale {:g}, {} skipped step(s) in all", s.scaler.scale_value(),
                                              s.scaler.skipped_steps())
                                : std::string());
    if (const size_t failed = s.train_bad->take_failed_reads())
      log.warn("epoch {}: {} unreadable training image(s) replaced by others ({} distinct so far)", epoch + 1, failed,
               s.train_bad->distinct());
    if (s.metrics)
      s.metrics->write({"epoch", epoch + 1, s.state.step, lr, train_loss, train_top1, MetricsRow::none, epoch_speed,
                        whole.data_wait, whole.compute});
    s.state.epoch = epoch + 1;
    s.state.batch_in_epoch = 0;

    // ---- every eval_every epochs, and after the last: evaluate the weights (and their EMA) ----
    const bool final_epoch = s.state.epoch == c.train.epochs;
    bool improved = false;
    if (s.state.epoch % c.train.eval_every == 0 || final_epoch) {
      auto run_eval = [&](Classifier& model, const char* label) {
        const EvalResult r = evaluate(model, s.eval_data, eval_options(c, s.device, s.eval_bad));
        if (r.dropped)
          log.warn("eval epoch {}: {} unreadable image(s) left out; the figures cover the other {}", s.state.epoch,
                   r.dropped, r.count);
        log.info("eval{} epoch {}: loss {:.4f} top1 {:.4f} ({}/{}) top5 {:.4f} in {:.1f}s", label, s.state.epoch,
                 r.loss(), r.top1(), r.correct1, r.count, r.top5(), r.seconds);
        if (s.metrics)
          s.metrics->write({label[0] ? "eval_ema" : "eval", s.state.epoch, s.state.step, lr, r.loss(), r.top1(),
                            r.top5(), static_cast<double>(r.read) / r.seconds, MetricsRow::none, r.seconds});
        return r;
      };
      result.last_eval = run_eval(*s.model, "");
      if (s.ema) result.last_ema_eval = run_eval(s.ema->model(), " (ema)");
      const double value = metric_value(c.train.best_metric, *result.last_eval, result.last_ema_eval);
      improved = better(c.train.best_metric, value, s.state.best);
      if (improved) {
        s.state.best = value;
        log.info("best {} so far: {:.4f}", best_metrics()[static_cast<size_t>(c.train.best_metric)].first, value);
      }
      s.model->train();
    }

    // ---- curves.png from the metrics so far; a drawing problem never stops the run ----
    if (c.run.plot && !s.run_dir.empty()) {
      try {
        plot_run(s.run_dir);
      } catch (const std::exception& e) {
        log.warn("curves.png not drawn: {}", e.what());
      }
    }

    // ---- every checkpoint_every epochs, and after the last: last.pt, with best.pt / epoch-E.pt as links ----
    if (s.run_dir.empty()) continue;
    const bool save_last = s.state.epoch % c.train.checkpoint_every == 0 || s.state.epoch == last_epoch || improved;
    if (!save_last) continue;
    std::vector<fs::path> also;
    if (improved) also.push_back(best_path);
    if (c.train.keep_every_epochs > 0 && s.state.epoch % c.train.keep_every_epochs == 0)
      also.push_back(s.run_dir / ("epoch-" + std::to_string(s.state.epoch) + ".pt"));
    save(also);
    std::string names;
    for (const auto& p : also) names += " and " + p.filename().string();
    log.info("saved {}{}", last_path.string(), names);
  }
  result.state = s.state;
  return result;
}

}  // namespace trainer
