#include <iostream>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/config/schema.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// `trainer config show`: the resolved config (extends, --set and derived defaults applied) as JSON.
struct ConfigShowArgs {
  std::string config;                  // --config FILE
  std::vector<std::string> overrides;  // --set KEY=VALUE
};

}  // namespace

int run_config_show(const ConfigShowArgs& args) {
  if (args.config.empty()) throw UsageError("config show needs --config FILE");
  std::cout << config_to_json(resolve_config(args.config, args.overrides)).dump(2) << "\n";
  return 0;
}

int run_config_schema() {
  std::cout << config_schema().dump(2) << "\n";
  return 0;
}

void add_config_command(CLI::App& app, Commands& commands) {
  CLI::App* cmd = app.add_subcommand("config", "print the resolved config, or the JSON Schema of every key");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ConfigShowArgs>();
  CLI::App* show = cmd->add_subcommand("show", "print the config as trainer resolves it");
  add_config_options(*show, args->config, args->overrides, "JSON config file", /*required=*/true);
  commands.push_back({show, [args] { return run_config_show(*args); }});
  CLI::App* schema =
      cmd->add_subcommand("schema", "print a JSON Schema of the config (type, default, range, description)");
  commands.push_back({schema, [] { return run_config_schema(); }});
}

}  // namespace trainer
