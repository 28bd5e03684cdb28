#include "trainer/plot/chart.hpp"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
const cv::Scalar kInk{40, 40, 40}, kGridline{228, 228, 228}, kWhite{255, 255, 255};

cv::Size text_size(const std::string& s, double scale, int thickness = 1) {
  int baseline = 0;
  return cv::getTextSize(s, kFont, scale, thickness, &baseline);
}

// Text with its left edge at x and its vertical middle at y.
void put_text(cv::Mat& img, const std::string& s, int x, int y, double scale, const cv::Scalar& color,
              int thickness = 1) {
  cv::putText(img, s, {x, y + text_size(s, scale, thickness).height / 2}, kFont, scale, color, thickness, cv::LINE_AA);
}

void put_text_centered(cv::Mat& img, const std::string& s, int cx, int y, double scale, const cv::Scalar& color,
                       int thickness = 1) {
  put_text(img, s, cx - text_size(s, scale, thickness).width / 2, y, scale, color, thickness);
}

// Text turned 90 degrees counter-clockwise (reading upwards), centred at (cx, cy).
void put_text_vertical(cv::Mat& img, const std::string& s, int cx, int cy, double scale, const cv::Scalar& color) {
  const cv::Size sz = text_size(s, scale);
  cv::Mat strip(sz.height + 8, sz.width + 4, CV_8UC3, kWhite);
  cv::putText(strip, s, {2, sz.height + 2}, kFont, scale, color, 1, cv::LINE_AA);
  cv::Mat turned;
  cv::rotate(strip, turned, cv::ROTATE_90_COUNTERCLOCKWISE);
  cv::Rect at(cx - turned.cols / 2, cy - turned.rows / 2, turned.cols, turned.rows);
  at &= cv::Rect(0, 0, img.cols, img.rows);
  turned(cv::Rect(0, 0, at.width, at.height)).copyTo(img(at));
}

bool finite(double v) { return std::isfinite(v); }

