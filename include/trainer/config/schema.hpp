// A JSON Schema (draft 2020-12) of the config, generated from the same visit() tables the parser reads, so
// it cannot drift from what trainer accepts: every key with its type, default, range, choices and a one-line
// description; unknown keys are refused, as the parser refuses them. `trainer config schema` prints it.
#pragma once

#include <nlohmann/json.hpp>

namespace trainer {

nlohmann::json config_schema();

}  // namespace trainer
