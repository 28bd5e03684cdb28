#include <cstdio>
#include <cstdlib>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/engine/start_weights.hpp"
#include "trainer/io/download.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/sha256.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// `trainer weights list [ARCH]` and `trainer weights get ARCH NAME`.
struct WeightsArgs {
  std::string arch;
  std::string name;
  std::string sha256;
};

int run_weights_list(const WeightsArgs& args) {
  const WeightsHub hub = weights_hub_from_environment(nullptr);
  if (!args.arch.empty()) model_row(args.arch);  // an unknown arch: a ConfigError listing the valid ones
  std::printf("%-18s %-26s %-40s %9s %7s %11s  %s\n", "arch", "name", "file", "size", "top-1", "eval", "cached");
  for (const ModelRow& row : model_rows()) {
    if (!args.arch.empty() && row.name != args.arch) continue;
    for (size_t i = 0; i < row.weights.size(); ++i) {
      const PublishedWeights& w = row.weights[i];
      std::error_code ec;
      const bool cached = fs::is_regular_file(hub.cache_dir / w.file, ec);
      const std::string name = w.name + (i + 1 == row.weights.size() ? " *" : "");
      const std::string eval = std::to_string(w.eval_resize) + "/" + std::to_string(w.eval_crop) +
                               (w.interpolation == Interpolation::bicubic ? " bic" : "");
      std::printf("%-18s %-26s %-40s %6.1f MB %6.2f%% %11s  %s%s\n", row.name.c_str(), name.c_str(), w.file.c_str(),
                  static_cast<double>(w.num_params) * 4 / 1e6, w.top1, eval.c_str(), cached ? "yes" : "no",
                  w.licence.empty() ? "" : ("  " + w.licence).c_str());
    }
  }
  const std::string mirror = (hub.mirror.empty() ? "" : "; mirror " + hub.mirror) +
                             (can_download() ? "" : "; this build cannot download (no libcurl): put files there");
  std::printf(
      "* DEFAULT. size: the float32 parameters (the file is a little larger); top-1: ImageNet-1k as torchvision "
      "reports it, with its eval transform: shorter side resized to the first number, center crop of the second "
      "(bic: bicubic, else bilinear; efficientnet_v2_l's mean and std are 0.5). Cache %s%s\n",
      hub.cache_dir.string().c_str(), mirror.c_str());
  return 0;
}

int run_weights_get(const WeightsArgs& args) {
  ModelConfig model;
  model.arch = args.arch;
  model.weights = args.name;
  if (!args.sha256.empty() && !is_sha256_hex(args.sha256))
    throw UsageError("--sha256: expected 64 hex digits (a SHA-256, as sha256sum prints it), got \"" +
                     first_line(args.sha256).substr(0, 80) + "\"");
  model.weights_sha256 = args.sha256;
  const StartWeights start = locate_start_weights(model, weights_hub_from_environment([](const std::string& line) {
                                                    std::printf("%s\n", line.c_str());
                                                    std::fflush(stdout);
                                                  }));
  std::printf("%s\n", start.file.string().c_str());
  return 0;
}

}  // namespace

WeightsHub weights_hub_from_environment(std::function<void(const std::string&)> say) {
  WeightsHub hub;
  hub.cache_dir = hub_cache_dir(environment("TORCH_HOME"), environment("XDG_CACHE_HOME"), home_folder());
  hub.mirror = environment("TRAINER_WEIGHTS_MIRROR");
  hub.say = std::move(say);
  return hub;
}

void add_weights_command(CLI::App& app, Commands& commands) {
  CLI::App* cmd = app.add_subcommand(
      "weights", "torchvision's published ImageNet weights: list them, or fetch one into PyTorch's hub cache");
  cmd->require_subcommand(1);
  auto args = std::make_shared<WeightsArgs>();
  CLI::App* list = cmd->add_subcommand("list", "names, files, sizes and accuracy per arch, and whether each is cached");
  list->add_option("arch", args->arch, "only this arch");
  commands.push_back({list, [args] { return run_weights_list(*args); }});
  CLI::App* get = cmd->add_subcommand(
      "get", "fetch ARCH's NAME (or an address) into the cache ahead of time, for a machine that trains offline");
  get->add_option("arch", args->arch, "model.arch, for example resnet50")->required();
  get->add_option("name", args->name, "IMAGENET1K_V1, IMAGENET1K_V2, DEFAULT, or an http(s) address")->required();
  get->add_option("--sha256", args->sha256,
                  "the file's whole SHA-256 (model.weights_sha256), checked on the download or the cached file");
  commands.push_back({get, [args] { return run_weights_get(*args); }});
}

}  // namespace trainer
