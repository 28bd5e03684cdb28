#include "trainer/cli/predictor.hpp"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "trainer/cli/options.hpp"
#include "trainer/config/json_text.hpp"
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
#include "trainer/util/text.hpp"

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
Predictor predictor_from_export(const std::string& path, bool trust_model) {
  const ExportFormat format = format_for_output("", path);
  if (!format.open)
    throw UsageError(path + ": a " + format.name + " file holds weights only; give --checkpoint, or --model with an " +
                     "exported ONNX or TorchScript file");
  // A TorchScript file is a program (PyTorch's security notes: treat it as code from whoever wrote it): LibTorch
  // runs its code as it loads and as it predicts, and no check of ours can tell what that code does.
  if (format.runs_code && !trust_model)
    throw UsageError(path + ": a " + format.name + " file is a program, and LibTorch runs its code as it loads; " +
                     "give --trust-model if you trust whoever made it, or predict from --checkpoint or an ONNX export");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ExportError(path + ": cannot open the file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  DeployedModel deployed = format.open(bytes.str(), path);
  const auto field = [&](const std::string& key) {
    const auto it = deployed.metadata.find(key);
    if (it == deployed.metadata.end())
      throw ExportError(path + ": its metadata has no \"" + key + "\" (not exported by trainer export?)");
    const auto j = parse_json(it->second, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw ExportError(path + ": its metadata \"" + key + "\" is not JSON");
    return j;
  };
  // Each value as the config would bound it: the metadata is a stranger's file too.
  const auto whole_number = [&](const nlohmann::json& j, const std::string& what, int64_t lo, double hi) {
    if (!j.is_number_integer() || j.get<int64_t>() < lo || static_cast<double>(j.get<int64_t>()) > hi)
      throw ExportError(path + ": its metadata's " + what + " is not a whole number from " + std::to_string(lo) +
                        " to " + std::to_string(static_cast<int64_t>(hi)) + " (" + first_line(j.dump()) + ")");
    return j.get<int64_t>();
  };
  Predictor p;
  p.config = resolve_config(field("config"));
  p.config.model.num_classes = whole_number(field("num_classes"), "num_classes", 2, kMostClasses);
  const auto shape = field("input_shape");
  if (!shape.is_array() || shape.size() != 3)
    throw ExportError(path + ": its metadata's input_shape is not [channels, height, width]");
  p.input = {whole_number(shape[1], "input height", 1, kMostImageSide),
             whole_number(shape[2], "input width", 1, kMostImageSide), whole_number(shape[0], "input channels", 1, 4)};
  const auto names = field("class_names");
  if (!names.is_array() || names.size() > static_cast<size_t>(p.config.model.num_classes) ||
      !std::all_of(names.begin(), names.end(), [](const nlohmann::json& n) { return n.is_string(); }))
    throw ExportError(path + ": its metadata's class_names is not a list of at most num_classes names");
  p.names = names.get<std::vector<std::string>>();
  apply_threads(p.config.run);
  p.model = deployed.model;  // runs on the CPU
  // One image of the metadata's shape through the graph: it must give num_classes scores, which predict looks up
  // in the names (an edited graph may give more).
  torch::NoGradGuard no_grad;
  p.model->eval();
  const torch::Tensor logits =
      p.model->forward(torch::zeros({1, p.input.channels, p.input.height, p.input.width}, torch::kFloat));
  if (logits.dim() != 2 || logits.size(0) != 1 || logits.size(1) != p.config.model.num_classes)
    throw ExportError(path + ": the model gives scores of shape " + c10::str(logits.sizes()) +
                      " for one image, but its metadata says num_classes " +
                      std::to_string(p.config.model.num_classes));
  return p;
}

Predictor open_predictor(const std::string& checkpoint, const std::string& model, bool trust_model) {
  if (checkpoint.empty() == model.empty())
    throw UsageError("give either --checkpoint FILE or --model FILE (an exported ONNX or TorchScript file)");
  Predictor p = model.empty() ? predictor_from_checkpoint(checkpoint) : predictor_from_export(model, trust_model);
  for (auto i = static_cast<int64_t>(p.names.size()); i < p.config.model.num_classes; ++i)
    p.names.push_back(std::to_string(i));
  p.model->eval();
  return p;
}

}  // namespace trainer
