// The learning rate of every optimizer step as a pure function, so a resumed run needs only the step.
//   Warmup (steps [0, W)): base * (f + (1 - f) * step / W), f = warmup_start_factor (PyTorch's LinearLR).
//   Then, with t = step - W and T = total - W:
//     constant: base
//     cosine:   min_lr + (base - min_lr) * (1 + cos(pi * t / T)) / 2     (PyTorch's CosineAnnealingLR)
//     step:     base * gamma ^ floor(t / (step_epochs * steps_per_epoch))  (PyTorch's StepLR)
#pragma once

#include <cstdint>

#include "trainer/config/config.hpp"

namespace trainer {

struct ScheduleLength {
  int64_t total_steps = 0;      // optimizer steps in the whole run
  int64_t steps_per_epoch = 0;
};

int64_t warmup_steps(const ScheduleConfig& s, const ScheduleLength& length);

double lr_at(const ScheduleConfig& s, double base_lr, int64_t step, const ScheduleLength& length);

}  // namespace trainer
