// Every learning-rate schedule equals PyTorch's scheduler for the same settings, step by step
// (tests/interop/schedules.py runs them). Needs Debian's python3-torch; skipped with a message without it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "e2e/e2e_support.hpp"
#include "trainer/optim/schedule.hpp"

namespace trainer {
namespace {

using nlohmann::json;

bool torch_available() {
  static const bool available = testing::run_command(std::string(TRAINER_PYTHON) + " -c 'import torch'").exit_code == 0;
  return available;
}

struct ScheduleCase {
  std::string name;
  ScheduleConfig schedule;
  double base;
};

void PrintTo(const ScheduleCase& c, std::ostream* os) { *os << c.name; }

std::string quoted(const std::string& s) { return "'" + s + "'"; }

class ScheduleParity : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(ScheduleParity, EqualsPyTorchsSchedulerAtEveryStep) {
  if (!torch_available())
    GTEST_SKIP() << "Python torch not found at " TRAINER_PYTHON << "; install python3-torch (scripts/setup.sh does)";
  const ScheduleCase& c = GetParam();
  const ScheduleLength length{60, 6};
  const ScheduleConfig& s = c.schedule;
  std::string kind;
  for (const auto& [name, value] : schedule_kinds())
    if (value == s.kind) kind = name;
  const json args = {{"kind", kind},
                     {"base", c.base},
                     {"total", length.total_steps},
                     {"per_epoch", length.steps_per_epoch},
                     {"warmup", warmup_steps(s, length)},
                     {"warmup_kind", s.warmup == WarmupKind::linear ? "linear" : "constant"},
                     {"start_factor", s.warmup_start_factor},
                     {"min_lr", s.min_lr},
                     {"step_epochs", s.step_epochs},
                     {"milestones", s.milestones},
                     {"gamma", s.gamma},
                     {"power", s.power}};
  const auto r = testing::run_command(std::string(TRAINER_PYTHON) + " " + TRAINER_SOURCE_DIR +
                                      "/tests/interop/schedules.py " + quoted(args.dump()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The JSON is the last line; Python may print warnings before it.
  const std::string out = r.output.substr(0, r.output.find_last_not_of('\n') + 1);
  const auto expected = json::parse(out.substr(out.find_last_of('\n') + 1)).get<std::vector<double>>();
  ASSERT_EQ(expected.size(), static_cast<size_t>(length.total_steps));
  for (int64_t step = 0; step < length.total_steps; ++step) {
    const double want = expected[static_cast<size_t>(step)];
    EXPECT_NEAR(lr_at(s, c.base, step, length), want, 1e-12 + 1e-9 * std::abs(want)) << c.name << " step " << step;
  }
}

ScheduleConfig make(ScheduleKind kind, int64_t warmup, WarmupKind warmup_kind = WarmupKind::linear) {
  ScheduleConfig s;
  s.kind = kind;
  s.warmup = warmup_kind;
  s.warmup_steps = warmup;
  s.warmup_start_factor = 0.25;
  return s;
}

std::vector<ScheduleCase> cases() {
  std::vector<ScheduleCase> out;
  auto add = [&](const std::string& name, ScheduleConfig s) { out.push_back({name, s, 0.4}); };
  add("constant_linear_warmup", make(ScheduleKind::constant, 7));
  add("constant_constant_warmup", make(ScheduleKind::constant, 7, WarmupKind::constant));
  auto cosine = make(ScheduleKind::cosine, 9);
  cosine.min_lr = 0.01;
  add("cosine_min_lr", cosine);
  add("cosine_no_warmup", make(ScheduleKind::cosine, 0));
  auto step = make(ScheduleKind::step, 6);
  step.step_epochs = 2.0;
  step.gamma = 0.5;
  add("step_two_epochs", step);
  auto multistep = make(ScheduleKind::multistep, 6, WarmupKind::constant);
  multistep.milestones = {1.5, 4.0, 7.0};
  multistep.gamma = 0.3;
  add("multistep", multistep);
  auto exponential = make(ScheduleKind::exponential, 3);
  exponential.gamma = 0.7;
  add("exponential_per_epoch", exponential);
  auto polynomial = make(ScheduleKind::polynomial, 5);
  polynomial.power = 2.0;
  add("polynomial_power2", polynomial);
  add("polynomial_linear", make(ScheduleKind::polynomial, 0));
  return out;
}

INSTANTIATE_TEST_SUITE_P(Kinds, ScheduleParity, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ScheduleCase>& info) { return info.param.name; });

}  // namespace
}  // namespace trainer
