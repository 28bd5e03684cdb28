#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

#include "trainer/cli/commands.hpp"
#include "trainer/cli/options.hpp"
#include "trainer/data/device/decode_choice.hpp"
#include "trainer/data/sources/data_kinds.hpp"
#include "trainer/engine/backend_settings.hpp"
#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/engine/confusion.hpp"
#include "trainer/engine/evaluate.hpp"
#include "trainer/engine/session.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/models/layout_check.hpp"
#include "trainer/plot/chart.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/device.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

constexpr size_t kPairsShown = 10;      // most confused pairs printed and kept in eval.json
constexpr size_t kClassesShown = 10;    // worst classes printed
constexpr size_t kHeatMapClasses = 20;  // confusion.png shows at most this many classes

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char ch : s) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

// One row per image: path, label, then the top-k classes and probabilities, best first.
class PredictionTable {
 public:
  PredictionTable(const ImageSource& data, int64_t k) : data_(data) {
    out_ << "path,label";
    for (int64_t i = 1; i <= k; ++i) out_ << ",class" << i << ",prob" << i;
    out_ << '\n';
  }
  void add(size_t first, const torch::Tensor& classes, const torch::Tensor& probs, const torch::Tensor& labels) {
    const auto& names = data_.class_names();
    const auto c = classes.accessor<int64_t, 2>();
    const auto p = probs.accessor<float, 2>();
    const auto y = labels.accessor<int64_t, 1>();
    char prob[32];
    for (int64_t i = 0; i < classes.size(0); ++i) {
      out_ << csv_field(data_.sample_name(first + static_cast<size_t>(i))) << ','
           << (y[i] == kDroppedLabel ? std::string("unreadable") : csv_field(names[static_cast<size_t>(y[i])]));
      for (int64_t j = 0; j < classes.size(1); ++j) {
        std::snprintf(prob, sizeof(prob), "%.6f", p[i][j]);
        out_ << ',' << (y[i] == kDroppedLabel ? "" : csv_field(names[static_cast<size_t>(c[i][j])])) << ','
             << (y[i] == kDroppedLabel ? "" : prob);
      }
      out_ << '\n';
    }
  }
  std::string text() const { return out_.str(); }

 private:
  const ImageSource& data_;
  std::ostringstream out_;
};

cv::Mat confusion_picture(const torch::Tensor& confusion, const std::vector<std::string>& names,
                          const std::string& what) {
  const auto shown = most_confused_classes(confusion, kHeatMapClasses);
  const auto m = confusion.contiguous();
  const auto a = m.accessor<int64_t, 2>();
  std::vector<std::vector<int64_t>> counts;
  std::vector<std::string> labels;
  std::vector<int64_t> totals;  // each class's images, also those predicted as a class not shown
  for (int64_t r : shown) {
    labels.push_back(names[static_cast<size_t>(r)]);
    counts.emplace_back();
    for (int64_t c : shown) counts.back().push_back(a[r][c]);
    totals.push_back(0);
    for (int64_t c = 0; c < confusion.size(1); ++c) totals.back() += a[r][c];
  }
  const std::string title = shown.size() < names.size()
                                ? "confusion, " + what + ": the " + std::to_string(shown.size()) +
                                      " most confused of " + std::to_string(names.size()) + " classes"
                                : "confusion, " + what;
  return draw_heat_map(counts, labels, title, "true class", "predicted class (colour: share of the true class)",
                       totals);
}

