#include "trainer/cli/checkpoint_config.hpp"

#include "trainer/config/load.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

using nlohmann::json;

namespace {

void collect_changes(const json& before, const json& after, const std::string& prefix, std::vector<std::string>& out) {
  if (before.is_object() && after.is_object()) {
    for (const auto& item : after.items())
      collect_changes(before.contains(item.key()) ? before[item.key()] : json(), item.value(),
                      prefix + (prefix.empty() ? "" : ".") + item.key(), out);
    return;
  }
  if (before != after) out.push_back(prefix + ": " + before.dump() + " -> " + after.dump());
}

}  // namespace

CheckpointConfig config_for_checkpoint(const LoadedCheckpoint& checkpoint, const std::string& config_file,
                                       const std::vector<std::string>& overrides) {
  const json& saved = checkpoint.meta().config;
  json j = config_file.empty() ? saved : load_json_file(config_file);
  for (const auto& o : overrides) apply_override(j, o);
  CheckpointConfig result{parse_config(j), {}};
  if (result.config.run.name.empty()) result.config.run.name = saved.value("run", json::object()).value("name", "");
  collect_changes(saved, config_to_json(result.config), "", result.changes);
  // Changes that make the saved state meaningless are refused: the model (its weights would not fit),
  // the optimizer kind (its state would not fit) and the data kind (the classes would not mean the same).
  // init_from only seeds a new run's weights; on resume the checkpoint's weights win, so it may change.
  auto refused = [](const std::string& change) {
    if (change.rfind("model.", 0) == 0) return change.rfind("model.init_", 0) != 0;
    return change.rfind("optim.name:", 0) == 0 || change.rfind("data.kind:", 0) == 0;
  };
  for (const auto& change : result.changes)
    if (refused(change))
      throw CheckpointError(checkpoint.path().string() + " cannot continue with " + change +
                            " (the model, optim.name and data.kind cannot change on resume; start a new run instead)");
  return result;
}

}  // namespace trainer
