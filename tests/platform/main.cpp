// The platform tests' main. With "child MODE FOLDER" it is instead one of the child processes the tests start
// (ChildProcess and the launcher start this same executable):
//   wait-for-stop  writes FOLDER/ready-RANK, then waits for a stop request; prints "stopped by SIGINT" and exits
//                  128 + its code (the trainer's way)
//   rank1-fails    rank 1 prints "rank 1 failing" and exits 3; the other ranks wait-for-stop
//   hold-lock      takes the FileLock on FOLDER/held.lock (exits 4 when it cannot), then does as wait-for-stop
//   bytes          writes FOLDER (a number) bytes, byte i being (i * 7 + i / 256) % 256, to stdout as they are, and
//                  exits 3 (what a `pipe:` shard's command looks like to run_shell_command)
// Otherwise GoogleTest's main, except that a run whose tests were all skipped exits 77 (ctest's "Skipped").
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <fcntl.h>
#include <io.h>
#include <windows.h>
#endif

#include "trainer/platform/files.hpp"
#include "trainer/platform/stop_requests.hpp"
#include "trainer/util/atomic_file.hpp"

namespace {

int write_bytes(size_t count) {
#ifdef _WIN32
  _setmode(_fileno(stdout), _O_BINARY);  // no \r before each \n
#endif
  for (size_t i = 0; i < count; ++i) std::putchar(static_cast<int>((i * 7 + i / 256) % 256));
  std::fflush(stdout);
  return 3;
}

int run_child(const std::string& mode, const std::string& folder) {
  if (mode == "bytes") return write_bytes(std::stoul(folder));
  const char* rank_text = std::getenv("RANK");
  const std::string rank = rank_text ? rank_text : "0";
  if (mode == "rank1-fails" && rank == "1") {
    std::printf("rank 1 failing\n");
    return 3;
  }
  trainer::FileLock lock;  // held until this process ends
  bool held = false;
  if (mode == "hold-lock" && (lock.try_lock(std::filesystem::u8path(folder) / "held.lock", held) || !held)) {
    std::printf("the lock was not taken\n");
    return 4;
  }
  trainer::StopRequests stop;
  trainer::write_file_atomically(std::filesystem::u8path(folder) / ("ready-" + rank),
                                 [](const trainer::ByteSink& sink) { sink("ready", 5); });
  std::printf("rank %s ready\n", rank.c_str());
  std::fflush(stdout);
  for (int i = 0; i < 6000 && !stop.pending(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::printf("stopped by %s\n", trainer::signal_name(stop.pending()));
  std::fflush(stdout);
  return stop.pending() ? 128 + stop.pending() : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "child") return run_child(argv[2], argv[3]);
#ifdef _WIN32
  // Console events need a console: a run whose output goes to a pipe (ctest, CI, Wine in a script) has none.
  AllocConsole();
#endif
  testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const testing::UnitTest& run = *testing::UnitTest::GetInstance();
  if (result == 0 && run.successful_test_count() == 0 && run.skipped_test_count() > 0) return 77;
  return result;
}
