#include "trainer/engine/train_meter.hpp"

#include <torch/torch.h>

namespace trainer {

TrainMeter::Totals::Totals(const torch::Device& device, int64_t first)
    : loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device))),
      correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device))),
      first_step(first) {}

void TrainMeter::Totals::absorb(const Totals& other) {
  loss_sum += other.loss_sum;
  correct += other.correct;
  images += other.images;
  data_wait += other.data_wait;
  compute += other.compute;
  // torch::maximum keeps a NaN, so a non-finite norm anywhere in the interval reaches the log check.
  if (other.max_grad_norm.defined())
    max_grad_norm = max_grad_norm.defined() ? torch::maximum(max_grad_norm, other.max_grad_norm) : other.max_grad_norm;
  skipped += other.skipped;
}

TrainFigures TrainMeter::Totals::read(Collectives* group) const {
  TrainFigures f;
  f.first_step = first_step;
  torch::Tensor loss = loss_sum, hits = correct;
  f.images = images;
  if (group) {  // the sums of all ranks; this rank's own stay as they are
    loss = loss_sum.clone();
    hits = correct.clone();
    auto counted = torch::tensor(images, torch::kInt64);
    group->all_reduce_sum({loss, hits, counted});
    f.images = counted.item<int64_t>();
  }
  const auto n = static_cast<double>(std::max<int64_t>(1, f.images));
  f.loss = loss.item<double>() / n;
  f.top1 = static_cast<double>(hits.item<int64_t>()) / n;
  f.seconds = seconds_since(start);
  f.data_wait = data_wait;
  f.compute = compute;
  if (max_grad_norm.defined()) f.max_grad_norm = max_grad_norm.item<double>();
  f.skipped = skipped;
  return f;
}

TrainMeter::TrainMeter(const torch::Device& device, int64_t next_step, Collectives* group)
    : device_(device), group_(group), step_(device, 0), interval_(device, next_step), epoch_(device, next_step) {}

void TrainMeter::add_micro_batch(const TrainedMicroBatch& micro, double waited_s, double compute_s) {
  const int64_t n = micro.labels.size(0);
  step_.loss_sum += micro.out.loss.to(torch::kDouble) * static_cast<double>(n);
  step_.correct += micro.out.logits.argmax(1).eq(micro.labels).sum();
  step_.images += n;
  step_.data_wait += waited_s;
  step_.compute += compute_s;
}

void TrainMeter::end_step(const UpdateResult& update, double update_s) {
  step_.compute += update_s;
  if (update.skipped) {  // an AMP overflow: nothing was learnt, the losses do not count
    interval_.skipped += 1;
    interval_.data_wait += step_.data_wait;
    interval_.compute += step_.compute;
  } else {
    step_.max_grad_norm = update.grad_norm;
    interval_.absorb(step_);
  }
  step_ = Totals(device_, 0);
}

TrainFigures TrainMeter::close_interval(int64_t next_step) {
  const TrainFigures f = interval_.read(group_);
  epoch_.absorb(interval_);
  interval_ = Totals(device_, next_step);
  return f;
}

TrainFigures TrainMeter::close_epoch() {
  epoch_.absorb(interval_);  // the steps after the last log line
  interval_ = Totals(device_, 0);
  return epoch_.read(group_);
}

double TrainMeter::epoch_images_per_s() const {
  const double ranks = group_ ? static_cast<double>(group_->world().size) : 1.0;
  return ranks * static_cast<double>(epoch_.images + interval_.images) / seconds_since(epoch_.start);
}

MetricsRow epoch_row(int64_t epoch, int64_t step, double lr, const TrainFigures& f) {
  MetricsRow row("epoch", epoch, step);
  row.lr = lr;
  row.loss = f.loss;
  row.top1 = f.top1;
  row.images_per_s = f.images_per_s();
  row.data_wait_s = f.data_wait;
  row.compute_s = f.compute;
  return row;
}

MetricsRow train_row(int64_t epoch, int64_t step, double lr, const TrainFigures& f, bool clipping,
                     std::optional<double> loss_scale) {
  MetricsRow row = epoch_row(epoch, step, lr, f);  // the same columns, for an interval
  row.kind = "train";
  if (clipping) row.grad_norm = f.max_grad_norm;
  if (loss_scale) {
    row.loss_scale = *loss_scale;
    row.skipped_steps = static_cast<double>(f.skipped);
  }
  return row;
}

}  // namespace trainer
