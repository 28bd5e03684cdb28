#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>

#include "trainer/cli/checkpoint_config.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/io/weights.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

using nlohmann::json;

namespace {

// safetensors metadata is text to text; lists go in as JSON so Python reads them back with json.loads.
std::map<std::string, std::string> export_metadata(const Config& c, const CheckpointMeta& meta) {
  const auto& in = meta.input;
  return {{"format", "pt"},  // what Hugging Face loaders expect of PyTorch weights
          {"producer", "trainer " TRAINER_VERSION},
          {"arch", c.model.arch},
          {"num_classes", std::to_string(c.model.num_classes)},
          {"in_channels", std::to_string(c.model.in_channels)},
          {"stem", enum_name(stem_kinds(), c.model.stem)},
          {"input_shape", json({in.channels, in.height, in.width}).dump()},  // C, H, W of the training images
          {"mean", json(c.data.mean).dump()},
          {"std", json(c.data.std).dump()},
          {"class_names", json(meta.class_names).dump()},
          {"epoch", std::to_string(meta.epoch)},
          {"step", std::to_string(meta.step)},
          {"config", meta.config.dump()}};
}

}  // namespace

int run_export(const ExportArgs& args) {
  if (args.checkpoint.empty()) throw UsageError("export needs --checkpoint FILE");
  if (args.output.empty()) throw UsageError("export needs --output FILE.safetensors");
  const LoadedCheckpoint checkpoint(args.checkpoint);
  const Config c = config_for_checkpoint(checkpoint, "", {}).config;
  const ImageShape& input = checkpoint.meta().input;
  if (input.channels == 0)
    throw CheckpointError(args.checkpoint + ": records no input shape (written by an older trainer); resume it to re-save");
  auto model = build_model(c.model, input);
  checkpoint.restore_model(*model);
  const NamedTensors state = model_state(*model);
  write_safetensors(args.output, state, export_metadata(c, checkpoint.meta()));
  int64_t values = 0;
  for (const auto& item : state) values += item.second.numel();
  std::printf("exported %s (%s, epoch %lld): %zu tensors, %lld values -> %s\n", args.checkpoint.c_str(),
              c.model.arch.c_str(), static_cast<long long>(checkpoint.meta().epoch), state.size(),
              static_cast<long long>(values), args.output.c_str());
  return 0;
}

void add_export_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd =
      app.add_subcommand("export", "write a checkpoint's weights as torchvision-named safetensors with metadata");
  add_checkpoint_option(*cmd, args->checkpoint);
  cmd->add_option("-o,--output", args->output, "safetensors file to write")->required();
  commands.push_back({cmd, [args] { return run_export(*args); }});
}

}  // namespace trainer
