#include "trainer/cli/options.hpp"

#include <cstdio>

namespace trainer {

void add_config_options(CLI::App& cmd, std::string& config, std::vector<std::string>& overrides,
                        const std::string& config_help, bool required) {
  auto* option = cmd.add_option("-c,--config", config, config_help);
  if (required) option->required();
  cmd.add_option("--set", overrides, "override a config key, e.g. --set optim.lr=0.02 (repeatable)")
      ->type_name("KEY=VALUE")
      ->take_all();
}

void add_checkpoint_option(CLI::App& cmd, std::string& checkpoint) {
  cmd.add_option("--checkpoint", checkpoint, "checkpoint file (last.pt or best.pt)")->required();
}

void add_model_source_options(CLI::App& cmd, ModelSource& source) {
  cmd.add_option("--checkpoint", source.checkpoint, "checkpoint file (last.pt or best.pt)");
  cmd.add_option("--model", source.model, "an exported ONNX (run in OpenCV's DNN module) or TorchScript file");
  cmd.add_flag("--trust-model", source.trust_model,
               "run a TorchScript --model: such a file is a program, which LibTorch runs as it loads it");
}

void add_output_dir_option(CLI::App& cmd, std::string& output_dir, const std::string& help) {
  cmd.add_option("-o,--output-dir", output_dir, help);
}

void add_allow_pipe_flag(CLI::App& cmd, bool& allow) {
  cmd.add_flag("--allow-pipe", allow,
               "let shards named pipe:CMD run CMD (with your rights) and copy its output into data.shards.cache; "
               "give it only for a config you trust");
}

void apply_allow_pipe(Config& config, bool allow) { config.data.shards.allow_pipe = allow; }

void add_json_flag(CLI::App& cmd, bool& json) { cmd.add_flag("--json", json, "print one JSON line"); }

CLI::Validator one_of(const std::vector<std::string>& names) { return CLI::IsMember(names); }

void warn_on_stderr(const std::string& message) { std::fprintf(stderr, "warning: %s\n", message.c_str()); }

}  // namespace trainer
