#include "trainer/cli/doctor_checks.hpp"

#include <cmath>

#include "trainer/models/factory.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// The nearest folder that exists at or above `p` (where the run folder would be created).
fs::path existing_ancestor(fs::path p) {
  p = fs::absolute(p);
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  return p;
}

}  // namespace

void check_output(Report& report, DoctorContext& context) {
  const Config& c = *context.config;
  const fs::path& run_dir = context.run_dir;
  const std::optional<ImageShape>& shape = context.train_shape;
  const fs::path base = existing_ancestor(run_dir);
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    report.add(Verdict::failed, "output",
               run_dir.string() + ": cannot be created, " + base.string() + " is not a folder",
               "set run.output_dir or --output-dir to a folder");
    return;
  }
  // Write a checkpoint-sized file the way checkpoints are written (temporary file, fsync, rename).
  ClassifierPtr model;
  try {
    model = build_model(
        c.model, shape.value_or(ImageShape{c.data.augment.image_size, c.data.augment.image_size, c.model.in_channels}));
  } catch (const std::exception&) {
    model = nullptr;  // an unknown model is reported by the config check
  }
  double param_bytes = 0;
  if (model)
    for (const auto& t : model->parameters()) param_bytes += static_cast<double>(t.numel() * t.element_size());
  const fs::path probe = base / ".trainer-doctor-write-test";
  std::vector<char> bytes(static_cast<size_t>(std::max(param_bytes, 1024.0 * 1024.0)), 1);
  const auto start = Clock::now();
  try {
    write_file_atomically(probe, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
  } catch (const std::exception& e) {
    fs::remove(probe, ec);
    report.add(Verdict::failed, "output", base.string() + " is not writable: " + e.what(),
               "choose a writable run.output_dir or --output-dir");
    return;
  }
  const double seconds = seconds_since(start);
  fs::remove(probe, ec);
  // A checkpoint holds the weights, the optimizer's slots (SGD momentum: 1, AdamW: 2) and the EMA copy; the run
  // keeps last.pt, best.pt, keep_last step files and the epoch files, plus one temporary file while writing.
  const double slots = c.optim.name == OptimizerKind::adamw ? 2.0 : (c.optim.momentum > 0 ? 1.0 : 0.0);
  const double checkpoint = param_bytes * (1.0 + slots + (c.train.ema.enabled ? 1.0 : 0.0));
  const double files =
      3.0 + (c.train.checkpoint_every_steps > 0 ? static_cast<double>(c.train.keep_last) : 0.0) +
      (c.train.keep_every_epochs > 0 ? static_cast<double>(c.train.epochs / c.train.keep_every_epochs) : 0.0);
  const auto space = fs::space(base, ec);
  const double needed = checkpoint * files;
  const double rate = static_cast<double>(bytes.size()) / std::max(seconds, 1e-6);
  const std::string detail =
      run_dir.string() + ": writable; " + mib(static_cast<double>(bytes.size())) + " written in " +
      format_number(std::round(seconds * 1000) / 1000) + "s (" + mib(rate) + "/s); checkpoints about " +
      mib(checkpoint) + " each, up to " + mib(needed) + " kept; " +
      (ec ? std::string("free space unknown") : gib(static_cast<double>(space.available)) + " free");
  if (!ec && static_cast<double>(space.available) < needed)
    report.add(Verdict::failed, "output", detail,
               "free space or keep fewer checkpoints (train.keep_last, keep_every_epochs)");
  else if (seconds > 2.0 && rate < 50.0 * 1024 * 1024)
    report.add(Verdict::warning, "output", detail,
               "slow writes: network storage or an antivirus scanner? use a local disk");
  else report.add(Verdict::ok, "output", detail);
}

}  // namespace trainer
