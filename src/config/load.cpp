#include "trainer/config/load.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "trainer/config/json_fields.hpp"
#include "trainer/config/json_text.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/sha256.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

using nlohmann::json;
namespace fs = std::filesystem;

void check_run_name(const std::string& name) {
  // The run folder is output_dir/name: a name that is a path would put it (and its checkpoints) elsewhere.
  if (name == "." || name == ".." || name.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
    throw ConfigError("run.name: expected a folder name (no /, \\ or ..), got \"" + first_line(name) + "\"");
}

namespace {

void merge_into(json& base, const json& overlay) {
  for (const auto& item : overlay.items()) {
    if (item.value().is_object() && base.contains(item.key()) && base[item.key()].is_object())
      merge_into(base[item.key()], item.value());
    else base[item.key()] = item.value();
  }
}

json load_with_parents(const fs::path& file, std::vector<fs::path>& chain) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(file, ec);
  for (const auto& seen : chain)
    if (seen == canonical) throw ConfigError(file.string() + ": \"extends\" forms a cycle");
  chain.push_back(canonical);

  // A regular file only: "extends": "/dev/zero" would be read for ever.
  if (fs::exists(file, ec) && !fs::is_regular_file(file, ec))
    throw ConfigError(file.string() + ": cannot open the config file (not a regular file)");
  std::ifstream in(file);
  if (!in) throw ConfigError(file.string() + ": cannot open the config file");
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = parse_json(text.str());
  } catch (const json::exception& e) {  // a syntax error, or a number out of range (1e999)
    // nlohmann's message carries the line and column.
    std::string what = e.what();
    const auto pos = what.find("parse error");
    throw ConfigError(file.string() + ": invalid JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
  }
  if (!j.is_object()) throw ConfigError(file.string() + ": expected a JSON object at the top level");
  j.erase("$schema");  // an editor's pointer to configs/schema.json, not a setting

  const auto it = j.find("extends");
  if (it == j.end()) return j;
  if (!it->is_string()) throw ConfigError(file.string() + ": extends: expected a file name, got " + it->dump());
  const fs::path parent = file.parent_path() / it->get<std::string>();
  j.erase("extends");
  json merged = load_with_parents(parent, chain);
  merge_into(merged, j);
  return merged;
}

// Defaults that depend on other fields, filled in so the resolved config shows the values used.
void resolve(Config& c) {
  AugmentConfig& a = c.data.augment;
  if (a.eval_crop == 0) a.eval_crop = a.image_size;
  if (a.eval_resize == 0) a.eval_resize = static_cast<int64_t>(std::lround(static_cast<double>(a.eval_crop) / 0.875));
}

void check_interval(const std::string& key, const std::vector<double>& v, double lo, double hi) {
  if (v.size() != 2 || !(v[0] > lo) || !(v[0] <= v[1]) || !(v[1] <= hi))
    throw ConfigError(key + ": expected [min, max] with " + format_number(lo) + " < min <= max" +
                      (std::isfinite(hi) ? " <= " + format_number(hi) : "") + ", got " + nlohmann::json(v).dump());
}

void check_pixel_augments(const AugmentConfig& a, int64_t channels) {
  const AutoAugmentConfig& p = a.auto_augment;
  if (p.magnitude >= p.num_magnitude_bins)
    throw ConfigError("data.augment.auto_augment.magnitude: expected a bin 0 .. num_magnitude_bins - 1 (" +
                      std::to_string(p.num_magnitude_bins - 1) + "), got " + std::to_string(p.magnitude));
  if (p.chain_depth == 0)
    throw ConfigError("data.augment.auto_augment.chain_depth: expected -1 (1 to 3 at random) or >= 1, got 0");
  if (p.fill.size() != 1 && static_cast<int64_t>(p.fill.size()) != channels)
    throw ConfigError("data.augment.auto_augment.fill: expected 1 or model.in_channels (" + std::to_string(channels) +
                      ") values, got " + std::to_string(p.fill.size()));
  for (double f : p.fill)
    if (!(f >= 0 && f <= 255))
      throw ConfigError("data.augment.auto_augment.fill: expected values in 0 .. 255, got " + format_number(f));
  check_interval("data.augment.random_erasing.scale", a.random_erasing.scale, 0.0, 1.0);
  check_interval("data.augment.random_erasing.ratio", a.random_erasing.ratio, 0.0, HUGE_VAL);
}

void validate(const Config& c) {
  check_run_name(c.run.name);
  if (c.model.num_classes == 1)
    throw ConfigError("model.num_classes: expected 0 (the training set's count) or at least 2, got 1");
  if (!c.data.class_names.empty() && c.model.num_classes > 0 &&
      static_cast<int64_t>(c.data.class_names.size()) != c.model.num_classes)
    throw ConfigError("data.class_names: expected model.num_classes (" + std::to_string(c.model.num_classes) +
                      ") names, got " + std::to_string(c.data.class_names.size()));
  const std::string& sha = c.model.weights_sha256;
  if (!sha.empty() && !is_sha256_hex(sha))
    throw ConfigError("model.weights_sha256: expected 64 hex digits (a SHA-256, as sha256sum prints it), got \"" +
                      first_line(sha).substr(0, 80) + "\"");
  if (!sha.empty() && c.model.weights.empty() && c.model.init_from.empty())
    throw ConfigError("model.weights_sha256: set, but neither model.weights nor model.init_from names a file");
  const AugmentConfig& a = c.data.augment;
  check_interval("data.augment.scale", a.scale, 0.0, 1.0);
  check_interval("data.augment.ratio", a.ratio, 0.0, HUGE_VAL);
  if (a.eval_crop < 8)
    throw ConfigError("data.augment.eval_crop: expected 0 (image_size) or a size >= 8, got " +
                      std::to_string(a.eval_crop));
  if (a.eval_resize < a.eval_crop)
    throw ConfigError("data.augment.eval_resize: expected 0 or a size >= data.augment.eval_crop (" +
                      std::to_string(a.eval_crop) + "), got " + std::to_string(a.eval_resize));
  check_pixel_augments(a, c.model.in_channels);
  for (size_t i = 0; i < c.schedule.milestones.size(); ++i)
    if (c.schedule.milestones[i] < 0 || (i > 0 && c.schedule.milestones[i] <= c.schedule.milestones[i - 1]))
      throw ConfigError("schedule.milestones: expected increasing epochs >= 0, got " +
                        nlohmann::json(c.schedule.milestones).dump());
  if (c.train.best_metric == BestMetric::ema_top1 && !c.train.ema.enabled)
    throw ConfigError("train.best_metric: \"ema_top1\" needs train.ema.enabled");
  if (c.train.early_stopping.metric == WatchedMetric::ema_top1 && !c.train.ema.enabled)
    throw ConfigError("train.early_stopping.metric: \"ema_top1\" needs train.ema.enabled");
  const auto& betas = c.optim.betas;
  if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1) || !(betas[1] >= 0 && betas[1] < 1))
    throw ConfigError("optim.betas: expected [beta1, beta2] in [0, 1), got " + nlohmann::json(betas).dump());
}

}  // namespace

