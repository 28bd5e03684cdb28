// The live progress line on a terminal ("\r" redrawn, at most ten times a second). When stdout is not a
// terminal it stays silent and the periodic log lines carry the same information.
#pragma once

#include <chrono>
#include <string>

namespace trainer {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  ~ProgressLine() { clear(); }
  bool enabled() const { return enabled_; }
  void show(const std::string& text);
  void clear();  // before a log line, so it does not mix with the progress text

 private:
  bool enabled_;
  bool visible_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// "1:02:03" / "4:05"
std::string format_duration(double seconds);

}  // namespace trainer
