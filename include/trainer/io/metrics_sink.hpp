// metrics.csv and metrics.jsonl in the run folder: one row per log interval ("train"), per epoch ("epoch":
// the whole epoch's training loss, top-1 and speed) and per evaluation ("eval", "eval_ema"); and, with
// TensorBoard on, the same numbers as scalars tagged "<kind>/<column>" (plus "<kind>/data_wait_share") at the
// row's step under RUN_DIR/tb. On resume, rows written after the checkpoint's step are dropped from all of
// them, so the files read as one run.
//   MetricsSink sink(run_dir, /*resume_step=*/std::nullopt, /*tensorboard=*/true);  sink.write(row);
#pragma once

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/io/tensorboard.hpp"

namespace trainer {

// Built by name, never positionally, so that a new column cannot shift the others:
//   MetricsRow row("eval", epoch, step);  row.loss = 0.3;  row.top1 = 0.9;
struct MetricsRow {
  static constexpr double none = std::numeric_limits<double>::quiet_NaN();  // written as empty / null
  MetricsRow(std::string kind, int64_t epoch, int64_t step) : kind(std::move(kind)), epoch(epoch), step(step) {}

  std::string kind;  // "train", "epoch", "eval" or "eval_ema"
  int64_t epoch = 0;
  int64_t step = 0;
  double lr = none;
  double loss = none;
  double top1 = none;
  double top5 = none;
  double images_per_s = none;
  double data_wait_s = none;
  double compute_s = none;
  double grad_norm = none;      // train rows with clipping: the largest total norm of the interval
  double loss_scale = none;     // train rows with float16: the loss scale at the end of the interval
  double skipped_steps = none;  // train rows with float16: optimizer steps skipped for inf/NaN gradients
  // Epoch and eval rows of a run that decodes on the GPU (data.decode cuda): the loop's images by decoder.
  double decoded_gpu = none;     // by nvJPEG
  double decoded_cpu = none;     // by the CPU in the decode stage, after a batched call nvJPEG failed on
  double decode_refused = none;  // refused by nvJPEG's support check, decoded by a loader worker
  double decode_failed = none;   // by neither: bad samples
  double decode_failed_calls = none;  // batched calls nvJPEG failed on (their images: decoded_cpu or split again)
  double decode_blank = none;         // reported decoded by nvJPEG but left unwritten: decoded by the CPU
};

// The numeric columns, in file order, each with the member that holds it: the writer, the TensorBoard tags
// and the reader (plot/curves.hpp) all go through this one table.
struct MetricsColumn {
  const char* name;
  double MetricsRow::*value;
};
const std::vector<MetricsColumn>& metrics_columns();

class MetricsSink {
 public:
  // resume_step: keep existing rows up to this step; nullopt starts new files.
  MetricsSink(const std::filesystem::path& run_dir, std::optional<int64_t> resume_step, bool tensorboard);
  void write(const MetricsRow& row);

 private:
  std::filesystem::path csv_path_, jsonl_path_;
  std::ofstream csv_;
  std::ofstream jsonl_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

// The TensorBoard scalars of one row (NaN for the columns the row leaves empty).
Scalars tensorboard_scalars(const MetricsRow& row);

}  // namespace trainer
