#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/cli/predictor.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/engine/evaluate.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// `trainer predict`: top-5 classes of image files with a checkpoint's own preprocessing.
struct PredictArgs {
  ModelSource source;               // --checkpoint FILE, or --model FILE (exported ONNX or TorchScript) [--trust-model]
  std::vector<std::string> images;  // IMAGE...
  bool json = false;                // --json: one JSON line
};

}  // namespace

int run_predict(const PredictArgs& args) {
  if (args.images.empty()) throw UsageError("predict needs one or more IMAGE files");
  Predictor p = open_predictor(args.source.checkpoint, args.source.model, args.source.trust_model);
  const Config& c = p.config;
  const std::vector<std::string>& names = p.names;

  FileList files;
  for (const auto& image : args.images) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(image, ec)) throw DataError(image + ": no such image file");
    files.add(image, 0);
  }
  const auto source = std::make_shared<FolderSource>("", std::move(files), names, image_file_transform(c.data, p.input),
                                                     p.input.channels);

  // evaluate() runs the same batched, normalised forward pass as eval; only its top-k output is used here.
  nlohmann::json out = nlohmann::json::array();
  EvalOptions options = eval_options(c, p.device, p.channels_last, nullptr);
  options.on_batch = [&](size_t first, const torch::Tensor& classes, const torch::Tensor& probs, const torch::Tensor&) {
    const auto cls = classes.accessor<int64_t, 2>();
    const auto prob = probs.accessor<float, 2>();
    for (int64_t i = 0; i < classes.size(0); ++i) {
      nlohmann::json top = nlohmann::json::array();
      for (int64_t j = 0; j < classes.size(1); ++j)  // open_predictor checked the logits' width against the names
        top.push_back({{"class", cls[i][j]}, {"name", names[static_cast<size_t>(cls[i][j])]}, {"prob", prob[i][j]}});
      out.push_back({{"image", args.images[first + static_cast<size_t>(i)]}, {"top", top}});
    }
  };
  evaluate(*p.model, source, options);

  if (args.json) {
    nlohmann::json report = args.source.model.empty() ? nlohmann::json{{"checkpoint", args.source.checkpoint}}
                                                      : nlohmann::json{{"model", args.source.model}};
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
  add_model_source_options(*cmd, args->source);
  cmd->add_option("images", args->images, "image files")->required();
  add_json_flag(*cmd, args->json);
  commands.push_back({cmd, [args] { return run_predict(*args); }});
}

}  // namespace trainer
