// Small raster charts drawn with OpenCV, for curves.png and confusion.png: line/marker panels with axes,
// "nice" ticks, labels and a legend, and a labelled heat map. No plotting library is needed at run time.
//   Panel p{"training loss", "step", "loss"};  p.series.push_back({"train", xs, ys, kBlue});
//   write_png(run_dir / "curves.png", draw_panels({p, q}, 2, "run resnet18"));
#pragma once

#include <opencv2/core.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

// Colours (BGR), distinguishable for the common colour-vision deficiencies (Okabe-Ito).
const cv::Scalar kBlue{178, 114, 0}, kOrange{0, 159, 230}, kGreen{115, 158, 0}, kVermillion{0, 94, 213},
    kPurple{167, 121, 204}, kSky{233, 180, 86}, kGrey{120, 120, 120};

struct Series {
  std::string label;
  std::vector<double> x, y;  // NaN y values are gaps
  cv::Scalar color = kBlue;
  bool line = true;      // join the points
  bool markers = false;  // a dot at each point
};

struct Panel {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<std::pair<double, std::string>> x_marks;  // labelled vertical guide lines (e.g. epoch ends)
  bool integer_x = false;                               // ticks only at whole numbers (epochs)
  std::optional<double> x_min, x_max;                   // fixed x range (else the data's)
};

// Tick positions covering [lo, hi] at a 1/2/5 x 10^k spacing, about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);
// A tick label: short, without trailing zeros ("0.001", "2.5k" style is not used; "12000", "1e-05").
std::string tick_label(double value, double spacing);

// Panels in a grid of `columns`, each panel_w x panel_h pixels, under a title line.
cv::Mat draw_panels(const std::vector<Panel>& panels, int columns, const std::string& title, int panel_w = 800,
                    int panel_h = 480);

// A heat map of `counts` (rows x cols), each cell coloured by its share of its row's total (`row_totals`, or the
// sum of the row shown when empty: a sub-matrix keeps the shares of the whole one) and labelled with its count
// when it is large enough; rows and columns named by `names`.
cv::Mat draw_heat_map(const std::vector<std::vector<int64_t>>& counts, const std::vector<std::string>& names,
                      const std::string& title, const std::string& row_label, const std::string& col_label,
                      const std::vector<int64_t>& row_totals = {});

// Writes PNG atomically (a reader never sees half a file). Throws Error naming the file.
void write_png(const std::filesystem::path& path, const cv::Mat& image);

}  // namespace trainer
