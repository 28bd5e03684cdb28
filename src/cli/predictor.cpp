#include "trainer/cli/predictor.hpp"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/deploy/export_format.hpp"
#include "trainer/engine/backend_settings.hpp"
#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

Predictor predictor_from_checkpoint(const std::string& path) {
  const LoadedCheckpoint checkpoint(path);
  Predictor p;
  p.config = config_for_checkpoint(checkpoint, "", {}).config;
  apply_threads(p.config.run);
  apply_backend_settings(p.config.run);
  p.device = select_device(p.config.run.device);
  p.input = checkpoint.meta().input;
  p.names = checkpoint.meta().class_names;
  p.model = model_from_checkpoint(checkpoint, p.config.model, p.input, /*ema=*/false);
  p.channels_last = place_in_checked_layout(*p.model, p.config.model, p.input, p.device, warn_on_stderr).channels_last;
  return p;
}

// An exported ONNX or TorchScript file: the run's config and classes come from the metadata export wrote.
Predictor predictor_from_export(const std::string& path) {
  const ExportFormat format = format_for_output("", path);
  if (!format.open)
    throw UsageError(path + ": a " + format.name + " file holds weights only; give --checkpoint, or --model with an " +
                     "exported ONNX or TorchScript file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ExportError(path + ": cannot open the file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  DeployedModel deployed = format.open(bytes.str(), path);
  const auto field = [&](const std::string& key) {
    const auto it = deployed.metadata.find(key);
    if (it == deployed.metadata.end())
      throw ExportError(path + ": its metadata has no \"" + key + "\" (not exported by trainer export?)");
    const auto j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw ExportError(path + ": its metadata \"" + key + "\" is not JSON");
    return j;
  };
  Predictor p;
  p.config = resolve_config(field("config"));
  p.config.model.num_classes = field("num_classes").get<int64_t>();
  const auto shape = field("input_shape");
  p.input = {shape.at(1).get<int64_t>(), shape.at(2).get<int64_t>(), shape.at(0).get<int64_t>()};
  p.names = field("class_names").get<std::vector<std::string>>();
  apply_threads(p.config.run);
  p.model = deployed.model;  // runs on the CPU
  return p;
}

Predictor open_predictor(const std::string& checkpoint, const std::string& model) {
  if (checkpoint.empty() == model.empty())
    throw UsageError("give either --checkpoint FILE or --model FILE (an exported ONNX or TorchScript file)");
  Predictor p = model.empty() ? predictor_from_checkpoint(checkpoint) : predictor_from_export(model);
  for (auto i = static_cast<int64_t>(p.names.size()); i < p.config.model.num_classes; ++i)
    p.names.push_back(std::to_string(i));
  p.model->eval();
  return p;
}

}  // namespace trainer
