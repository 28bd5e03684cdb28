#include "trainer/engine/fit.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "trainer/config/load.hpp"
#include "trainer/data/batch_dataset.hpp"
#include "trainer/engine/progress.hpp"
#include "trainer/engine/train_step.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/optim/schedule.hpp"
#include "trainer/util/error.hpp"

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
  double data_wait = 0.0, compute = 0.0;
  Clock::time_point start = Clock::now();

  explicit Interval(const torch::Device& device)
      : loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device))),
        correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device))) {}

  void absorb(const Interval& other) {
    loss_sum += other.loss_sum;
    correct += other.correct;
    images += other.images;
    data_wait += other.data_wait;
    compute += other.compute;
  }
};

}  // namespace

FitResult fit(Session& s, std::optional<int64_t> stop_after_epoch) {
  const Config& c = s.config;
  auto& log = *s.logs.main;
  auto& step_log = s.logs.interactive ? *s.logs.file : *s.logs.main;
  const auto batch_size = static_cast<size_t>(c.data.batch_size);
  const auto norm = make_normalization(c.data.mean, c.data.std, c.model.in_channels, s.device);
  const int64_t last_epoch = std::min(c.train.epochs, stop_after_epoch.value_or(c.train.epochs));
  auto sampler_options = [&](int64_t epoch) {
    return SamplerOptions{s.train_data->size(), batch_size, static_cast<uint64_t>(c.run.seed), epoch,
                          c.data.shuffle, c.data.drop_last, 0};
  };
  const auto steps_per_epoch = static_cast<int64_t>(EpochSampler(sampler_options(0)).batches_per_epoch());
  if (steps_per_epoch == 0)
    throw ConfigError("data.batch_size: " + std::to_string(batch_size) + " is larger than the " +
                      std::to_string(s.train_data->size()) + " training images with data.drop_last");
  const ScheduleLength length{steps_per_epoch * c.train.epochs, steps_per_epoch};
  const fs::path last_path = s.run_dir / "last.pt", best_path = s.run_dir / "best.pt";
  const nlohmann::json resolved = config_to_json(c);
  ProgressLine progress(s.logs.interactive);
  auto non_finite_loss = [&](double loss, const std::string& where) {
    return TrainError("loss is " + std::to_string(loss) + " " + where +
                      (fs::exists(last_path) ? "; the last good checkpoint is " + last_path.string()
                                             : "; no checkpoint was written yet"));
  };
  FitResult result;
  log.info("training {} epochs x {} steps (batch {}, {} loader workers), lr {} ({} warmup steps)", c.train.epochs,
           steps_per_epoch, batch_size, c.data.workers, c.optim.lr, warmup_steps(c.schedule, length));

  for (int64_t epoch = s.state.epoch; epoch < last_epoch; ++epoch) {
    // ---- one epoch of optimizer steps ----
    s.model->train();
    const ReadContext context{static_cast<uint64_t>(c.run.seed), epoch};
    auto loader = make_loader(BatchDataset(s.train_data, s.device.is_cuda(), context, s.train_bad),
                              EpochSampler(sampler_options(epoch)), batch_size, static_cast<size_t>(c.data.workers),
                              static_cast<size_t>(c.data.prefetch));
    Interval interval(s.device), whole(s.device);
    const auto epoch_start = Clock::now();
    auto ready = Clock::now();
    double lr = 0.0;
    // A loader thread's error arrives wrapped in LibTorch's WorkerException: rethrow the original, so a
    // DataError stays a one-line user error.
    try {
      for (ImageBatch& batch : *loader) {
        const double waited = seconds_since(ready);
        const auto compute_start = Clock::now();
        lr = lr_at(c.schedule, c.optim.lr, s.state.step, length);
        set_learning_rate(*s.optimizer, lr);

        const auto x = to_model_input(batch.images, norm, c.model.channels_last);
        const auto y = batch.labels.to(s.device, /*non_blocking=*/true);
        const StepResult out = train_step(*s.model, *s.optimizer, x, y, c.train.label_smoothing);
        ++s.state.step;

        const int64_t n = y.size(0);
        interval.loss_sum += out.loss.to(torch::kDouble) * static_cast<double>(n);
        interval.correct += out.logits.argmax(1).eq(y).sum();
        interval.images += n;
        interval.data_wait += waited;
        interval.compute += seconds_since(compute_start);

        // ---- every log_every steps: check, log and record the interval ----
        if (s.state.step % c.train.log_every == 0) {
          const double mean_loss = interval.loss_sum.item<double>() / static_cast<double>(interval.images);
          if (!std::isfinite(mean_loss)) throw non_finite_loss(mean_loss, "at step " + std::to_string(s.state.step));
          const double elapsed = seconds_since(interval.start);
          const double top1 = static_cast<double>(interval.correct.item<int64_t>()) / static_cast<double>(interval.images);
          const double speed = static_cast<double>(interval.images) / elapsed;
          progress.clear();
          step_log.info("epoch {} step {}/{} loss {:.4f} top1 {:.4f} lr {:.5g} {:.0f} img/s data {:.0f}%", epoch + 1,
                        s.state.step, length.total_steps, mean_loss, top1, lr, speed,
                        100.0 * interval.data_wait / std::max(1e-9, interval.data_wait + interval.compute));
          if (s.metrics)
            s.metrics->write({"train", epoch + 1, s.state.step, lr, mean_loss, top1, MetricsRow::none, speed,
                              interval.data_wait, interval.compute});
          whole.absorb(interval);
          interval = Interval(s.device);
        }
        if (progress.enabled()) {
          const double done = static_cast<double>(whole.images + interval.images) / seconds_since(epoch_start);
          const int64_t left_steps = length.total_steps - s.state.step;
          progress.show(fmt::format("epoch {}/{} step {}/{} {:.0f} img/s lr {:.5g} ETA {}", epoch + 1, c.train.epochs,
                                    s.state.step, length.total_steps, done, lr,
                                    format_duration(static_cast<double>(left_steps * batch_size) / done)));
        }
        ready = Clock::now();
      }
    } catch (const torch::data::WorkerException& e) {
      std::rethrow_exception(e.original_exception);
    }
    progress.clear();
    whole.absorb(interval);  // the steps after the last log line
    const double epoch_seconds = seconds_since(epoch_start);
    const double train_loss = whole.loss_sum.item<double>() / static_cast<double>(std::max<int64_t>(1, whole.images));
    if (!std::isfinite(train_loss)) throw non_finite_loss(train_loss, "in epoch " + std::to_string(epoch + 1));
    const double train_top1 =
        static_cast<double>(whole.correct.item<int64_t>()) / static_cast<double>(std::max<int64_t>(1, whole.images));
    const double epoch_speed = static_cast<double>(whole.images) / epoch_seconds;
    log.info("epoch {}/{} done in {:.1f}s: train loss {:.4f} top1 {:.4f}, {:.0f} img/s, data wait {:.0f}%", epoch + 1,
             c.train.epochs, epoch_seconds, train_loss, train_top1, epoch_speed,
             100.0 * whole.data_wait / std::max(1e-9, whole.data_wait + whole.compute));
    if (const size_t replaced = s.train_bad->take_failed_reads())
      log.warn("epoch {}: {} unreadable training image(s) replaced by others ({} distinct so far)", epoch + 1,
               replaced, s.train_bad->distinct());
    if (s.metrics)
      s.metrics->write({"epoch", epoch + 1, s.state.step, lr, train_loss, train_top1, MetricsRow::none, epoch_speed,
                        whole.data_wait, whole.compute});
    s.state.epoch = epoch + 1;

    // ---- every eval_every epochs, and after the last: evaluate ----
    const bool final_epoch = s.state.epoch == c.train.epochs;
    bool improved = false;
    if (s.state.epoch % c.train.eval_every == 0 || final_epoch) {
      const EvalResult r = evaluate(*s.model, s.eval_data, eval_options(c, s.device, s.eval_bad));
      if (r.dropped)
        log.warn("eval epoch {}: {} unreadable image(s) left out; the figures cover the other {}", s.state.epoch,
                 r.dropped, r.count);
      improved = r.top1() > s.state.best_top1;
      if (improved) s.state.best_top1 = r.top1();
      log.info("eval epoch {}: loss {:.4f} top1 {:.4f} ({}/{}) top5 {:.4f} in {:.1f}s{}", s.state.epoch, r.loss(),
               r.top1(), r.correct1, r.count, r.top5(), r.seconds, improved ? " (best)" : "");
      if (s.metrics)
        s.metrics->write({"eval", s.state.epoch, s.state.step, lr, r.loss(), r.top1(), r.top5(),
                          static_cast<double>(r.read) / r.seconds, MetricsRow::none, r.seconds});
      result.last_eval = r;
      s.model->train();
    }

    // ---- every checkpoint_every epochs, and after the last: last.pt; best.pt when top-1 improved ----
    if (s.run_dir.empty()) continue;
    const CheckpointMeta meta{resolved, s.state.epoch, s.state.step, s.state.best_top1, s.train_data->class_names(),
                              s.train_data->shape()};
    const bool save_last = s.state.epoch % c.train.checkpoint_every == 0 || s.state.epoch == last_epoch;
    if (save_last) save_checkpoint(last_path, meta, *s.model, *s.optimizer);
    if (improved && save_last) copy_checkpoint(last_path, best_path);
    if (improved && !save_last) save_checkpoint(best_path, meta, *s.model, *s.optimizer);
    if (save_last || improved)
      log.info("saved {}{}", save_last ? last_path.string() : best_path.string(),
               improved && save_last ? " and " + best_path.string() : "");
  }
  result.state = s.state;
  return result;
}

}  // namespace trainer
