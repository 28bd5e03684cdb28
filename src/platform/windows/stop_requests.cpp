#include "trainer/platform/stop_requests.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "windows_support.hpp"

namespace trainer {

namespace {

// A console control handler is a plain function the system calls on a thread of its own: it reaches only the
// state below, which the guards set up and tear down.
std::atomic<int> received{0};
std::atomic<bool> launcher_forwards{false};  // a child of the built-in launcher: requests come as events
std::mutex queue_mutex;
std::deque<int> queued;        // guarded by queue_mutex
HANDLE queue_event = nullptr;  // set while a request is queued

void say(const char* message) {
  DWORD written = 0;
  WriteFile(GetStdHandle(STD_ERROR_HANDLE), message, static_cast<DWORD>(std::char_traits<char>::length(message)),
            &written, nullptr);
}

// Ctrl-C and Ctrl-Break are an interrupt; closing the console, logoff and shutdown a termination.
int code_of(DWORD event) { return event == CTRL_C_EVENT || event == CTRL_BREAK_EVENT ? SIGINT : SIGTERM; }

void note_request(int code) {
  int expected = 0;
  if (!received.compare_exchange_strong(expected, code)) {  // the second request: stop now
    say("\nsecond stop request: exiting at once; the last checkpoint written stays as it was\n");
    ExitProcess(static_cast<UINT>(128 + expected));
  }
  say("\nstopping after this step and saving a checkpoint (press Ctrl-C again to exit at once)\n");
}

BOOL WINAPI on_request(DWORD event) {
  // A console event reaches every process on the console, the launcher's children too; the launcher passes it on
  // through their events, so a child notes it only once, from there.
  if (!launcher_forwards) note_request(code_of(event));
  // After a close, logoff or shutdown event the system ends the process as soon as the handler returns: keep it
  // waiting, so the training loop can write its checkpoint in the seconds the system allows.
  if (event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT) Sleep(INFINITE);
  return TRUE;
}

BOOL WINAPI on_queued_request(DWORD event) {
  {
    const std::lock_guard<std::mutex> lock(queue_mutex);
    queued.push_back(code_of(event));
  }
  SetEvent(queue_event);
  if (event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT) Sleep(INFINITE);  // as above: the launcher waits
  return TRUE;
}

}  // namespace

// The launcher's channel to a child (child_process.cpp): two inherited auto-reset events, SIGINT's and SIGTERM's,
// their handles in TRAINER_STOP_EVENTS. It works without a console, which console events need (a service, an IDE,
// CI), and carries which request it was.
struct StopRequests::Watcher {
  HANDLE quit = CreateEventW(nullptr, TRUE, FALSE, nullptr);  // set when the guard ends
  std::thread thread;
  ~Watcher() {
    SetEvent(quit);
    if (thread.joinable()) thread.join();
    CloseHandle(quit);
  }
};

StopRequests::StopRequests() {
  received = 0;
  SetConsoleCtrlHandler(on_request, TRUE);
  const char* events = std::getenv("TRAINER_STOP_EVENTS");
  unsigned long long interrupt = 0, terminate = 0;
  if (!events || std::sscanf(events, "%llu,%llu", &interrupt, &terminate) != 2) return;
  watcher_ = std::make_unique<Watcher>();
  launcher_forwards = true;
  const HANDLE handles[] = {watcher_->quit, reinterpret_cast<HANDLE>(static_cast<uintptr_t>(interrupt)),
                            reinterpret_cast<HANDLE>(static_cast<uintptr_t>(terminate))};
  watcher_->thread = std::thread([handles] {
    for (;;) {
      const DWORD which = WaitForMultipleObjects(3, handles, FALSE, INFINITE);
      if (which == WAIT_OBJECT_0 + 1) note_request(SIGINT);
      else if (which == WAIT_OBJECT_0 + 2) note_request(SIGTERM);
      else return;
    }
  });
}

StopRequests::~StopRequests() {
  SetConsoleCtrlHandler(on_request, FALSE);
  watcher_.reset();
  launcher_forwards = false;
}

int StopRequests::pending() const { return received; }

StopRequestQueue::StopRequestQueue() {
  queue_event = CreateEventW(nullptr, /*manual reset=*/TRUE, FALSE, nullptr);
  if (!queue_event) throw std::runtime_error("cannot make an event: " + windows::last_error().message());
  read_ = reinterpret_cast<intptr_t>(queue_event);
  SetConsoleCtrlHandler(on_queued_request, TRUE);
}

StopRequestQueue::~StopRequestQueue() {
  SetConsoleCtrlHandler(on_queued_request, FALSE);
  const std::lock_guard<std::mutex> lock(queue_mutex);
  queued.clear();
  CloseHandle(queue_event);
  queue_event = nullptr;
}

int StopRequestQueue::next() {
  const std::lock_guard<std::mutex> lock(queue_mutex);
  if (queued.empty()) {
    ResetEvent(queue_event);
    return 0;
  }
  const int code = queued.front();
  queued.pop_front();
  return code;
}

intptr_t StopRequestQueue::waitable() const { return read_; }

}  // namespace trainer
