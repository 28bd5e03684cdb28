#include "trainer/io/metrics_sink.hpp"

#include <nlohmann/json.hpp>

#include <sstream>
#include <vector>

#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

const char* const kColumns[] = {"kind",        "epoch",     "step",      "lr",         "loss",
                                "top1",        "top5",      "images_per_s", "data_wait_s", "compute_s",
                                "grad_norm",   "loss_scale", "skipped_steps"};

std::vector<double> numbers(const MetricsRow& r) {
  return {r.lr, r.loss, r.top1, r.top5, r.images_per_s, r.data_wait_s, r.compute_s, r.grad_norm, r.loss_scale,
          r.skipped_steps};
}

// Keeps the lines whose "step" is <= resume_step; the CSV keeps its header plus the same rows.
void truncate_after(const fs::path& jsonl, const fs::path& csv, int64_t resume_step) {
  std::vector<std::string> kept_json, kept_csv;
  std::ifstream jin(jsonl), cin(csv);
  std::string jline, cline;
  std::getline(cin, cline);  // header
  while (std::getline(jin, jline)) {
    const bool has_csv = static_cast<bool>(std::getline(cin, cline));
    const auto j = nlohmann::json::parse(jline, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("step") || j["step"].get<int64_t>() > resume_step) break;
    kept_json.push_back(jline);
    if (has_csv) kept_csv.push_back(cline);
  }
  std::ofstream jout(jsonl, std::ios::trunc), cout(csv, std::ios::trunc);
  for (const auto& l : kept_json) jout << l << '\n';
  cout << join(std::vector<std::string>(std::begin(kColumns), std::end(kColumns)), ",") << '\n';
  for (const auto& l : kept_csv) cout << l << '\n';
}

}  // namespace

Scalars tensorboard_scalars(const MetricsRow& r) {
  Scalars out;
  const auto values = numbers(r);
  for (size_t i = 0; i < values.size(); ++i) out.emplace_back(r.kind + "/" + kColumns[3 + i], values[i]);
  // The share of the interval spent waiting for data: the number to watch for an input-bound run.
  const double busy = r.data_wait_s + r.compute_s;
  out.emplace_back(r.kind + "/data_wait_share", busy > 0 ? r.data_wait_s / busy : MetricsRow::none);
  return out;
}

MetricsSink::MetricsSink(const fs::path& run_dir, std::optional<int64_t> resume_step, bool tensorboard) {
  const fs::path csv = run_dir / "metrics.csv", jsonl = run_dir / "metrics.jsonl";
  if (resume_step && fs::exists(jsonl)) truncate_after(jsonl, csv, *resume_step);
  const bool fresh = !resume_step || !fs::exists(csv);
  csv_.open(csv, fresh ? std::ios::trunc : std::ios::app);
  jsonl_.open(jsonl, fresh ? std::ios::trunc : std::ios::app);
  if (!csv_ || !jsonl_) throw Error("cannot write metrics files in " + run_dir.string(), 1);
  if (fresh) csv_ << join(std::vector<std::string>(std::begin(kColumns), std::end(kColumns)), ",") << '\n';
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir / "tb", resume_step);
}

void MetricsSink::write(const MetricsRow& r) {
  nlohmann::json j = {{"kind", r.kind}, {"epoch", r.epoch}, {"step", r.step}};
  std::ostringstream line;
  line << r.kind << ',' << r.epoch << ',' << r.step;
  const auto values = numbers(r);
  for (size_t i = 0; i < values.size(); ++i) {
    line << ',';
    if (std::isnan(values[i])) continue;
    line << format_number(values[i]);
    j[kColumns[3 + i]] = values[i];
  }
  csv_ << line.str() << '\n' << std::flush;
  jsonl_ << j.dump() << '\n' << std::flush;
  if (tensorboard_) tensorboard_->write_scalars(r.step, tensorboard_scalars(r));
}

}  // namespace trainer
