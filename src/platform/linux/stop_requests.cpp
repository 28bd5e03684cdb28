#include "trainer/platform/stop_requests.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace trainer {

namespace {

// A signal handler can only reach state with static storage: the first request, the queue's pipe, and the
// handlers that were replaced (restored when the guard ends). Only the handlers and the guards touch them.
volatile std::sig_atomic_t received = 0;
volatile int queue_write_end = -1;
struct sigaction previous_int, previous_term;

// write() is async-signal-safe; spdlog and stdio are not.
template <size_t N>
void say(const char (&message)[N]) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message, N - 1);
}

void on_request(int sig) {
  if (received != 0) {  // the second request: stop now
    say("\nsecond signal: exiting at once; the last checkpoint written stays as it was\n");
    _exit(128 + sig);
  }
  received = sig;
  say("\nstopping after this step and saving a checkpoint (send the signal again to exit at once)\n");
}

void on_queued_request(int sig) {
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(queue_write_end, &byte, 1);
}

void install(void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads in loader threads continue instead of failing with EINTR
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

void restore() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
}

}  // namespace

struct StopRequests::Watcher {};  // signals reach a child launched here directly

StopRequests::StopRequests() {
  received = 0;
  install(on_request);
}

StopRequests::~StopRequests() { restore(); }

int StopRequests::pending() const { return received; }

StopRequestQueue::StopRequestQueue() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
  read_ = ends[0];
  write_ = ends[1];
  queue_write_end = ends[1];
  install(on_queued_request);
}

StopRequestQueue::~StopRequestQueue() {
  restore();
  queue_write_end = -1;
  ::close(static_cast<int>(read_));
  ::close(static_cast<int>(write_));
}

int StopRequestQueue::next() {
  char code = 0;
  return ::read(static_cast<int>(read_), &code, 1) == 1 ? code : 0;
}

intptr_t StopRequestQueue::waitable() const { return read_; }

}  // namespace trainer
