#include "trainer/cli/launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "trainer/util/error.hpp"
#include "trainer/util/stop_signals.hpp"

namespace trainer {

namespace {

// A signal handler reaches only static state: the write end of a pipe the launcher's loop polls.
int signal_pipe_write = -1;

void on_signal(int sig) {
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(signal_pipe_write, &byte, 1);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) != 0)
    throw Error("--nproc-per-node: no free port on 127.0.0.1 for the ranks to meet", 1);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct Rank {
  pid_t pid = -1;
  int output = -1;          // read end of its stdout + stderr
  std::string partial;      // a line not finished yet
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

// Passes a rank's output on, line by line; keeps its last non-empty line for the failure message.
void forward_output(Rank& rank, int index, bool flush_partial) {
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(rank.output, buffer, sizeof(buffer))) > 0) rank.partial.append(buffer, static_cast<size_t>(n));
  size_t start = 0, end = 0;
  auto emit = [&](const std::string& line) {
    if (!line.empty() && line.find_first_not_of(" \r") != std::string::npos) rank.last_line = line;
    const std::string text = (index == 0 ? "" : "[rank " + std::to_string(index) + "] ") + line + "\n";
    std::fwrite(text.data(), 1, text.size(), index == 0 ? stdout : stderr);
  };
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

pid_t start_rank(int rank, int nproc, int port, const std::vector<std::string>& argv, int output) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("--nproc-per-node: fork failed: ") + std::strerror(errno), 1);
  if (pid > 0) return pid;
  // The child: its own process group (a terminal's Ctrl-C goes to the launcher, which forwards it once).
  ::setpgid(0, 0);
  ::dup2(output, STDOUT_FILENO);
  ::dup2(output, STDERR_FILENO);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::execv("/proc/self/exe", args.data());
  std::fprintf(stderr, "error: --nproc-per-node: cannot start %s: %s\n", argv[0].c_str(), std::strerror(errno));
  ::_exit(127);
}

}  // namespace

std::vector<std::string> command_line_without_launcher_option() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> all;
  for (size_t start = 0, end = 0; start < raw.size(); start = end + 1) {
    end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    all.push_back(raw.substr(start, end - start));
  }
  std::vector<std::string> kept;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == "--nproc-per-node") {
      ++i;  // and its value
      continue;
    }
    if (all[i].rfind("--nproc-per-node=", 0) == 0) continue;
    kept.push_back(all[i]);
  }
  return kept;
}

int launch_local_ranks(int nproc, const std::vector<std::string>& argv) {
  const char* port_text = std::getenv("MASTER_PORT");
  const int port = port_text ? std::atoi(port_text) : free_port();
  int signal_pipe[2];
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("--nproc-per-node: pipe failed", 1);
  signal_pipe_write = signal_pipe[1];
  struct sigaction action {}, previous_int {}, previous_term {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);

  std::vector<Rank> ranks(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw Error("--nproc-per-node: pipe failed", 1);
    // The child's end loses O_CLOEXEC through dup2 onto stdout/stderr.
    ranks[static_cast<size_t>(r)].pid = start_rank(r, nproc, port, argv, out[1]);
    ::close(out[1]);
    ranks[static_cast<size_t>(r)].output = out[0];
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  }

  int forwarded = 0;                  // the last signal passed on to the ranks
  std::optional<size_t> failed;       // the first rank that failed on its own
  bool kill_pending = false;          // after a failure: SIGKILL for ranks still alive at kill_at
  auto kill_at = std::chrono::steady_clock::now();
  size_t running = ranks.size();
  auto signal_all = [&](int sig) {
    for (auto& r : ranks)
      if (!r.status) ::kill(r.pid, sig);
  };
  while (running > 0) {
    std::vector<pollfd> fds{{signal_pipe[0], POLLIN, 0}};
    for (const auto& r : ranks) fds.push_back({r.output, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 200);
    char sig = 0;
    while (::read(signal_pipe[0], &sig, 1) == 1) {
      forwarded = sig;
      signal_all(sig);
    }
    for (size_t i = 0; i < ranks.size(); ++i) forward_output(ranks[i], static_cast<int>(i), false);
    int status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        Rank& r = ranks[i];
        if (r.pid != pid) continue;
        r.status = status;
        --running;
        forward_output(r, static_cast<int>(i), true);
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
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
  ::close(signal_pipe[0]);
  ::close(signal_pipe[1]);
  for (auto& r : ranks) ::close(r.output);
  if (failed) {
    const Rank& r = ranks[*failed];
    throw TrainError("rank " + std::to_string(*failed) + " of " + std::to_string(nproc) + " " +
                     describe_exit(*r.status) + (r.last_line.empty() ? "" : "; its last line: " + r.last_line) +
                     "; the other ranks were stopped");
  }
  int code = 0;
  for (const auto& r : ranks)
    code = std::max(code, WIFEXITED(*r.status) ? WEXITSTATUS(*r.status) : 128 + WTERMSIG(*r.status));
  return code;
}

}  // namespace trainer
