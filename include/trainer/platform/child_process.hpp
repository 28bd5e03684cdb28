// Child processes for the built-in launcher: copies of this executable with extra environment variables, their
// stdout and stderr read through a pipe. Each runs in its own process group (POSIX) or console process group
// (Windows), so a terminal's Ctrl-C reaches the launcher alone and it decides what the children get. On Windows
// they also belong to a job object that ends them when the launcher ends, however it ends.
//   StopRequestQueue stops;
//   ChildProcess kid = ChildProcess::start_self({"trainer", "--config", "c.json"}, {{"RANK", "0"}});
//   while (!kid.poll()) { wait_for_children({&kid}, stops, 200ms); kid.read_output(text); }
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/platform/stop_requests.hpp"

namespace trainer {

struct ChildExit {
  int code = 0;     // its exit code; 128 + signal when a signal killed it
  std::string how;  // "exited with code 3", "was killed by signal 9 (Killed)"
};

class ChildProcess {
 public:
  // Starts this executable with `args` (args[0] is its name as shown, not what is started) and `env` set on top
  // of this process's environment. Throws std::runtime_error naming the cause when it cannot.
  static ChildProcess start_self(const std::vector<std::string>& args,
                                 const std::vector<std::pair<std::string, std::string>>& env);
  ChildProcess(ChildProcess&&) noexcept;
  ChildProcess& operator=(ChildProcess&&) noexcept;
  ~ChildProcess();

  // Appends the output it has written so far, without waiting.
  void read_output(std::string& into);
  // Its exit once it has ended (checked without waiting); the output is not necessarily all read yet.
  const std::optional<ChildExit>& poll();
  // Passes a stop request on: SIGINT or SIGTERM, as a signal (POSIX) or through one of two events the child's
  // StopRequests waits on (Windows).
  void request_stop(int code);
  // Ends it now (SIGKILL, TerminateProcess).
  void kill();

  struct State;

 private:
  friend void wait_for_children(const std::vector<const ChildProcess*>&, const StopRequestQueue&,
                                std::chrono::milliseconds);
  ChildProcess();
  std::unique_ptr<State> s_;
};

// Sleeps until a child has output or has ended, a stop request is queued, or `timeout` has passed.
void wait_for_children(const std::vector<const ChildProcess*>& children, const StopRequestQueue& stops,
                       std::chrono::milliseconds timeout);

// Runs `command` through the system's shell (/bin/sh -c; cmd.exe /c on Windows) and hands its standard output to
// `sink` in pieces as they come, to its end; its standard error goes to this process's. How it ended comes back.
// Throws std::runtime_error when no shell could be started. What a `pipe:` shard runs (data/sources/pipe_shard.hpp).
ChildExit run_shell_command(const std::string& command, const std::function<void(const uint8_t*, size_t)>& sink);

// A TCP port on 127.0.0.1 nobody listens on now, or nullopt.
std::optional<int> free_loopback_port();

}  // namespace trainer
