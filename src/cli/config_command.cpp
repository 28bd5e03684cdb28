#include <iostream>

#include "trainer/cli/commands.hpp"
#include "trainer/config/load.hpp"
#include "trainer/config/schema.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

int run_config_show(const ConfigShowArgs& args) {
  if (args.config.empty()) throw UsageError("config show needs --config FILE");
  std::cout << config_to_json(load_config(args.config, args.overrides)).dump(2) << "\n";
  return 0;
}

int run_config_schema() {
  std::cout << config_schema().dump(2) << "\n";
  return 0;
}

}  // namespace trainer
