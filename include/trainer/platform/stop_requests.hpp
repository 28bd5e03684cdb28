// The operating system's requests to stop, in one vocabulary: SIGINT (a terminal's Ctrl-C; on Windows also
// Ctrl-Break) and SIGTERM (kill, a scheduler's preemption; on Windows closing the console window, logoff and
// shutdown). The codes are <csignal>'s on every platform, so a stopped run exits 128 + code (130, 143) anywhere.
//
// StopRequests is the trainer's: the first request is noted (the training loop finishes its step, writes a
// checkpoint and exits); a second one exits at once with the same code, and the previous checkpoint stays intact
// because every checkpoint write is atomic. Windows ends a process some seconds after a console close, logoff or
// shutdown event (5 s for a close); the checkpoint is written if it fits in that time.
//   StopRequests stop;                      // handlers installed for the guard's lifetime
//   if (int code = stop.pending()) { save(); return 128 + code; }
//
// StopRequestQueue is the launcher's: every request is queued, to be passed on to its child processes.
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>

namespace trainer {

class StopRequests {
 public:
  StopRequests();
  ~StopRequests();
  StopRequests(const StopRequests&) = delete;
  StopRequests& operator=(const StopRequests&) = delete;

  // 0, or the first request received (SIGINT or SIGTERM).
  int pending() const;

  struct Watcher;  // Windows: the thread that waits for the launcher's stop events

 private:
  std::unique_ptr<Watcher> watcher_;
};

class StopRequestQueue {
 public:
  StopRequestQueue();
  ~StopRequestQueue();
  StopRequestQueue(const StopRequestQueue&) = delete;
  StopRequestQueue& operator=(const StopRequestQueue&) = delete;

  // The next request received (SIGINT or SIGTERM), or 0 when none is waiting.
  int next();
  // What wait_for_children (child_process.hpp) sleeps on: a pipe's read end (POSIX) or an event (Windows).
  intptr_t waitable() const;

 private:
  intptr_t read_ = -1, write_ = -1;
};

// "SIGINT", "SIGTERM" or "a signal".
inline const char* signal_name(int code) {
  return code == SIGINT ? "SIGINT" : code == SIGTERM ? "SIGTERM" : "a signal";
}

}  // namespace trainer
