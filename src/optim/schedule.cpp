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
  if (step < w) {
    const double f = s.warmup_start_factor;
    return base_lr * (f + (1.0 - f) * static_cast<double>(step) / static_cast<double>(w));
  }
  const int64_t t = step - w;
  switch (s.kind) {
    case ScheduleKind::constant:
      return base_lr;
    case ScheduleKind::cosine: {
      const int64_t span = std::max<int64_t>(1, length.total_steps - w);
      const double progress = std::min(1.0, static_cast<double>(t) / static_cast<double>(span));
      return s.min_lr + (base_lr - s.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
    case ScheduleKind::step: {
      const double every = std::max(1.0, s.step_epochs * static_cast<double>(length.steps_per_epoch));
      return base_lr * std::pow(s.gamma, std::floor(static_cast<double>(t) / every));
    }
  }
  return base_lr;
}

}  // namespace trainer
