// The learning-rate schedules after warmup, one row each: whether it decays to schedule.min_lr, what else its keys
// must satisfy, and its rate as a pure function of the steps since warmup. lr_at() (optim/schedule.hpp) adds the
// warmup; resolve_config checks each row's rules (engine/resolve_config.hpp). A new schedule is one ScheduleKind
// value with its name (config/config.hpp) and one row in schedules.cpp.
//   const ScheduleRow& row = schedule_row(config.schedule.kind);
//   double lr = row.lr(config.schedule, base_lr, {t, span, steps_per_epoch});
#pragma once

#include <algorithm>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

// Where the run is after warmup.
struct AfterWarmup {
  double t = 0.0;            // steps since warmup ended
  double span = 1.0;         // steps from the end of warmup to the end of the run (>= 1)
  double epoch_steps = 1.0;  // optimizer steps per epoch (>= 1)

  double progress() const { return std::min(1.0, t / span); }  // 0 .. 1
};

struct ScheduleRow {
  ScheduleKind kind;
  bool decays_to_min_lr = false;  // schedule.min_lr is its floor, so it must not exceed the base rate
  // Throws ConfigError when the schedule's own keys are unusable (null: no rules beyond the field ranges).
  void (*check)(const ScheduleConfig& s) = nullptr;
  double (*lr)(const ScheduleConfig& s, double base_lr, const AfterWarmup& at) = nullptr;
};

const std::vector<ScheduleRow>& schedule_rows();
const ScheduleRow& schedule_row(ScheduleKind kind);

// Checks the schedule's row against a config just read: its rules and the run's base learning rate (ConfigError
// naming the key). resolve_config (engine/resolve_config.hpp) calls it.
void check_schedule_kind(const Config& c);

}  // namespace trainer
