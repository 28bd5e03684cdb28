#include <gtest/gtest.h>

#include <cmath>

#include "trainer/optim/schedule.hpp"

namespace trainer {
namespace {

// Expected values are PyTorch's: LinearLR(start_factor=f, total_iters=W) followed by
// CosineAnnealingLR(T_max=total-W, eta_min) / StepLR(step_size, gamma), stepped once per iteration.
TEST(Schedule, WarmupThenCosine) {
  ScheduleConfig s;
  s.kind = ScheduleKind::cosine;
  s.warmup_steps = 10;
  s.warmup_start_factor = 0.1;
  s.min_lr = 0.001;
  const ScheduleLength length{110, 11};
  EXPECT_DOUBLE_EQ(lr_at(s, 0.1, 0, length), 0.01);                     // start of warmup: base * f
  EXPECT_DOUBLE_EQ(lr_at(s, 0.1, 5, length), 0.1 * (0.1 + 0.9 * 0.5));  // half way through warmup
  EXPECT_DOUBLE_EQ(lr_at(s, 0.1, 10, length), 0.1);                     // end of warmup: the base lr
  EXPECT_NEAR(lr_at(s, 0.1, 60, length), 0.001 + 0.099 * 0.5, 1e-15);   // mid-cosine
  EXPECT_NEAR(lr_at(s, 0.1, 109, length), 0.001 + 0.099 * 0.5 * (1 + std::cos(M_PI * 99.0 / 100.0)), 1e-15);
  EXPECT_NEAR(lr_at(s, 0.1, 110, length), 0.001, 1e-15);
}

TEST(Schedule, WarmupInEpochs) {
  ScheduleConfig s;
  s.kind = ScheduleKind::constant;
  s.warmup_epochs = 0.5;
  s.warmup_start_factor = 0.0;
  const ScheduleLength length{100, 20};
  EXPECT_EQ(warmup_steps(s, length), 10);
  EXPECT_DOUBLE_EQ(lr_at(s, 1.0, 0, length), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 1.0, 4, length), 0.4);
  EXPECT_DOUBLE_EQ(lr_at(s, 1.0, 10, length), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 1.0, 99, length), 1.0);
}

TEST(Schedule, NoWarmupCosineStartsAtBase) {
  ScheduleConfig s;
  const ScheduleLength length{4, 2};
  EXPECT_DOUBLE_EQ(lr_at(s, 0.4, 0, length), 0.4);
  EXPECT_NEAR(lr_at(s, 0.4, 2, length), 0.2, 1e-15);
  EXPECT_NEAR(lr_at(s, 0.4, 3, length), 0.2 * (1 + std::cos(M_PI * 0.75)), 1e-15);
}

TEST(Schedule, StepDecaysEveryStepEpochs) {
  ScheduleConfig s;
  s.kind = ScheduleKind::step;
  s.step_epochs = 2;
  s.gamma = 0.5;
  const ScheduleLength length{100, 10};
  EXPECT_DOUBLE_EQ(lr_at(s, 0.8, 0, length), 0.8);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.8, 19, length), 0.8);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.8, 20, length), 0.4);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.8, 99, length), 0.8 * 0.0625);
}

}  // namespace
}  // namespace trainer
