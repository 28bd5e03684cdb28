#include "trainer/io/metrics_sink.hpp"

#include <nlohmann/json.hpp>

#include <sstream>
#include <vector>

#include "trainer/config/json_text.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"
#include "trainer/util/write_error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

std::string header() {
  std::string h = "kind,epoch,step";
  for (const auto& c : metrics_columns()) h += std::string(",") + c.name;
  return h;
}

// Keeps the lines whose "step" is <= resume_step; the CSV keeps its header plus the same rows. Both files are
// replaced atomically: a full disk or a crash here leaves the run's whole history, never a cut one.
void truncate_after(const fs::path& jsonl, const fs::path& csv, int64_t resume_step) {
  std::ifstream jin(jsonl), cin(csv);
  if (!jin) throw WriteError("cannot read " + jsonl.string() + " to continue it");
  std::string kept_json, kept_csv = header() + '\n', jline, cline;
  std::getline(cin, cline);  // header
  while (std::getline(jin, jline)) {
    const bool has_csv = static_cast<bool>(std::getline(cin, cline));
    const auto j = parse_json(jline, nullptr, /*allow_exceptions=*/false);
    const auto step = j.is_object() ? j.find("step") : j.end();
    if (step == j.end() || !step->is_number_integer() || step->get<int64_t>() > resume_step) break;
    kept_json += jline + '\n';
    if (has_csv) kept_csv += cline + '\n';
  }
  write_text_atomically(jsonl, kept_json);
  write_text_atomically(csv, kept_csv);
}

}  // namespace

const std::vector<MetricsColumn>& metrics_columns() {
  static const std::vector<MetricsColumn> columns{{"lr", &MetricsRow::lr},
                                                  {"loss", &MetricsRow::loss},
                                                  {"top1", &MetricsRow::top1},
                                                  {"top5", &MetricsRow::top5},
                                                  {"images_per_s", &MetricsRow::images_per_s},
                                                  {"data_wait_s", &MetricsRow::data_wait_s},
                                                  {"compute_s", &MetricsRow::compute_s},
                                                  {"grad_norm", &MetricsRow::grad_norm},
                                                  {"loss_scale", &MetricsRow::loss_scale},
                                                  {"skipped_steps", &MetricsRow::skipped_steps},
                                                  {"decoded_gpu", &MetricsRow::decoded_gpu},
                                                  {"decoded_cpu", &MetricsRow::decoded_cpu},
                                                  {"decode_refused", &MetricsRow::decode_refused},
                                                  {"decode_failed", &MetricsRow::decode_failed},
                                                  {"decode_failed_calls", &MetricsRow::decode_failed_calls},
                                                  {"decode_blank", &MetricsRow::decode_blank}};
  return columns;
}

Scalars tensorboard_scalars(const MetricsRow& r) {
  Scalars out;
  for (const auto& c : metrics_columns()) out.emplace_back(r.kind + "/" + c.name, r.*c.value);
  // The share of the interval spent waiting for data: the number to watch for an input-bound run.
  const double busy = r.data_wait_s + r.compute_s;
  out.emplace_back(r.kind + "/data_wait_share", busy > 0 ? r.data_wait_s / busy : MetricsRow::none);
  return out;
}

MetricsSink::MetricsSink(const fs::path& run_dir, std::optional<int64_t> resume_step, bool tensorboard) {
  const fs::path csv = run_dir / "metrics.csv", jsonl = run_dir / "metrics.jsonl";
  if (resume_step && fs::exists(jsonl)) truncate_after(jsonl, csv, *resume_step);
  const bool fresh = !resume_step || !fs::exists(csv);
  csv_path_ = csv;
  jsonl_path_ = jsonl;
  csv_.open(csv, fresh ? std::ios::trunc : std::ios::app);
  check_written(csv_, csv);
  jsonl_.open(jsonl, fresh ? std::ios::trunc : std::ios::app);
  check_written(jsonl_, jsonl);
  if (fresh) csv_ << header() << '\n' << std::flush;
  check_written(csv_, csv);
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir / "tb", resume_step);
}

void MetricsSink::write(const MetricsRow& r) {
  nlohmann::json j = {{"kind", r.kind}, {"epoch", r.epoch}, {"step", r.step}};
  std::ostringstream line;
  line << r.kind << ',' << r.epoch << ',' << r.step;
  for (const auto& c : metrics_columns()) {
    line << ',';
    const double value = r.*c.value;
    if (std::isnan(value)) continue;
    line << format_number(value);
    j[c.name] = value;
  }
  csv_ << line.str() << '\n' << std::flush;
  check_written(csv_, csv_path_);
  jsonl_ << j.dump() << '\n' << std::flush;
  check_written(jsonl_, jsonl_path_);
  if (tensorboard_) tensorboard_->write_scalars(r.step, tensorboard_scalars(r));
}

}  // namespace trainer
