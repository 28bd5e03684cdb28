// The rules of the kinds whose rows live beside their behaviour: a data kind's row (data/data_kinds.cpp) holds its
// usual normalisation, its rules and its reader; a schedule's row (optim/schedules.cpp) its rules and formula.
// The config reader applies them through these two functions, declared here and defined beside those rows, so
// config/ names no header of the modules above it and every kind keeps one row.
#pragma once

#include "trainer/config/config.hpp"

namespace trainer {

// Fills data.mean / data.std left empty with the kind's usual values, then checks the kind's rules
// (ConfigError naming the key).
void apply_data_kind(Config& c);

// Checks the schedule's rules against the run's base learning rate (ConfigError naming the key).
void check_schedule_kind(const Config& c);

}  // namespace trainer
