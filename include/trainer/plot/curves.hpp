// curves.png of a run: training loss, learning rate and throughput against steps (epoch ends marked), and
// eval top-1/top-5 (raw and EMA weights) and train top-1 against epochs. Drawn from RUN_DIR/metrics.jsonl by
// `trainer plot RUN_DIR` and, with run.plot, after every epoch.
//   fs::path png = plot_run(run_dir);
#pragma once

#include <opencv2/core.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "trainer/io/metrics_sink.hpp"

namespace trainer {

// The rows of a metrics.jsonl file. Throws Error naming the file when it is missing or a line is not a row.
std::vector<MetricsRow> read_metrics_jsonl(const std::filesystem::path& file);

cv::Mat draw_curves(const std::vector<MetricsRow>& rows, const std::string& title);

// Writes run_dir/curves.png and returns its path. Throws Error when run_dir has no metrics.jsonl.
std::filesystem::path plot_run(const std::filesystem::path& run_dir);

}  // namespace trainer
