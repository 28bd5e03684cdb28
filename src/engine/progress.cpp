#include "trainer/engine/progress.hpp"

#include <cmath>
#include <cstdio>

namespace trainer {

void ProgressLine::show(const std::string& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (visible_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  std::fprintf(stdout, "\r\033[K%s", text.c_str());
  std::fflush(stdout);
  visible_ = true;
}

void ProgressLine::clear() {
  if (!visible_) return;
  std::fprintf(stdout, "\r\033[K");
  std::fflush(stdout);
  visible_ = false;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace trainer
