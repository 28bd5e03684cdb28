// Turns a JSON file (with an optional "extends" parent) and --set overrides into a typed Config, checked field by
// field and across fields. The rules of the kinds a config picks (data.kind, schedule.kind) live in their rows
// above this module: programs read configs through resolve_config (engine/resolve_config.hpp), which applies them.
//   Config c = load_config("configs/mnist_cnn.json", {"optim.lr=0.02"});
// Every error is a ConfigError naming the file or the JSON path.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

// Reads `file`; when it has "extends": "parent.json" (relative to the file), the parent is loaded first and
// this file's keys are merged over it, objects key by key.
nlohmann::json load_json_file(const std::filesystem::path& file);

// Applies "a.b.c=VALUE": VALUE is parsed as JSON when it is valid JSON, else taken as a string.
void apply_override(nlohmann::json& config, const std::string& assignment);

// Reads the JSON into the typed struct and checks the rules that span several fields.
Config parse_config(const nlohmann::json& config);

// load_json_file + overrides (+ `adjust`, on the merged JSON) + parse_config; an empty run.name becomes the
// file's stem.
Config load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                   const std::function<void(nlohmann::json&)>& adjust = {});

nlohmann::json config_to_json(const Config& config);

// A ConfigError unless `name` is one folder name (run.name: the run folder is output_dir/name), not a path.
void check_run_name(const std::string& name);

}  // namespace trainer