// The lowest per-class accuracies and the most confused pairs, on stdout.
void print_class_summary(const std::vector<std::string>& names, const std::vector<ClassScore>& scores,
                         const std::vector<ConfusedPair>& pairs) {
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a].accuracy() < scores[b].accuracy(); });
  const size_t worst = std::min(kClassesShown, order.size());
  std::printf("%s:\n", worst < order.size() ? ("lowest per-class accuracy (" + std::to_string(worst) + " of " +
                                               std::to_string(order.size()) + " classes)")
                                                  .c_str()
                                            : "per-class accuracy, lowest first");
  for (size_t i = 0; i < worst; ++i) {
    const auto& s = scores[order[i]];
    std::printf("  %-24s %.4f (%lld/%lld)\n", names[order[i]].c_str(), s.accuracy(), static_cast<long long>(s.correct),
                static_cast<long long>(s.images));
  }
  if (!pairs.empty()) std::printf("most confused (true -> predicted):\n");
  for (const auto& p : pairs)
    std::printf(
        "  %s -> %s: %lld (%.1f%% of %s)\n", names[p.truth].c_str(), names[p.predicted].c_str(),
        static_cast<long long>(p.count),
        100.0 * static_cast<double>(p.count) / static_cast<double>(std::max<int64_t>(1, scores[p.truth].images)),
        names[p.truth].c_str());
}

// eval.json: the figures, per-class scores, the most confused pairs and the whole confusion matrix.
nlohmann::json eval_report(const EvalArgs& args, int64_t epoch, const EvalResult& r,
                           const std::vector<std::string>& names, const std::vector<ClassScore>& scores,
                           const std::vector<ConfusedPair>& pairs) {
  nlohmann::json per_class = nlohmann::json::array();
  for (size_t i = 0; i < scores.size(); ++i)
    per_class.push_back({{"class", i},
                         {"name", names[i]},
                         {"images", scores[i].images},
                         {"correct", scores[i].correct},
                         {"accuracy", scores[i].accuracy()}});
  nlohmann::json confused = nlohmann::json::array();
  for (const auto& p : pairs)
    confused.push_back({{"true", p.truth},
                        {"predicted", p.predicted},
                        {"true_name", names[p.truth]},
                        {"predicted_name", names[p.predicted]},
                        {"count", p.count}});
  const auto m = r.confusion.contiguous();
  const std::vector<int64_t> flat(m.data_ptr<int64_t>(), m.data_ptr<int64_t>() + m.numel());
  nlohmann::json matrix = nlohmann::json::array();
  for (size_t row = 0; row < scores.size(); ++row)
    matrix.push_back(std::vector<int64_t>(flat.begin() + static_cast<std::ptrdiff_t>(row * scores.size()),
                                          flat.begin() + static_cast<std::ptrdiff_t>((row + 1) * scores.size())));
  return {{"checkpoint", args.checkpoint},
          {"epoch", epoch},
          {"split", args.split},
          {"weights", args.ema ? "ema" : "raw"},
          {"images", r.count},
          {"unreadable", r.dropped},
          {"loss", r.loss()},
          {"top1", r.top1()},
          {"top5", r.top5()},
          {"balanced_accuracy", balanced_accuracy(scores)},
          {"correct1", r.correct1},
          {"correct5", r.correct5},
          {"per_class", per_class},
          {"most_confused", confused},
          {"confusion", matrix}};
}

}  // namespace

