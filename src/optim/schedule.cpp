#include "trainer/optim/schedule.hpp"

#include <algorithm>
#include <cmath>

#include "trainer/optim/schedules.hpp"

namespace trainer {

int64_t warmup_steps(const ScheduleConfig& s, const ScheduleLength& length) {
  const int64_t w = s.warmup_steps > 0 ? s.warmup_steps
                                       : static_cast<int64_t>(std::llround(s.warmup_epochs * length.steps_per_epoch));
  return std::min(w, length.total_steps);
}

double lr_at(const ScheduleConfig& s, double base_lr, int64_t step, const ScheduleLength& length) {
  const int64_t w = warmup_steps(s, length);
  const double f = s.warmup_start_factor;
  if (step < w) {
    if (s.warmup == WarmupKind::constant) return base_lr * f;
    return base_lr * (f + (1.0 - f) * static_cast<double>(step) / static_cast<double>(w));
  }
  AfterWarmup at;
  at.t = static_cast<double>(step - w);
  at.span = static_cast<double>(std::max<int64_t>(1, length.total_steps - w));
  at.epoch_steps = static_cast<double>(std::max<int64_t>(1, length.steps_per_epoch));
  return schedule_row(s.kind).lr(s, base_lr, at);
}

}  // namespace trainer
