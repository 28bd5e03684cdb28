#include "trainer/util/stop_signals.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace trainer {

namespace {

// A signal handler can only reach state with static storage: this flag, and the handlers StopSignals
// replaced (restored when it ends). Only the handler and StopSignals touch them.
volatile std::sig_atomic_t received = 0;
struct sigaction previous_int, previous_term;

// write() is async-signal-safe; spdlog and stdio are not.
template <size_t N>
void say(const char (&message)[N]) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message, N - 1);
}

void on_signal(int sig) {
  if (received != 0) {  // the second signal: stop now
    say("\nsecond signal: exiting at once; the last checkpoint written stays as it was\n");
    _exit(128 + sig);
  }
  received = sig;
  say("\nstopping after this step and saving a checkpoint (send the signal again to exit at once)\n");
}

}  // namespace

StopSignals::StopSignals() {
  received = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads in loader threads continue instead of failing with EINTR
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
}

int StopSignals::pending() const { return received; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace trainer