int run_eval(const EvalArgs& args) {
  if (args.checkpoint.empty()) throw UsageError("eval needs --checkpoint FILE");
  if (args.split != "val" && args.split != "train")
    throw UsageError("--split: expected val or train, got " + args.split);
  const LoadedCheckpoint checkpoint(args.checkpoint);
  Config c = config_for_checkpoint(checkpoint, args.config, args.overrides, CheckpointUse::evaluate).config;
  apply_allow_pipe(c, args.allow_pipe);
  apply_threads(c.run);
  apply_backend_settings(c.run);
  const torch::Device device = select_device(c.run.device);
  const bool train_split = args.split == "train";
  const auto data = make_source(c, train_split ? Split::train_unaugmented : Split::eval);
  auto model = model_from_checkpoint(checkpoint, c.model, data->shape(), args.ema);
  const KernelLayout layout = place_in_checked_layout(*model, c.model, data->shape(), device, warn_on_stderr);

  auto logs = make_run_logs({});
  auto bad = std::make_shared<BadSamples>("eval", data->size(), c.data.max_bad_fraction, logs.main);
  EvalOptions options = eval_options(c, device, layout.channels_last, bad);
  options.confusion = true;
  options.decoder = open_run_decoder(c, device, logs.main).decoder;
  const int64_t k = std::min<int64_t>(5, static_cast<int64_t>(data->class_names().size()));
  std::unique_ptr<PredictionTable> predictions;
  if (!args.predictions.empty()) {
    predictions = std::make_unique<PredictionTable>(*data, k);
    options.on_batch = [&](size_t first, const torch::Tensor& classes, const torch::Tensor& probs,
                           const torch::Tensor& labels) { predictions->add(first, classes, probs, labels); };
  }
  const EvalResult r = evaluate(*model, data, options);
  if (r.dropped) logs.main->warn("{} unreadable image(s) left out; the figures cover the other {}", r.dropped, r.count);

  const std::string what = std::string(train_split ? "train split" : "val split") + (args.ema ? ", EMA weights" : "");
  const auto scores = per_class_scores(r.confusion);
  std::printf(
      "eval %s (epoch %lld, %s): %lld images, loss %.4f, top1 %.4f (%lld), top5 %.4f (%lld), balanced accuracy %.4f, "
      "%.1fs\n",
      args.checkpoint.c_str(), static_cast<long long>(checkpoint.meta().epoch), what.c_str(),
      static_cast<long long>(r.count), r.loss(), r.top1(), static_cast<long long>(r.correct1), r.top5(),
      static_cast<long long>(r.correct5), balanced_accuracy(scores), r.seconds);

  const auto& names = data->class_names();
  const auto pairs = most_confused_pairs(r.confusion, kPairsShown);
  print_class_summary(names, scores, pairs);

  // Reports land next to the checkpoint unless told otherwise; names say which split and weights.
  const fs::path dir = args.output_dir.empty() ? fs::path(args.checkpoint).parent_path() : fs::path(args.output_dir);
  if (!dir.empty()) fs::create_directories(dir);
  const std::string suffix = std::string(train_split ? "_train" : "") + (args.ema ? "_ema" : "");
  const nlohmann::json j = eval_report(args, checkpoint.meta().epoch, r, names, scores, pairs);
  const fs::path json_path = args.output.empty() ? dir / ("eval" + suffix + ".json") : fs::path(args.output);
  write_text_atomically(json_path, j.dump(2) + "\n");
  const fs::path png = dir / ("confusion" + suffix + ".png");
  write_png(png, confusion_picture(r.confusion, names, what));
  std::printf("wrote %s and %s\n", json_path.string().c_str(), png.string().c_str());
  if (predictions) {
    write_text_atomically(args.predictions, predictions->text());
    std::printf("wrote %s (%lld rows)\n", args.predictions.c_str(), static_cast<long long>(r.read));
  }
  return 0;
}

void add_eval_command(CLI::App& app, Commands& commands) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "evaluate a checkpoint: loss, top-1, top-5, per-class accuracy, confusion matrix and plot");
  add_checkpoint_option(*cmd, args->checkpoint);
  add_config_options(*cmd, args->config, args->overrides,
                     "evaluate with this config's data settings (model must match)");
  cmd->add_option("--split", args->split, "val, or train (the training images with the eval transform)")
      ->check(one_of({"val", "train"}))
      ->capture_default_str();
  cmd->add_flag("--ema", args->ema, "evaluate the checkpoint's EMA weights");
  add_output_dir_option(*cmd, args->output_dir, "folder for eval.json and confusion.png (default: the checkpoint's)");
  cmd->add_option("--output", args->output, "write the JSON report to this file instead");
  cmd->add_option("--predictions", args->predictions,
                  "CSV with one row per image: path, label, top-5 and probabilities");
  add_allow_pipe_flag(*cmd, args->allow_pipe);
  commands.push_back({cmd, [args] { return run_eval(*args); }});
}

}  // namespace trainer
