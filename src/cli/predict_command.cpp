#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

#include "trainer/cli/checkpoint_config.hpp"
#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/data/folder_source.hpp"
#include "trainer/engine/evaluate.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/engine/backend_settings.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// The checkpoint's eval preprocessing for image files: image-folder runs use their own eval transform
// (resize, center crop, normalisation); MNIST-style runs resize the shorter side to the model's input size
// and center-crop it, in grey when the model takes one channel.
TransformSpec predict_transform(const Config& c, const ImageShape& input) {
  if (c.data.kind == DataKind::imagenet) return make_transform_spec(c.data, /*train=*/false);
  if (input.height != input.width)
    throw UsageError("predict needs a square model input; this checkpoint's is " + std::to_string(input.height) +
                     "x" + std::to_string(input.width));
  TransformSpec spec;
  spec.train = false;
  spec.size = input.height;
  spec.resize = input.height;
  return spec;
}

}  // namespace

int run_predict(const PredictArgs& args) {
  if (args.images.empty()) throw UsageError("predict needs one or more IMAGE files");
  const LoadedCheckpoint checkpoint(args.checkpoint);
  const Config c = config_for_checkpoint(checkpoint, "", {}).config;
  apply_threads(c.run);
  apply_backend_settings(c.run);
  const torch::Device device = select_device(c.run.device);
  const ImageShape input = checkpoint.meta().input;
  std::vector<std::string> names = checkpoint.meta().class_names;
  if (static_cast<int64_t>(names.size()) != c.model.num_classes)
    for (int64_t i = static_cast<int64_t>(names.size()); i < c.model.num_classes; ++i) names.push_back(std::to_string(i));

  FileList files;
  for (const auto& image : args.images) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(image, ec)) throw DataError(image + ": no such image file");
    files.add(image, 0);
  }
  const auto source = std::make_shared<FolderSource>("", std::move(files), names, predict_transform(c, input),
                                                     input.channels);
  auto model = build_model(c.model, source->shape());
  checkpoint.restore_model(*model);
  const KernelLayout layout = place_in_checked_layout(*model, c.model, source->shape(), device, warn_on_stderr);

  // evaluate() runs the same batched, normalised forward pass as eval; only its top-k output is used here.
  nlohmann::json out = nlohmann::json::array();
  EvalOptions options = eval_options(c, device, layout.channels_last, nullptr);
  options.on_batch = [&](size_t first, const torch::Tensor& classes, const torch::Tensor& probs, const torch::Tensor&) {
    const auto cls = classes.accessor<int64_t, 2>();
    const auto p = probs.accessor<float, 2>();
    for (int64_t i = 0; i < classes.size(0); ++i) {
      nlohmann::json top = nlohmann::json::array();
      for (int64_t j = 0; j < classes.size(1); ++j)
        top.push_back({{"class", cls[i][j]}, {"name", names[static_cast<size_t>(cls[i][j])]}, {"prob", p[i][j]}});
      out.push_back({{"image", args.images[first + static_cast<size_t>(i)]}, {"top", top}});
    }
  };
  evaluate(*model, source, options);

  if (args.json) {
    std::cout << nlohmann::json{{"checkpoint", args.checkpoint}, {"predictions", out}}.dump() << "\n";
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
  CLI::App* cmd =
      app.add_subcommand("predict", "top-5 classes of image files, with the checkpoint's own preprocessing");
  add_checkpoint_option(*cmd, args->checkpoint);
  cmd->add_option("images", args->images, "image files")->required();
  add_json_flag(*cmd, args->json);
  commands.push_back({cmd, [args] { return run_predict(*args); }});
}

}  // namespace trainer
