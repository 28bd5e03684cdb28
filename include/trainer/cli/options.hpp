// Option groups that several commands share, so each is spelt, typed and explained once, and choice lists taken
// from the enum tables the config parser uses.
//   add_config_options(*cmd, args.config, args.overrides, "config whose data section is timed", /*required=*/true);
//   cmd->add_option("--stem", args.stem)->check(one_of(stem_kinds()));
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/config/fields.hpp"

namespace trainer {

// -c/--config FILE and --set KEY=VALUE (repeatable).
void add_config_options(CLI::App& cmd, std::string& config, std::vector<std::string>& overrides,
                        const std::string& config_help, bool required = false);

// --checkpoint FILE, required.
void add_checkpoint_option(CLI::App& cmd, std::string& checkpoint);

// --checkpoint FILE or --model FILE (an exported ONNX or TorchScript file), and --trust-model, which a TorchScript
// file needs: what predict and bench predict run.
struct ModelSource {
  std::string checkpoint;
  std::string model;
  bool trust_model = false;
};
void add_model_source_options(CLI::App& cmd, ModelSource& source);

// -o/--output-dir DIR.
void add_output_dir_option(CLI::App& cmd, std::string& output_dir, const std::string& help);

// --allow-pipe: shards named "pipe:CMD" may run CMD (data/sources/pipe_shard.hpp). A flag of the command line alone:
// a config file cannot give itself the right to run commands.
void add_allow_pipe_flag(CLI::App& cmd, bool& allow);
// The flag applied to a config read from a file or a checkpoint: data.shards.allow_pipe.
void apply_allow_pipe(Config& config, bool allow);

// --json: one JSON line on stdout.
void add_json_flag(CLI::App& cmd, bool& json);

// "warning: <message>" on stderr: how commands without a run log (eval, predict, bench) report a warning.
void warn_on_stderr(const std::string& message);

// A check that accepts exactly these names, listed in the error.
CLI::Validator one_of(const std::vector<std::string>& names);
template <class E>
CLI::Validator one_of(const EnumTable<E>& table) {
  return one_of(enum_names(table));
}

}  // namespace trainer
