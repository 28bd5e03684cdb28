// Elapsed wall time for logs and benchmarks, on the monotonic clock.
//   const auto start = Clock::now();  ...;  double s = seconds_since(start);
#pragma once

#include <chrono>

namespace trainer {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

inline double ms_since(Clock::time_point start) { return 1000.0 * seconds_since(start); }

}  // namespace trainer
