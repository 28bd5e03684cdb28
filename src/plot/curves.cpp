#include "trainer/plot/curves.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "trainer/config/json_text.hpp"
#include "trainer/plot/chart.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : MetricsRow::none;
}

Series series_of(const std::vector<MetricsRow>& rows, const std::string& kind, double MetricsRow::*value, bool by_epoch,
                 std::string label, cv::Scalar colour, bool markers) {
  Series s{std::move(label), {}, {}, colour, true, markers};
  for (const auto& r : rows)
    if (r.kind == kind) {
      s.x.push_back(by_epoch ? static_cast<double>(r.epoch) : static_cast<double>(r.step));
      s.y.push_back(r.*value);
    }
  return s;
}

Panel panel(std::string title, std::string x_label, std::string y_label) {
  Panel p;
  p.x_min = 0;  // step axes start at the run's beginning and share one range
  p.title = std::move(title);
  p.x_label = std::move(x_label);
  p.y_label = std::move(y_label);
  return p;
}

}  // namespace

std::vector<MetricsRow> read_metrics_jsonl(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("cannot read " + file.string(), 1);
  std::vector<MetricsRow> rows;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const auto j = parse_json(line, nullptr, /*allow_exceptions=*/false);
    // Every field at the type the writer gives it: a file from another machine may say anything.
    const auto field = [&](const char* key) { return j.is_object() && j.contains(key) ? j[key] : nlohmann::json(); };
    if (!field("kind").is_string() || !field("step").is_number_integer() ||
        !(field("epoch").is_null() || field("epoch").is_number_integer()))
      throw Error(file.string() + ":" + std::to_string(n) + ": not a metrics row", 1);
    MetricsRow r(j["kind"].get<std::string>(), j.value("epoch", int64_t{0}), j["step"].get<int64_t>());
    for (const auto& c : metrics_columns()) r.*c.value = number(j, c.name);
    rows.push_back(std::move(r));
  }
  return rows;
}

cv::Mat draw_curves(const std::vector<MetricsRow>& rows, const std::string& title) {
  // Epoch ends, at the step where each epoch finished, mark the step axes.
  std::vector<std::pair<double, std::string>> epoch_marks;
  double last_step = 0;
  for (const auto& r : rows) {
    if (r.kind == "epoch") epoch_marks.emplace_back(static_cast<double>(r.step), "e" + std::to_string(r.epoch));
    last_step = std::max(last_step, static_cast<double>(r.step));
  }

  Panel loss = panel("training loss", "optimizer step", "loss");
  loss.series = {series_of(rows, "train", &MetricsRow::loss, false, "train (log interval)", kBlue, false),
                 series_of(rows, "epoch", &MetricsRow::loss, false, "train (epoch mean)", kOrange, true),
                 series_of(rows, "eval", &MetricsRow::loss, false, "eval", kVermillion, true),
                 series_of(rows, "eval_ema", &MetricsRow::loss, false, "eval (EMA)", kPurple, true)};
  loss.x_marks = epoch_marks;

  Panel accuracy = panel("accuracy", "epoch", "accuracy");
  accuracy.integer_x = true;
  accuracy.x_min.reset();
  accuracy.series = {series_of(rows, "eval", &MetricsRow::top1, true, "eval top-1", kVermillion, true),
                     series_of(rows, "eval", &MetricsRow::top5, true, "eval top-5", kOrange, true),
                     series_of(rows, "eval_ema", &MetricsRow::top1, true, "eval top-1 (EMA)", kPurple, true),
                     series_of(rows, "eval_ema", &MetricsRow::top5, true, "eval top-5 (EMA)", kSky, true),
                     series_of(rows, "epoch", &MetricsRow::top1, true, "train top-1", kBlue, true)};

  Panel lr = panel("learning rate", "optimizer step", "lr");
  lr.series = {series_of(rows, "train", &MetricsRow::lr, false, "", kGreen, false)};
  lr.x_marks = epoch_marks;

  Panel speed = panel("training throughput", "optimizer step", "images / s");
  speed.series = {series_of(rows, "train", &MetricsRow::images_per_s, false, "log interval", kBlue, false),
                  series_of(rows, "epoch", &MetricsRow::images_per_s, false, "epoch", kOrange, true)};
  speed.x_marks = epoch_marks;

  for (Panel* p : {&loss, &lr, &speed}) p->x_max = last_step;
  return draw_panels({loss, accuracy, lr, speed}, 2, title);
}

fs::path plot_run(const fs::path& run_dir) {
  const fs::path jsonl = run_dir / "metrics.jsonl";
  if (!fs::exists(jsonl)) throw Error(run_dir.string() + ": no metrics.jsonl (is this a run folder?)", 2);
  const auto rows = read_metrics_jsonl(jsonl);
  int64_t epochs = 0, steps = 0;
  for (const auto& r : rows) {
    epochs = std::max(epochs, r.epoch);
    steps = std::max(steps, r.step);
  }
  fs::path name = fs::absolute(run_dir).lexically_normal();
  if (name.filename().empty()) name = name.parent_path();  // "runs/x/"
  const std::string title =
      name.filename().string() + ": " + std::to_string(epochs) + " epoch(s), " + std::to_string(steps) + " step(s)";
  const fs::path png = run_dir / "curves.png";
  write_png(png, draw_curves(rows, title));
  return png;
}

}  // namespace trainer