struct Range1 {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    if (!finite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

void draw_panel(cv::Mat& canvas, const cv::Rect& area, const Panel& panel) {
  const int left = 90, right = 24, top = 44, bottom = 64;
  const cv::Rect plot(area.x + left, area.y + top, area.width - left - right, area.height - top - bottom);
  put_text_centered(canvas, panel.title, area.x + area.width / 2, area.y + 20, 0.7, kInk, 2);
  put_text_centered(canvas, panel.x_label, plot.x + plot.width / 2, plot.y + plot.height + 48, 0.55, kInk);
  put_text_vertical(canvas, panel.y_label, area.x + 16, plot.y + plot.height / 2, 0.55, kInk);

  Range1 xr, yr;
  for (const auto& s : panel.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (finite(s.x[i]) && finite(s.y[i])) {
        xr.add(s.x[i]);
        yr.add(s.y[i]);
      }
  cv::rectangle(canvas, plot, kGrey, 1);
  if (xr.empty()) {
    put_text_centered(canvas, "no data yet", plot.x + plot.width / 2, plot.y + plot.height / 2, 0.6, kGrey);
    return;
  }
  if (panel.x_min) xr.lo = *panel.x_min;
  if (panel.x_max) xr.hi = *panel.x_max;
  if (xr.hi <= xr.lo) xr = {xr.lo - 1, xr.lo + 1};
  if (yr.hi == yr.lo) {
    const double pad = std::max(std::abs(yr.lo) * 0.1, 1e-3);
    yr = {yr.lo - pad, yr.hi + pad};
  }
  auto xt = nice_ticks(xr.lo, xr.hi, 6);
  if (panel.integer_x) {
    xt.erase(std::remove_if(xt.begin(), xt.end(), [](double v) { return std::abs(v - std::round(v)) > 1e-9; }),
             xt.end());
  }
  const auto yt = nice_ticks(yr.lo, yr.hi, 5);
  const double ystep = yt.size() > 1 ? yt[1] - yt[0] : yr.hi - yr.lo;
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1.0;
  // Axes start and end on a tick below and above the data, so the curves never touch the frame.
  const double y0 = std::floor(yr.lo / ystep) * ystep, y1 = std::ceil(yr.hi / ystep) * ystep;
  const double x0 = xr.lo, x1 = xr.hi;
  auto px = [&](double x) { return plot.x + static_cast<int>(std::lround((x - x0) / (x1 - x0) * (plot.width - 1))); };
  auto py = [&](double y) {
    return plot.y + plot.height - 1 - static_cast<int>(std::lround((y - y0) / (y1 - y0) * (plot.height - 1)));
  };

  for (double t = y0; t <= y1 + ystep * 1e-6; t += ystep) {
    const int y = py(t);
    if (y > plot.y && y < plot.y + plot.height - 1)
      cv::line(canvas, {plot.x + 1, y}, {plot.x + plot.width - 2, y}, kGridline);
    cv::line(canvas, {plot.x - 5, y}, {plot.x, y}, kInk);
    const std::string label = tick_label(t, ystep);
    put_text(canvas, label, plot.x - 9 - text_size(label, 0.45).width, y, 0.45, kInk);
  }
  for (double t : xt) {
    if (t < x0 - 1e-9 || t > x1 + 1e-9) continue;
    const int x = px(t);
    if (x > plot.x && x < plot.x + plot.width - 1)
      cv::line(canvas, {x, plot.y + 1}, {x, plot.y + plot.height - 2}, kGridline);
    cv::line(canvas, {x, plot.y + plot.height}, {x, plot.y + plot.height + 5}, kInk);
    put_text_centered(canvas, tick_label(t, xstep), x, plot.y + plot.height + 18, 0.45, kInk);
  }
  // Guide lines (epoch ends), labelled at the top; labels are thinned so they never overlap.
  int last_label_right = -1000;
  for (const auto& [x, label] : panel.x_marks) {
    if (!finite(x) || x < x0 || x > x1) continue;
    const int gx = px(x);
    for (int y = plot.y + 1; y < plot.y + plot.height - 1; y += 8)
      cv::line(canvas, {gx, y}, {gx, std::min(y + 3, plot.y + plot.height - 2)}, kGrey);
    const int w = text_size(label, 0.4).width;
    if (gx - w / 2 > last_label_right + 6) {
      put_text_centered(canvas, label, gx, plot.y - 9, 0.4, kGrey);
      last_label_right = gx + w / 2;
    }
  }
  cv::Mat clip = canvas(plot);
  for (const auto& s : panel.series) {
    cv::Point prev;
    bool have_prev = false;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!finite(s.x[i]) || !finite(s.y[i])) {
        have_prev = false;
        continue;
      }
      const cv::Point p(px(s.x[i]) - plot.x, py(s.y[i]) - plot.y);
      if (s.line && have_prev) cv::line(clip, prev, p, s.color, 2, cv::LINE_AA);
      if (s.markers) cv::circle(clip, p, 4, s.color, cv::FILLED, cv::LINE_AA);
      prev = p;
      have_prev = true;
    }
  }
  // Legend in the top-right corner, on white so the curves under it do not blur it.
  std::vector<const Series*> shown;
  int widest = 0;
  for (const auto& s : panel.series) {
    bool any = false;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) any = any || (finite(s.x[i]) && finite(s.y[i]));
    if (!any || s.label.empty()) continue;
    shown.push_back(&s);
    widest = std::max(widest, text_size(s.label, 0.45).width);
  }
  if (shown.empty()) return;
  const int row = 20, box_w = widest + 52, box_h = row * static_cast<int>(shown.size()) + 10;
  const cv::Rect box(plot.x + plot.width - box_w - 8, plot.y + 8, box_w, box_h);
  cv::rectangle(canvas, box, kWhite, cv::FILLED);
  cv::rectangle(canvas, box, kGridline, 1);
  for (size_t i = 0; i < shown.size(); ++i) {
    const int y = box.y + 15 + row * static_cast<int>(i);
    if (shown[i]->line) cv::line(canvas, {box.x + 8, y}, {box.x + 34, y}, shown[i]->color, 2, cv::LINE_AA);
    if (shown[i]->markers) cv::circle(canvas, {box.x + 21, y}, 4, shown[i]->color, cv::FILLED, cv::LINE_AA);
    put_text(canvas, shown[i]->label, box.x + 42, y, 0.45, kInk);
  }
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo) || target < 1) return {lo};
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string tick_label(double value, double spacing) {
  char buf[32];
  if (value != 0 && (std::abs(value) < 1e-3 || std::abs(value) >= 1e6)) {
    std::snprintf(buf, sizeof(buf), "%.2g", value);
    return buf;
  }
  // Enough decimals to tell neighbouring ticks apart.
  const int decimals = spacing >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(spacing) - 1e-9)));
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

