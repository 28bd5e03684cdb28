#include "trainer/engine/start_weights.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "trainer/io/weight_files.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/glob.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// Upper-case letters, digits and '_' only: meant as a weights name, never a file name.
bool looks_like_a_name(const std::string& spec) {
  return !spec.empty() && spec.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string::npos;
}

std::string names_of(const ModelRow& row) {
  std::vector<std::string> names;
  for (const auto& w : row.weights) names.push_back(w.name);
  if (!names.empty()) names.push_back("DEFAULT");
  return join(names);
}

}  // namespace

StartWeights locate_start_weights(const ModelConfig& model, const WeightsHub& hub) {
  if (!model.weights.empty() && !model.init_from.empty())
    throw ConfigError("model.weights and model.init_from are both set; keep one (model.weights also takes a file)");
  // model.init_from keeps its strict load (every key must fit); model.weights replaces another task's classifier.
  const bool legacy = model.weights.empty();
  const std::string& spec = legacy ? model.init_from : model.weights;
  const std::string key = legacy ? "model.init_from" : "model.weights";
  if (spec.empty()) return {};
  auto found = [&](fs::path file, const std::string& about) {
    return StartWeights{std::move(file), key + " " + spec + about, /*replace_head=*/!legacy};
  };
  const std::string sha256 = ascii_lower(model.weights_sha256);  // PowerShell's Get-FileHash prints upper case
  const ModelRow& row = model_row(model.arch);
  if (const PublishedWeights* w = find_published_weights(row.weights, spec)) {
    const std::string about =
        " (" + w->file + ", torchvision's ImageNet-1k weights, top-1 " + fmt::format("{:.3f}", w->top1) +
        "% with eval resize " + std::to_string(w->eval_resize) + ", crop " + std::to_string(w->eval_crop) + ", " +
        enum_name(interpolations(), w->interpolation) + (w->licence.empty() ? "" : "; " + w->licence) + ")";
    std::error_code ec;
    if (!hub.cache_dir.empty() && !fs::is_regular_file(hub.cache_dir / w->file, ec))
      for (const auto& earlier : w->earlier_files)  // the same file, downloaded under its first name
        if (fs::is_regular_file(hub.cache_dir / earlier, ec)) {
          check_pinned_sha256(hub.cache_dir / earlier, sha256, "delete it to download it again");
          if (hub.say)
            hub.say(earlier + ": in the cache (" + w->file + "'s earlier name), " + (hub.cache_dir / earlier).string());
          return found(hub.cache_dir / earlier, about);
        }
    return found(fetch_into_cache(hub, torchvision_weights_address() + w->file, w->file, sha256), about);
  }
  if (is_address(spec)) {
    WeightsHub direct = hub;
    direct.mirror.clear();  // the mirror stands in for torchvision's address, not for the user's own
    return found(fetch_into_cache(direct, spec, address_file_name(spec), sha256), "");
  }
  std::error_code ec;
  if (fs::is_regular_file(spec, ec)) {
    check_pinned_sha256(spec, sha256, "");
    return found(spec, sha256.empty() ? "" : " (SHA-256 checked)");
  }
  if (looks_like_a_name(spec))
    throw ConfigError(key + ": " + model.arch + " has no published weights named " + spec +
                      (row.weights.empty() ? " (torchvision publishes none for " + model.arch + ")"
                                           : " (torchvision's: " + names_of(row) + ")") +
                      ", and no file of that name exists");
  throw WeightsError(spec + ": no such file (" + key +
                     " takes a weights name such as IMAGENET1K_V2, an http(s) address or a .pth, .bin or .safetensors "
                     "file)");
}

WeightsReport load_start_weights(Classifier& model, const ModelConfig& config, const StartWeights& start,
                                 const std::function<void(const std::string&)>& say) {
  const NamedTensors tensors = model.adapted_weights(read_weights_file(start.file), say);
  std::map<std::string, const torch::Tensor*> theirs;
  for (const auto& [name, t] : tensors) theirs.emplace(name, &t);
  // The classifier of another task: its keys leave the load and keep their fresh values (in model order).
  std::vector<std::string> exclude = config.init_exclude;
  std::vector<std::string> replaced;
  int64_t their_classes = 0;
  const std::vector<std::string> none;
  const auto& head = start.replace_head ? model_row(config.arch).head : none;
  for (const auto& [name, mine] : model_state(model)) {
    const auto it = theirs.find(name);
    if (!glob_match_any(head, name) || it == theirs.end() || it->second->sizes() == mine.sizes()) continue;
    replaced.push_back(name);
    exclude.push_back(name);
    if (it->second->dim() >= 1) their_classes = it->second->size(0);
  }
  if (!replaced.empty() && say)
    say("the weights' classifier has " + std::to_string(their_classes) + " classes, this run " +
        std::to_string(config.num_classes) + ": " + join(replaced) + " replaced, freshly initialised");
  WeightsReport report = load_weights(model, tensors, exclude, start.file.string());
  // The replaced keys are not the user's patterns: only init_exclude's count as unused.
  std::vector<std::string> unused;
  for (const auto& p : report.unused_patterns)
    if (std::find(replaced.begin(), replaced.end(), p) == replaced.end()) unused.push_back(p);
  report.unused_patterns = unused;
  return report;
}

}  // namespace trainer
