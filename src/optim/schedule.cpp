#include "trainer/optim/schedule.hpp"

#include <algorithm>
#include <cmath>

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
  const auto t = static_cast<double>(step - w);
  const auto span = static_cast<double>(std::max<int64_t>(1, length.total_steps - w));
  const auto epoch_steps = static_cast<double>(std::max<int64_t>(1, length.steps_per_epoch));
  const double progress = std::min(1.0, t / span);
  switch (s.kind) {
    case ScheduleKind::constant:
      return base_lr;
    case ScheduleKind::cosine:
      return s.min_lr + (base_lr - s.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
    case ScheduleKind::step:
      return base_lr * std::pow(s.gamma, std::floor(t / std::max(1.0, s.step_epochs * epoch_steps)));
    case ScheduleKind::multistep: {
      const auto passed = std::count_if(s.milestones.begin(), s.milestones.end(),
                                        [&](double m) { return std::round(m * epoch_steps) <= t; });
      return base_lr * std::pow(s.gamma, static_cast<double>(passed));
    }
    case ScheduleKind::exponential:
      return base_lr * std::pow(s.gamma, t / epoch_steps);
    case ScheduleKind::polynomial:
      return s.min_lr + (base_lr - s.min_lr) * std::pow(1.0 - progress, s.power);
  }
  return base_lr;
}

}  // namespace trainer
