// SIGINT and SIGTERM as a polite request while training: the first one is noted (the training loop finishes
// its step, writes a checkpoint and exits 130 / 143); a second one exits at once with the same code, and the
// previous checkpoint stays intact because every checkpoint write is atomic.
//   StopSignals stop;                       // handlers installed for the guard's lifetime
//   if (int sig = stop.pending()) { save(); return 128 + sig; }
#pragma once

namespace trainer {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // 0, or the first signal received (SIGINT or SIGTERM).
  int pending() const;
};

const char* signal_name(int signal);

}  // namespace trainer
