// The training figures of one epoch, kept in three roles: the optimizer step in progress (its micro-batches
// count only once the step is taken, and not at all when the loss scaler skips it), the open log interval, and
// the epoch so far, which absorbs each interval as it closes. Losses and hits stay on the device until an
// interval or the epoch is closed, so a step never waits for the GPU.
//   TrainMeter meter(device, state.step + 1);
//   meter.add_micro_batch(trained, waited_s, compute_s);   ...   meter.end_step(update, update_s);
//   if (state.step % log_every == 0) { TrainFigures f = meter.close_interval(state.step + 1); write(train_row(...)); }
//   TrainFigures epoch = meter.close_epoch();
#pragma once

#include <torch/types.h>

#include "trainer/distributed/collectives.hpp"
#include "trainer/engine/session_step.hpp"
#include "trainer/io/metrics_sink.hpp"
#include "trainer/util/clock.hpp"

namespace trainer {

// What a closed interval or epoch amounts to, read back from the device.
struct TrainFigures {
  int64_t first_step = 0;  // its first optimizer step (1-based)
  int64_t images = 0;
  double loss = 0.0;  // mean training loss of its images
  double top1 = 0.0;
  double seconds = 0.0;
  double data_wait = 0.0;      // seconds waiting for the loader
  double compute = 0.0;        // seconds in the step
  double max_grad_norm = 0.0;  // with clipping: the largest total gradient norm (NaN when one was NaN)
  int64_t skipped = 0;         // optimizer steps skipped by the loss scaler

  double images_per_s() const { return static_cast<double>(images) / seconds; }
  double data_wait_share() const { return data_wait / std::max(1e-9, data_wait + compute); }
};

class TrainMeter {
 public:
  // `next_step`: the first optimizer step the meter sees (1-based). With `group` (data-parallel), closed
  // intervals and epochs report the losses, hits and images of all ranks; every rank must close them together.
  TrainMeter(const torch::Device& device, int64_t next_step, Collectives* group = nullptr);

  void add_micro_batch(const TrainedMicroBatch& micro, double waited_s, double compute_s);
  // The optimizer step of the micro-batches added so far was taken (or skipped) in `update_s` seconds.
  void end_step(const UpdateResult& update, double update_s);

  bool interval_empty() const { return interval_.images == 0; }
  // The open interval's figures; the epoch absorbs it and a new interval starts at `next_step`.
  TrainFigures close_interval(int64_t next_step);
  // The whole epoch's figures, the open interval included.
  TrainFigures close_epoch();
  // Images of the epoch so far per second (all ranks, estimated from this one's), for the progress line.
  double epoch_images_per_s() const;

 private:
  // Running sums of one role.
  struct Totals {
    torch::Tensor loss_sum, correct;  // on the device
    int64_t images = 0;
    int64_t first_step = 0;
    double data_wait = 0.0, compute = 0.0;
    torch::Tensor max_grad_norm;  // on the device; undefined until a clipped step is absorbed
    int64_t skipped = 0;
    Clock::time_point start = Clock::now();

    Totals(const torch::Device& device, int64_t first);
    void absorb(const Totals& other);
    TrainFigures read(Collectives* group) const;
  };

  torch::Device device_;
  Collectives* group_;
  Totals step_, interval_, epoch_;
};

// Metrics rows. A "train" row reports an interval; the grad norm with clipping on, the loss scale and skipped
// steps with a loss scaler.
MetricsRow train_row(int64_t epoch, int64_t step, double lr, const TrainFigures& f, bool clipping,
                     std::optional<double> loss_scale);
// An "epoch" row: the epoch's training figures.
MetricsRow epoch_row(int64_t epoch, int64_t step, double lr, const TrainFigures& f);

}  // namespace trainer
