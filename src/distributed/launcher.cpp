#include "trainer/distributed/launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "trainer/util/error.hpp"

namespace trainer {

namespace {

Error launch_error(const std::string& what) { return Error("--nproc-per-node: " + what, 1); }

// A file descriptor closed when it goes out of scope, so a throw leaks none.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

int free_port() {
  const Fd socket(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(a);
  if (socket.get() < 0 || ::bind(socket.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&a), &size) != 0)
    throw launch_error("no free port on 127.0.0.1 for the ranks to meet");
  return ntohs(a.sin_port);
}

// A signal handler reaches only static state: the write end of the pipe the launcher's loop polls.
int signal_pipe_write = -1;

void on_signal(int sig) {
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(signal_pipe_write, &byte, 1);
}

// SIGINT and SIGTERM turned into bytes on a pipe for as long as it lives; the previous handlers come back when it
// ends, also when a throw ends it.
class ForwardedSignals {
 public:
  ForwardedSignals() {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) throw launch_error(std::string("pipe: ") + std::strerror(errno));
    read_ = Fd(ends[0]);
    write_ = Fd(ends[1]);
    signal_pipe_write = write_.get();
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;
  ~ForwardedSignals() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
    signal_pipe_write = -1;
  }
  int fd() const { return read_.get(); }
  // The next signal received, or 0.
  int next() const {
    char sig = 0;
    return ::read(read_.get(), &sig, 1) == 1 ? sig : 0;
  }

 private:
  Fd read_, write_;
  struct sigaction previous_int_ {
  }, previous_term_{};
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  Fd output;            // read end of its stdout + stderr
  std::string partial;  // a line not finished yet
  std::string last_line;
  std::optional<int> status;
};

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Passes a rank's output on, line by line; keeps its last non-empty line for the failure message.
void forward_output(Rank& rank, bool flush_partial) {
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(rank.output.get(), buffer, sizeof(buffer))) > 0)
    rank.partial.append(buffer, static_cast<size_t>(n));
  auto emit = [&](const std::string& line) {
    if (!line.empty() && line.find_first_not_of(" \r") != std::string::npos) rank.last_line = line;
    const std::string text = (rank.index == 0 ? "" : "[rank " + std::to_string(rank.index) + "] ") + line + "\n";
    std::fwrite(text.data(), 1, text.size(), rank.index == 0 ? stdout : stderr);
  };
  size_t start = 0, end = 0;
  while ((end = rank.partial.find('\n', start)) != std::string::npos) {
    emit(rank.partial.substr(start, end - start));
    start = end + 1;
  }
  rank.partial.erase(0, start);
  if (flush_partial && !rank.partial.empty()) {
    emit(rank.partial);
    rank.partial.clear();
  }
  std::fflush(stdout);
  std::fflush(stderr);
}

// Forks rank `index` with torchrun's variables; its stdout and stderr go to a pipe the launcher reads.
Rank start_rank(int index, const LaunchOptions& o, int port) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw launch_error(std::string("pipe: ") + std::strerror(errno));
  Rank rank;
  rank.index = index;
  rank.output = Fd(out[0]);
  Fd child_end(out[1]);
  std::vector<char*> args;
  for (const auto& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  rank.pid = ::fork();
  if (rank.pid < 0) throw launch_error(std::string("fork failed: ") + std::strerror(errno));
  if (rank.pid == 0) {
    // The child: its own process group (a terminal's Ctrl-C goes to the launcher, which forwards it once). The
    // pipe's end loses O_CLOEXEC through dup2 onto stdout/stderr.
    ::setpgid(0, 0);
    ::dup2(child_end.get(), STDOUT_FILENO);
    ::dup2(child_end.get(), STDERR_FILENO);
    ::setenv("RANK", std::to_string(index).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(index).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    ::execv("/proc/self/exe", args.data());
    std::fprintf(stderr, "error: --nproc-per-node: cannot start %s: %s\n", o.argv[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::fcntl(rank.output.get(), F_SETFL, O_NONBLOCK);
  return rank;
}

// Waits for every rank, passing their output and the launcher's signals on. The first rank that fails on its own
// (not stopped by a forwarded signal) stops the others: SIGTERM, then SIGKILL after a grace period. Returns it.
std::optional<size_t> supervise(std::vector<Rank>& ranks, const ForwardedSignals& signals) {
  int forwarded = 0;  // the last signal passed on to the ranks
  std::optional<size_t> failed;
  bool kill_pending = false;  // after a failure: SIGKILL for ranks still alive at kill_at
  auto kill_at = std::chrono::steady_clock::now();
  size_t running = ranks.size();
  auto signal_all = [&](int sig) {
    for (auto& r : ranks)
      if (!r.status) ::kill(r.pid, sig);
  };
  while (running > 0) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    for (const auto& r : ranks) fds.push_back({r.output.get(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 200);
    while (const int sig = signals.next()) signal_all(forwarded = sig);
    for (auto& r : ranks) forward_output(r, false);
    int status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        Rank& r = ranks[i];
        if (r.pid != pid) continue;
        r.status = status;
        --running;
        forward_output(r, true);
        const bool stopped_by_signal = forwarded != 0 && WIFEXITED(status) && WEXITSTATUS(status) == 128 + forwarded;
        if (!succeeded(status) && !stopped_by_signal && !failed) {
          failed = i;
          signal_all(SIGTERM);
          kill_pending = true;
          kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        }
      }
    }
    if (kill_pending && std::chrono::steady_clock::now() > kill_at) {
      signal_all(SIGKILL);
      kill_pending = false;
    }
  }
  return failed;
}

}  // namespace

int launch_local_ranks(const LaunchOptions& o) {
  const ForwardedSignals signals;
  for (int attempt = 0;; ++attempt) {
    LaunchOptions run = o;
    if (attempt > 0) run.argv = o.restart_argv;
    // A new port for each attempt: the failed attempt's store may still hold the old one for a while.
    const int port = o.port && attempt == 0 ? *o.port : free_port();
    std::vector<Rank> ranks;
    for (int r = 0; r < o.nproc; ++r) ranks.push_back(start_rank(r, run, port));
    const auto failed = supervise(ranks, signals);
    if (!failed) {
      int code = 0;
      for (const auto& r : ranks) code = std::max(code, exit_code(*r.status));
      return code;
    }
    const Rank& r = ranks[*failed];
    const std::string what = "rank " + std::to_string(*failed) + " of " + std::to_string(o.nproc) + " " +
                             describe_exit(*r.status) + (r.last_line.empty() ? "" : "; its last line: " + r.last_line);
    if (attempt >= o.max_restarts)
      throw TrainError(what + "; the other ranks were stopped" +
                       (o.max_restarts > 0 ? " (after " + std::to_string(o.max_restarts) + " restart(s))" : ""));
    std::fprintf(stderr, "trainer: %s; restart %d of %d, from the run's newest good checkpoint\n", what.c_str(),
                 attempt + 1, o.max_restarts);
    std::fflush(stderr);
  }
}

}  // namespace trainer
