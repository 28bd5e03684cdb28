#include "trainer/engine/resolve_config.hpp"

#include "trainer/config/load.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/engine/weights_transform.hpp"
#include "trainer/optim/schedules.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

void check_channels(const std::string& key, const std::vector<double>& values, int64_t channels) {
  if (values.size() != 1 && static_cast<int64_t>(values.size()) != channels)
    throw ConfigError("data." + key + ": expected 1 or model.in_channels (" + std::to_string(channels) +
                      ") values, got " + std::to_string(values.size()));
}

}  // namespace

Config resolve_config(Config c) {
  apply_data_kind(c);  // the kind's usual mean and std, and its rules
  check_channels("mean", c.data.mean, c.model.in_channels);
  check_channels("std", c.data.std, c.model.in_channels);
  for (double s : c.data.std)
    if (!(s > 0)) throw ConfigError("data.std: expected values > 0, got " + std::to_string(s));
  check_schedule_kind(c);
  return c;
}

Config resolve_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  return resolve_config(load_config(file, overrides, apply_weights_transform));
}

Config resolve_config(const nlohmann::json& config) {
  nlohmann::json j = config;
  apply_weights_transform(j);
  return resolve_config(parse_config(j));
}

}  // namespace trainer
