#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "trainer/cli/checkpoint_config.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/folder_source.hpp"
#include "trainer/deploy/export_format.hpp"
#include "trainer/engine/backend_settings.hpp"
#include "trainer/engine/evaluate.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// What predict runs: the model, where, and the run's config, input shape and class names for preprocessing.
struct Predictor {
  Config config;
  ImageShape input;
  std::vector<std::string> names;
  ClassifierPtr model;
  torch::Device device{torch::kCPU};
  bool channels_last = false;
};

Predictor from_checkpoint(const std::string& path) {
  const LoadedCheckpoint checkpoint(path);
  Predictor p;
  p.config = config_for_checkpoint(checkpoint, "", {}).config;
  apply_threads(p.config.run);
  apply_backend_settings(p.config.run);
  p.device = select_device(p.config.run.device);
  p.input = checkpoint.meta().input;
  p.names = checkpoint.meta().class_names;
  p.model = build_model(p.config.model, p.input);
  checkpoint.restore_model(*p.model);
  p.channels_last = place_in_checked_layout(*p.model, p.config.model, p.input, p.device, warn_on_stderr).channels_last;
  return p;
}

// An exported ONNX or TorchScript file: the run's config and classes come from the metadata export wrote.
Predictor from_exported(const std::string& path) {
  const ExportFormat& format = format_for_output("", path);
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
  p.config = parse_config(field("config"));
  p.config.model.num_classes = field("num_classes").get<int64_t>();
  const auto shape = field("input_shape");
  p.input = {shape.at(1).get<int64_t>(), shape.at(2).get<int64_t>(), shape.at(0).get<int64_t>()};
  p.names = field("class_names").get<std::vector<std::string>>();
  apply_threads(p.config.run);
  p.model = deployed.model;  // runs on the CPU
  return p;
}

}  // namespace

int run_predict(const PredictArgs& args) {
  if (args.images.empty()) throw UsageError("predict needs one or more IMAGE files");
  if (args.checkpoint.empty() == args.model.empty())
    throw UsageError("predict needs either --checkpoint FILE or --model FILE (an exported ONNX or TorchScript file)");
  Predictor p = args.model.empty() ? from_checkpoint(args.checkpoint) : from_exported(args.model);
  const Config& c = p.config;
  std::vector<std::string>& names = p.names;
  if (static_cast<int64_t>(names.size()) != c.model.num_classes)
    for (int64_t i = static_cast<int64_t>(names.size()); i < c.model.num_classes; ++i) names.push_back(std::to_string(i));

  FileList files;
  for (const auto& image : args.images) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(image, ec)) throw DataError(image + ": no such image file");
    files.add(image, 0);
  }
  const auto source = std::make_shared<FolderSource>("", std::move(files), names,
                                                     image_file_transform(c.data, p.input), p.input.channels);

  // evaluate() runs the same batched, normalised forward pass as eval; only its top-k output is used here.
  nlohmann::json out = nlohmann::json::array();
  EvalOptions options = eval_options(c, p.device, p.channels_last, nullptr);
  options.on_batch = [&](size_t first, const torch::Tensor& classes, const torch::Tensor& probs, const torch::Tensor&) {
    const auto cls = classes.accessor<int64_t, 2>();
    const auto prob = probs.accessor<float, 2>();
    for (int64_t i = 0; i < classes.size(0); ++i) {
      nlohmann::json top = nlohmann::json::array();
      for (int64_t j = 0; j < classes.size(1); ++j)
        top.push_back({{"class", cls[i][j]}, {"name", names[static_cast<size_t>(cls[i][j])]}, {"prob", prob[i][j]}});
      out.push_back({{"image", args.images[first + static_cast<size_t>(i)]}, {"top", top}});
    }
  };
  evaluate(*p.model, source, options);

  if (args.json) {
    const nlohmann::json from = args.model.empty() ? nlohmann::json{{"checkpoint", args.checkpoint}}
                                                   : nlohmann::json{{"model", args.model}};
    nlohmann::json report = from;
    report["predictions"] = out;
    std::cout << report.dump() << "\n";
    return 0;
  }
  for (const auto& image : out) {
    std::printf("%s\n", image["image"].get<std::string>().c_str());
    for (const auto& t : image["top"])
      std::printf("  %.4f  %s\n", t["prob"].get<double>(), t["name"].get<std::string>().c_str());
  }
  return 0;
}

void add_predict_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* cmd = app.add_subcommand(
      "predict", "top-5 classes of image files, with the checkpoint's own preprocessing (or an exported file's)");
  cmd->add_option("--checkpoint", args->checkpoint, "checkpoint file (last.pt or best.pt)");
  cmd->add_option("--model", args->model, "an exported ONNX (run in OpenCV's DNN module) or TorchScript file");
  cmd->add_option("images", args->images, "image files")->required();
  add_json_flag(*cmd, args->json);
  commands.push_back({cmd, [args] { return run_predict(*args); }});
}

}  // namespace trainer
