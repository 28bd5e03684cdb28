#include "trainer/engine/checkpoint_config.hpp"

#include <algorithm>

#include "trainer/config/load.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

using nlohmann::json;

namespace {

void collect_changes(const json& before, const json& after, const std::string& prefix, std::vector<ConfigChange>& out) {
  if (before.is_object() && after.is_object()) {
    for (const auto& item : after.items())
      collect_changes(before.contains(item.key()) ? before[item.key()] : json(), item.value(),
                      prefix + (prefix.empty() ? "" : ".") + item.key(), out);
    return;
  }
  if (before != after) out.push_back({prefix, before.dump(), after.dump()});
}

// Keys whose change makes the saved state meaningless: the model (its weights would not fit), the optimizer kind
// (its state would not fit) and the data kind (the classes would not mean the same); an evaluation reads only the
// weights, so there only the model counts. A section name covers every key in it. model.weights (and its sha256) /
// init_from / init_exclude / head_init_scale only seed a new run's weights (on resume the checkpoint's weights win),
// and model.freeze only says which of them train (the optimizer holds every parameter either way), so those may
// change.
bool refused(const std::string& key, CheckpointUse use) {
  static const std::vector<std::string> on_resume{"model", "optim.name", "data.kind"}, on_evaluate{"model"};
  const auto& keys = use == CheckpointUse::continue_training ? on_resume : on_evaluate;
  static const std::vector<std::string> allowed{"model.weights",      "model.weights_sha256",  "model.init_from",
                                                "model.init_exclude", "model.head_init_scale", "model.freeze"};
  auto covers = [&](const std::string& entry) { return key == entry || key.rfind(entry + ".", 0) == 0; };
  return std::any_of(keys.begin(), keys.end(), covers) && std::none_of(allowed.begin(), allowed.end(), covers);
}

// data.kind from one image-file kind to another (an image folder and its shards): the same photos in another
// container, which restore_from_checkpoint checks by their classes and count once the data is open.
bool same_photos_elsewhere(const ConfigChange& change) {
  if (change.key != "data.kind") return false;
  auto row = [](const std::string& dumped) -> const DataKindRow* {
    const json value = json::parse(dumped, nullptr, /*allow_exceptions=*/false);
    if (!value.is_string()) return nullptr;
    for (const auto& [name, kind] : data_kinds())
      if (name == value.get<std::string>()) return &data_kind_row(kind);
    return nullptr;
  };
  const DataKindRow *before = row(change.before), *after = row(change.after);
  return before && after && before->image_files && after->image_files;
}

}  // namespace

CheckpointConfig config_for_checkpoint(const LoadedCheckpoint& checkpoint, const std::string& config_file,
                                       const std::vector<std::string>& overrides, CheckpointUse use) {
  const json& saved = checkpoint.meta().config;
  json j = config_file.empty() ? saved : load_json_file(config_file);
  for (const auto& o : overrides) apply_override(j, o);
  CheckpointConfig result{resolve_config(j), {}};
  if (result.config.run.name.empty()) result.config.run.name = saved.value("run", json::object()).value("name", "");
  // A config that leaves model.num_classes to the data means the count the run resolved and saved.
  if (result.config.model.num_classes == 0)
    result.config.model.num_classes = saved.value("model", json::object()).value("num_classes", int64_t{0});
  // What came from the saved config without resolve_config's checks, checked as it would check them.
  check_run_name(result.config.run.name);
  if (result.config.model.num_classes < 0 || result.config.model.num_classes > kMostClasses)
    throw ConfigError(checkpoint.path().string() + ": its config's model.num_classes (" +
                      std::to_string(result.config.model.num_classes) + ") is not from 0 to 1000000");
  // Likewise a config that holds out the same share of the same folder with the same seed, but names no files,
  // means the validation images the run recorded (photos added since then must not change the split).
  const json saved_data = saved.value("data", json::object());
  DataConfig& data = result.config.data;
  if (data.val_files.empty() && data.val_fraction > 0 && data.val_fraction == saved_data.value("val_fraction", 0.0) &&
      data.split_seed == saved_data.value("split_seed", int64_t{0}) && data.root == saved_data.value("root", ""))
    data.val_files = saved_data.value("val_files", std::vector<std::string>{});
  collect_changes(saved, config_to_json(result.config), "", result.changes);
  for (const auto& change : result.changes)
    if (refused(change.key, use) && !(use == CheckpointUse::continue_training && same_photos_elsewhere(change)))
      throw CheckpointError(
          checkpoint.path().string() +
          (use == CheckpointUse::continue_training
               ? " cannot continue with " + change.describe() +
                     " (the model, optim.name and data.kind cannot change on resume, except an image folder for its "
                     "shards and back; start a new run instead)"
               : " cannot be evaluated with " + change.describe() + " (its weights fit only its own model)"));
  return result;
}

ClassifierPtr model_from_checkpoint(const LoadedCheckpoint& checkpoint, const ModelConfig& model,
                                    const ImageShape& input, bool ema) {
  auto built = build_model(model, input);
  if (!ema) {
    checkpoint.restore_model(*built);
  } else if (!checkpoint.restore_ema(*built)) {
    throw CheckpointError(checkpoint.path().string() + ": holds no EMA weights (the run had train.ema.enabled false)");
  }
  return built;
}

}  // namespace trainer
