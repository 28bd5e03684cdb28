#include "trainer/distributed/launcher.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/platform/child_process.hpp"
#include "trainer/platform/stop_requests.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

Error launch_error(const std::string& what) { return Error("--nproc-per-node: " + what, 1); }

int free_port() {
  if (const auto port = free_loopback_port()) return *port;
  throw launch_error("no free port on 127.0.0.1 for the ranks to meet");
}

struct Rank {
  int index = 0;
  ChildProcess process;
  std::string partial;  // output not passed on yet: a line not finished
  std::string last_line;
  bool collected = false;  // its exit seen and its last output passed on
};

// Passes a rank's output on, line by line; keeps its last non-empty line for the failure message.
void forward_output(Rank& rank, bool flush_partial) {
  rank.process.read_output(rank.partial);
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

// Starts rank `index` with torchrun's variables.
Rank start_rank(int index, const LaunchOptions& o, int port) {
  try {
    return Rank{index,
                ChildProcess::start_self(o.argv, {{"RANK", std::to_string(index)},
                                                  {"LOCAL_RANK", std::to_string(index)},
                                                  {"WORLD_SIZE", std::to_string(o.nproc)},
                                                  {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
                                                  {"MASTER_ADDR", "127.0.0.1"},
                                                  {"MASTER_PORT", std::to_string(port)}}),
                {},
                {},
                false};
  } catch (const std::runtime_error& e) {
    throw launch_error(std::string("cannot start rank ") + std::to_string(index) + ": " + e.what());
  }
}

// A rank that ended with 130 or 143 after the launcher passed a stop on was stopped, not failed: it saved its
// checkpoint and exited as asked.
bool stopped_as_asked(const ChildExit& e, int forwarded) {
  return forwarded != 0 && (e.code == 128 + SIGINT || e.code == 128 + SIGTERM);
}

// Waits for every rank, passing their output and the launcher's stop requests on. The first rank that fails on its
// own (not stopped by a forwarded request) stops the others: SIGTERM, then a kill after a grace period. Returns it.
std::optional<size_t> supervise(std::vector<Rank>& ranks, StopRequestQueue& stops) {
  int forwarded = 0;  // the last request passed on to the ranks
  std::optional<size_t> failed;
  bool kill_pending = false;  // after a failure: kill the ranks still alive at kill_at
  auto kill_at = std::chrono::steady_clock::now();
  std::vector<const ChildProcess*> processes;
  for (const auto& r : ranks) processes.push_back(&r.process);
  while (std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return !r.collected; })) {
    wait_for_children(processes, stops, std::chrono::milliseconds(200));
    while (const int code = stops.next()) {
      forwarded = code;
      for (auto& r : ranks) r.process.request_stop(code);
    }
    for (auto& r : ranks) forward_output(r, false);
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      if (r.collected || !r.process.poll()) continue;
      r.collected = true;
      forward_output(r, true);
      const ChildExit& e = *r.process.poll();
      if (e.code != 0 && !stopped_as_asked(e, forwarded) && !failed) {
        failed = i;
        for (auto& other : ranks) other.process.request_stop(SIGTERM);
        kill_pending = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
    }
    if (kill_pending && std::chrono::steady_clock::now() > kill_at) {
      for (auto& r : ranks) r.process.kill();
      kill_pending = false;
    }
  }
  return failed;
}

}  // namespace

int launch_local_ranks(const LaunchOptions& o) {
  StopRequestQueue stops;
  for (int attempt = 0;; ++attempt) {
    LaunchOptions run = o;
    if (attempt > 0) run.argv = o.restart_argv;
    // A new port for each attempt: the failed attempt's store may still hold the old one for a while.
    const int port = o.port && attempt == 0 ? *o.port : free_port();
    std::vector<Rank> ranks;
    for (int r = 0; r < o.nproc; ++r) ranks.push_back(start_rank(r, run, port));
    const auto failed = supervise(ranks, stops);
    if (!failed) {
      int code = 0;
      for (auto& r : ranks) code = std::max(code, r.process.poll()->code);
      return code;
    }
    Rank& r = ranks[*failed];
    const std::string what = "rank " + std::to_string(*failed) + " of " + std::to_string(o.nproc) + " " +
                             r.process.poll()->how + (r.last_line.empty() ? "" : "; its last line: " + r.last_line);
    if (attempt >= o.max_restarts)
      throw TrainError(what + "; the other ranks were stopped" +
                       (o.max_restarts > 0 ? " (after " + std::to_string(o.max_restarts) + " restart(s))" : ""));
    std::fprintf(stderr, "trainer: %s; restart %d of %d, from the run's newest good checkpoint\n", what.c_str(),
                 attempt + 1, o.max_restarts);
    std::fflush(stderr);
  }
}

}  // namespace trainer
