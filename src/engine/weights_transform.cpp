#include "trainer/engine/weights_transform.hpp"

#include "trainer/models/factory.hpp"

namespace trainer {

namespace {

using json = nlohmann::json;

// config[section][key] when both are there, else null (a wrong type is parse_config's to report).
const json* find(const json& config, const char* section, const char* key) {
  const auto s = config.find(section);
  if (s == config.end() || !s->is_object()) return nullptr;
  const auto k = s->find(key);
  return k == s->end() ? nullptr : &*k;
}

}  // namespace

void apply_weights_transform(json& config) {
  const json* arch = find(config, "model", "arch");
  const json* weights = find(config, "model", "weights");
  if (!arch || !weights || !arch->is_string() || !weights->is_string()) return;
  const ModelRow* row = nullptr;
  for (const auto& r : model_rows())
    if (r.name == arch->get<std::string>()) row = &r;
  if (!row) return;  // an unknown arch is parse_config's error
  const PublishedWeights* w = find_published_weights(row->weights, weights->get<std::string>());
  if (!w) return;  // a file or an address: no transform of its own

  if (!config.contains("data")) config["data"] = json::object();
  json& data = config["data"];
  if (!data.is_object()) return;  // parse_config names the mistake
  const json* channels = find(config, "model", "in_channels");
  const bool rgb = channels ? *channels == json(3) : ModelConfig{}.in_channels == 3;
  if (rgb && !data.contains("mean")) data["mean"] = w->mean;  // else the weights do not fit: start_weights says so
  if (rgb && !data.contains("std")) data["std"] = w->std;
  if (!data.contains("augment")) data["augment"] = json::object();
  json& augment = data["augment"];
  if (!augment.is_object()) return;  // likewise
  if (!augment.contains("interpolation")) augment["interpolation"] = enum_name(interpolations(), w->interpolation);
  const json size = augment.value("image_size", json(AugmentConfig{}.image_size));
  if (!augment.contains("eval_resize") && !augment.contains("eval_crop") && size == json(w->eval_crop))
    augment["eval_resize"] = w->eval_resize;
}

}  // namespace trainer
