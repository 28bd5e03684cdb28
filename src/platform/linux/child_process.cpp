#include "trainer/platform/child_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace trainer {

struct ChildProcess::State {
  pid_t pid = -1;
  int output = -1;  // read end of its stdout + stderr; -1 once it reached its end
  std::optional<ChildExit> exit;
  ~State() {
    if (output >= 0) ::close(output);
  }
};

namespace {

ChildExit describe(int status) {
  ChildExit e;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    e.code = 128 + sig;
    e.how = "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  } else {
    e.code = WEXITSTATUS(status);
    e.how = "exited with code " + std::to_string(e.code);
  }
  return e;
}

// This process's environment with `env`'s variables set over it, as execve takes it ("NAME=value").
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& set : env) replaced = replaced || set.first == name;
    if (!replaced) out.push_back(entry);
  }
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace

ChildProcess::ChildProcess() : s_(std::make_unique<State>()) {}
ChildProcess::ChildProcess(ChildProcess&&) noexcept = default;
ChildProcess& ChildProcess::operator=(ChildProcess&&) noexcept = default;
ChildProcess::~ChildProcess() = default;

ChildProcess ChildProcess::start_self(const std::vector<std::string>& args,
                                      const std::vector<std::pair<std::string, std::string>>& env) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  ChildProcess child;
  child.s_->output = out[0];
  // Everything the child needs is built here: after fork, a child of a threaded process may only make
  // async-signal-safe calls (another thread may have held the allocator's lock at the fork), so it allocates
  // nothing and only calls setpgid, dup2, execve, write and _exit (scripts/check_platform_calls.sh checks it).
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> environment = child_environment(env);
  std::vector<char*> envp;
  for (const auto& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string failed = "error: cannot start " + (args.empty() ? std::string() : args[0]) + " (execve failed)\n";
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[1]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // The child: its own process group (a terminal's Ctrl-C goes to the launcher alone). The pipe's end loses
    // O_CLOEXEC through dup2 onto stdout/stderr.
    ::setpgid(0, 0);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::execve("/proc/self/exe", argv.data(), envp.data());
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, failed.data(), failed.size());
    ::_exit(127);
  }
  ::close(out[1]);
  child.s_->pid = pid;
  ::fcntl(child.s_->output, F_SETFL, O_NONBLOCK);
  return child;
}

void ChildProcess::read_output(std::string& into) {
  if (s_->output < 0) return;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(s_->output, buffer, sizeof(buffer));
    if (n > 0) {
      into.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {  // every writer has closed it: nothing more will come, and poll() must not wake on it again
      ::close(s_->output);
      s_->output = -1;
    }
    return;
  }
}

const std::optional<ChildExit>& ChildProcess::poll() {
  int status = 0;
  if (!s_->exit && ::waitpid(s_->pid, &status, WNOHANG) == s_->pid) s_->exit = describe(status);
  return s_->exit;
}

void ChildProcess::request_stop(int code) {
  if (!s_->exit) ::kill(s_->pid, code);
}

void ChildProcess::kill() {
  if (!s_->exit) ::kill(s_->pid, SIGKILL);
}

void wait_for_children(const std::vector<const ChildProcess*>& children, const StopRequestQueue& stops,
                       std::chrono::milliseconds timeout) {
  // A child's exit is not a descriptor: its pipe's end stands for it (it reaches its end when the child ends), and
  // the timeout covers a child whose own children keep the pipe open.
  std::vector<pollfd> fds{{static_cast<int>(stops.waitable()), POLLIN, 0}};
  for (const auto& c : children)
    if (c->s_->output >= 0) fds.push_back({c->s_->output, POLLIN, 0});
  ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
}

ChildExit run_shell_command(const std::string& command, const std::function<void(const uint8_t*, size_t)>& sink) {
  // "e": the read end is close-on-exec, so a command started at the same time on another thread does not hold it.
  FILE* out = ::popen(command.c_str(), "re");
  if (!out) throw std::runtime_error(std::string("cannot start /bin/sh: ") + std::strerror(errno));
  std::vector<uint8_t> buffer(size_t{1} << 20);
  try {
    for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), out)) > 0;) sink(buffer.data(), n);
  } catch (...) {
    ::pclose(out);  // waits for the command; it ends on its own once its output has no reader (SIGPIPE)
    throw;
  }
  const int status = ::pclose(out);
  if (status == -1) throw std::runtime_error(std::string("cannot wait for the command: ") + std::strerror(errno));
  return describe(status);
}

std::optional<int> free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) == 0;
  ::close(fd);
  if (!ok) return std::nullopt;
  return ntohs(a.sin_port);
}

}  // namespace trainer
