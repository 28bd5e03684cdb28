// The config a run uses: what config/load.hpp reads, with the rows of the kinds it picks applied (a data kind's
// usual mean and std and its rules, a schedule's rules, the eval transform of the published weights it names:
// engine/weights_transform.hpp), then the checks that need them. Every command and test that turns a file or JSON
// into a Config goes through here.
//   Config c = resolve_config("configs/mnist_cnn.json", {"optim.lr=0.02"});
//   Config d = resolve_config(checkpoint.meta().config);
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

// load_config + the kind rows (ConfigError naming the key).
Config resolve_config(const std::filesystem::path& file, const std::vector<std::string>& overrides);

// parse_config + the kind rows.
Config resolve_config(const nlohmann::json& config);

// The kind rows applied to a config already read. Resolving twice changes nothing.
Config resolve_config(Config config);

}  // namespace trainer