cv::Mat draw_panels(const std::vector<Panel>& panels, int columns, const std::string& title, int panel_w, int panel_h) {
  const int rows = (static_cast<int>(panels.size()) + columns - 1) / columns;
  const int header = 44;
  cv::Mat canvas(header + rows * panel_h, columns * panel_w, CV_8UC3, kWhite);
  put_text_centered(canvas, title, canvas.cols / 2, 22, 0.75, kInk, 2);
  for (size_t i = 0; i < panels.size(); ++i) {
    const int r = static_cast<int>(i) / columns, c = static_cast<int>(i) % columns;
    draw_panel(canvas, {c * panel_w, header + r * panel_h, panel_w, panel_h}, panels[i]);
  }
  return canvas;
}

cv::Mat draw_heat_map(const std::vector<std::vector<int64_t>>& counts, const std::vector<std::string>& names,
                      const std::string& title, const std::string& row_label, const std::string& col_label,
                      const std::vector<int64_t>& row_totals) {
  const int n = static_cast<int>(counts.size());
  const int cell = std::clamp(760 / std::max(n, 1), 14, 64);
  auto shown_name = [](std::string s) { return s.size() > 24 ? s.substr(0, 23) + "~" : s; };
  int name_w = 0;
  for (const auto& s : names) name_w = std::max(name_w, text_size(shown_name(s), 0.45).width);
  const int left = name_w + 50, top = 60, bottom = name_w + 50, bar = 110;
  const int side = cell * n;
  cv::Mat img(top + side + bottom, left + side + bar, CV_8UC3, kWhite);
  put_text_centered(img, title, img.cols / 2, 24, 0.7, kInk, 2);
  // White (0) to dark blue (1): the share of the row's images in the cell.
  auto colour = [](double share) {
    const cv::Scalar hi{120, 48, 8};
    return cv::Scalar(255 + (hi[0] - 255) * share, 255 + (hi[1] - 255) * share, 255 + (hi[2] - 255) * share);
  };
  for (int r = 0; r < n; ++r) {
    int64_t row_total = 0;
    for (int64_t v : counts[r]) row_total += v;
    if (static_cast<size_t>(r) < row_totals.size()) row_total = row_totals[r];
    for (int c = 0; c < n; ++c) {
      const double share = row_total ? static_cast<double>(counts[r][c]) / static_cast<double>(row_total) : 0.0;
      const cv::Rect at(left + c * cell, top + r * cell, cell, cell);
      cv::rectangle(img, at, colour(share), cv::FILLED);
      if (cell >= 26 && counts[r][c] > 0) {
        const std::string label = std::to_string(counts[r][c]);
        const double scale = text_size(label, 0.45).width < cell - 4 ? 0.45 : 0.35;
        put_text_centered(img, label, at.x + cell / 2, at.y + cell / 2, scale, share > 0.5 ? kWhite : kInk);
      }
    }
  }
  cv::rectangle(img, cv::Rect(left, top, side, side), kGrey, 1);
  for (int i = 0; i < n; ++i) {
    const std::string s = shown_name(names[i]);
    put_text(img, s, left - 8 - text_size(s, 0.45).width, top + i * cell + cell / 2, 0.45, kInk);
    put_text_vertical(img, s, left + i * cell + cell / 2, top + side + 10 + text_size(s, 0.45).width / 2, 0.45, kInk);
  }
  put_text_vertical(img, row_label, 14, top + side / 2, 0.55, kInk);
  put_text_centered(img, col_label, left + side / 2, img.rows - 16, 0.55, kInk);
  // Colour bar: share of the true class.
  const int bx = left + side + 24, bh = std::max(side, 120);
  for (int y = 0; y < bh; ++y)
    cv::line(img, {bx, top + y}, {bx + 18, top + y}, colour(1.0 - static_cast<double>(y) / (bh - 1)));
  cv::rectangle(img, cv::Rect(bx, top, 19, bh), kGrey, 1);
  for (double v : {0.0, 0.5, 1.0})
    put_text(img, std::to_string(static_cast<int>(v * 100)) + "%", bx + 24, top + static_cast<int>((1 - v) * (bh - 1)),
             0.4, kInk);
  return img;
}

void write_png(const std::filesystem::path& path, const cv::Mat& image) {
  std::vector<uchar> bytes;
  if (!cv::imencode(".png", image, bytes)) throw Error("cannot encode " + path.string() + " as PNG", 1);
  write_file_atomically(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

}  // namespace trainer