json load_json_file(const fs::path& file) {
  std::vector<fs::path> chain;
  return load_with_parents(file, chain);
}

void apply_override(json& config, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError("--set expects KEY=VALUE (for example optim.lr=0.1), got \"" + assignment + "\"");
  if (!is_utf8(assignment))
    throw UsageError("--set " + first_line(assignment) + ": not UTF-8 text (a config holds JSON, which is UTF-8)");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  json value;
  try {
    value = parse_json(text);
  } catch (const json::exception&) {  // not JSON, or a number out of range (1e999)
    value = text;                     // a bare word such as cosine or runs/x
  }
  json* node = &config;
  std::string path;
  size_t start = 0;
  while (true) {
    const auto dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw UsageError("--set " + assignment + ": empty key segment in \"" + key + "\"");
    path += (path.empty() ? "" : ".") + part;
    if (dot == std::string::npos) {
      (*node)[part] = value;
      return;
    }
    json& child = (*node)[part];
    if (child.is_null()) child = json::object();
    if (!child.is_object()) throw ConfigError(path + ": is not an object, cannot set " + key);
    node = &child;
    start = dot + 1;
  }
}

Config parse_config(const json& j) {
  Config c;
  read_json(j, c);
  resolve(c);
  validate(c);
  return c;
}

Config load_config(const fs::path& file, const std::vector<std::string>& overrides,
                   const std::function<void(json&)>& adjust) {
  json j = load_json_file(file);
  for (const auto& o : overrides) apply_override(j, o);
  if (adjust) adjust(j);
  Config c = parse_config(j);
  if (c.run.name.empty()) c.run.name = file.stem().string();
  return c;
}

json config_to_json(const Config& config) { return to_json_value(config); }

}  // namespace trainer
