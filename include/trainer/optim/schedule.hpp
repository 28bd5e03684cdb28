// The learning rate of every optimizer step as a pure function, so a resumed run needs only the step.
// Each shape equals the PyTorch scheduler named beside it, stepped once per optimizer step.
//   Warmup, steps [0, W), f = warmup_start_factor:
//     linear:   base * (f + (1 - f) * step / W)                            (LinearLR(f, 1, W))
//     constant: base * f                                                   (ConstantLR(f, W))
//   Then, with t = step - W, T = total - W and E = steps_per_epoch:
//     constant:    base
//     cosine:      min_lr + (base - min_lr) * (1 + cos(pi * t / T)) / 2   (CosineAnnealingLR(T, min_lr))
//     step:        base * gamma ^ floor(t / (step_epochs * E))           (StepLR(step_epochs * E, gamma))
//     multistep:   base * gamma ^ #{m in milestones : m * E <= t}          (MultiStepLR(milestones * E, gamma))
//     exponential: base * gamma ^ (t / E), gamma per epoch                 (ExponentialLR(gamma ^ (1 / E)))
//     polynomial:  min_lr + (base - min_lr) * (1 - t / T) ^ power          (PolynomialLR(T, power) for min_lr 0)
#pragma once

#include <cstdint>

#include "trainer/config/config.hpp"

namespace trainer {

struct ScheduleLength {
  int64_t total_steps = 0;  // optimizer steps in the whole run
  int64_t steps_per_epoch = 0;
};

int64_t warmup_steps(const ScheduleConfig& s, const ScheduleLength& length);

double lr_at(const ScheduleConfig& s, double base_lr, int64_t step, const ScheduleLength& length);

}  // namespace trainer
