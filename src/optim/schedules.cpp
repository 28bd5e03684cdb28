#include "trainer/optim/schedules.hpp"

#include <algorithm>
#include <cmath>

#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

// Each shape equals the PyTorch scheduler named in optim/schedule.hpp, stepped once per optimizer step.
double constant(const ScheduleConfig&, double base, const AfterWarmup&) { return base; }

double cosine(const ScheduleConfig& s, double base, const AfterWarmup& at) {
  return s.min_lr + (base - s.min_lr) * 0.5 * (1.0 + std::cos(M_PI * at.progress()));
}

double step(const ScheduleConfig& s, double base, const AfterWarmup& at) {
  return base * std::pow(s.gamma, std::floor(at.t / std::max(1.0, s.step_epochs * at.epoch_steps)));
}

double multistep(const ScheduleConfig& s, double base, const AfterWarmup& at) {
  const auto passed = std::count_if(s.milestones.begin(), s.milestones.end(),
                                    [&](double m) { return std::round(m * at.epoch_steps) <= at.t; });
  return base * std::pow(s.gamma, static_cast<double>(passed));
}

void needs_milestones(const ScheduleConfig& s) {
  if (s.milestones.empty())
    throw ConfigError("schedule.milestones: the multistep schedule needs at least one milestone");
}

double exponential(const ScheduleConfig& s, double base, const AfterWarmup& at) {
  return base * std::pow(s.gamma, at.t / at.epoch_steps);
}

double polynomial(const ScheduleConfig& s, double base, const AfterWarmup& at) {
  return s.min_lr + (base - s.min_lr) * std::pow(1.0 - at.progress(), s.power);
}

}  // namespace

const std::vector<ScheduleRow>& schedule_rows() {
  static const std::vector<ScheduleRow> rows{
      {/*kind=*/ScheduleKind::constant, /*decays_to_min_lr=*/false, /*check=*/nullptr, /*lr=*/constant},
      {/*kind=*/ScheduleKind::cosine, /*decays_to_min_lr=*/true, /*check=*/nullptr, /*lr=*/cosine},
      {/*kind=*/ScheduleKind::step, /*decays_to_min_lr=*/false, /*check=*/nullptr, /*lr=*/step},
      {/*kind=*/ScheduleKind::multistep, /*decays_to_min_lr=*/false, /*check=*/needs_milestones, /*lr=*/multistep},
      {/*kind=*/ScheduleKind::exponential, /*decays_to_min_lr=*/false, /*check=*/nullptr, /*lr=*/exponential},
      {/*kind=*/ScheduleKind::polynomial, /*decays_to_min_lr=*/true, /*check=*/nullptr, /*lr=*/polynomial},
  };
  return rows;
}

const ScheduleRow& schedule_row(ScheduleKind kind) { return row_of(schedule_rows(), kind); }

void check_schedule_kind(const Config& c) {
  const ScheduleRow& row = schedule_row(c.schedule.kind);
  if (row.decays_to_min_lr && c.schedule.min_lr > base_learning_rate(c))
    throw ConfigError("schedule.min_lr: expected a value <= the base learning rate (" +
                      format_number(base_learning_rate(c)) + "), got " + format_number(c.schedule.min_lr));
  if (row.check) row.check(c.schedule);
}

}  // namespace trainer
