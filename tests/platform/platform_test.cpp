// The platform layer, as users on each system rely on it: checkpoints replaced atomically while something reads
// them, dataset and run folders named in any script or nested past 260 characters, hard links with a copy where
// there are none, a console's Ctrl-C as a stop request, and the launcher's children. The same file runs on Linux
// (ctest) and, built with MinGW, under Wine (scripts/lanes/windows.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "trainer/distributed/launcher.hpp"
#include "trainer/platform/child_process.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/platform/stop_requests.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/write_error.hpp"

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>  // the test's own way of pressing Ctrl-C; the trainer reaches Windows only in src/platform
#else
#include <csignal>
#endif

namespace trainer {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A path's UTF-8 text as a std::string, in C++17 (where u8string() is one) and C++20 (a std::u8string) alike.
std::string utf8(const fs::path& path) {
  const auto text = path.u8string();
  return std::string(text.begin(), text.end());
}

// A fresh folder under the system's temporary folder, removed afterwards.
class TempFolder {
 public:
  TempFolder() {
    static int count = 0;
    path_ = fs::temp_directory_path() /
            ("trainer-platform-" + std::to_string(process_id()) + "-" + std::to_string(++count));
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ignored;
    fs::remove_all(as_long_path(path_), ignored);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const fs::path& p) const { return path_ / p; }

  // std::filesystem's own calls need the "\\?\" form past 260 characters on Windows.
  static fs::path as_long_path(const fs::path& p) {
#ifdef _WIN32
    return fs::path(L"\\\\?\\" + fs::absolute(p).make_preferred().wstring());
#else
    return p;
#endif
  }

 private:
  fs::path path_;
};

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
}

std::string read_text(const fs::path& path) {
  std::vector<uint8_t> bytes;
  const auto ec = read_file(path, bytes);
  EXPECT_FALSE(ec) << ec.message();
  return std::string(bytes.begin(), bytes.end());
}

// Changes a file in place (not through an atomic replace), as a way to tell a hard link from a copy: st_nlink
// is always 1 in the Windows C runtime's stat.
void overwrite_first_byte(const fs::path& path, char byte) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(0);
  file.put(byte);
}

// Ctrl-C as the console delivers it (Windows: to every process on the console; the children the tests start
// are in their own groups, which ignore it) or SIGINT (POSIX).
void press_ctrl_c() {
#ifdef _WIN32
  GenerateConsoleCtrlEvent(CTRL_C_EVENT, 0);
#else
  std::raise(SIGINT);
#endif
}

template <typename Done>
bool wait_until(Done done, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::vector<std::string> child_args(const std::string& mode, const TempFolder& folder) {
  return {"trainer_platform_tests", "child", mode, utf8(folder.path())};
}

TEST(PlatformFiles, ReplacesAFileWhileAnotherProgramReadsIt) {
  TempFolder dir;
  write_text(dir / "last.pt", "old checkpoint");
  // A reader that does not share delete, as most programs open files: Windows refuses the replace while it holds
  // the file, so the replace waits it out; POSIX replaces at once and the reader keeps the old bytes.
  std::ifstream reader(dir / "last.pt", std::ios::binary);
  ASSERT_TRUE(reader);
  std::string rest;
  std::thread slow_reader([&] {
    std::this_thread::sleep_for(300ms);
    std::getline(reader, rest);
    reader.close();
  });
  write_text(dir / "last.pt", "new checkpoint");
  slow_reader.join();
  EXPECT_EQ(rest, "old checkpoint");
  EXPECT_EQ(read_text(dir / "last.pt"), "new checkpoint");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), {}), 1) << "a temporary file was left behind";
}

// A download continued from its .partial file: append writes after the bytes already there, and creates the file
// when there is none.
TEST(PlatformFiles, AppendContinuesAFileOrStartsOne) {
  TempFolder dir;
  const fs::path partial = dir / fs::u8path(u8"权重 resnet.pth.partial");
  for (const char* piece : {"first ", "second"}) {
    OutputFile out;
    ASSERT_FALSE(out.append(partial));
    ASSERT_FALSE(out.write(piece, std::strlen(piece)));
    ASSERT_FALSE(out.close());
  }
  EXPECT_EQ(read_text(partial), "first second");
}

// The shard cache's copiers take turns through a lock file: one holder at a time, among FileLocks of one process and
// across processes, and a holder's lock ends with its process, a killed one too. The file stays, empty.
TEST(PlatformFiles, AFileLockHasOneHolderAndEndsWithItsProcess) {
  TempFolder dir;
  const fs::path path = dir / fs::u8path(u8"缓存 copying.lock");
  FileLock a, b;
  bool held = false;
  ASSERT_FALSE(a.try_lock(path, held));
  EXPECT_TRUE(held);
  ASSERT_FALSE(b.try_lock(path, held));
  EXPECT_FALSE(held);
  a.unlock();
  ASSERT_FALSE(b.try_lock(path, held));
  EXPECT_TRUE(held);
  b.unlock();
  EXPECT_EQ(fs::file_size(path), 0u);

  StopRequestQueue stops;
  ChildProcess child = ChildProcess::start_self(child_args("hold-lock", dir), {});
  std::string output;
  ASSERT_TRUE(wait_until([&] {
    child.read_output(output);
    return fs::exists(dir / "ready-0") || child.poll().has_value();
  }));
  ASSERT_TRUE(fs::exists(dir / "ready-0")) << output;
  ASSERT_FALSE(a.try_lock(dir / "held.lock", held));
  EXPECT_FALSE(held);
  child.kill();
  ASSERT_TRUE(wait_until([&] {
    wait_for_children({&child}, stops, 50ms);
    return child.poll().has_value();
  }));
  ASSERT_FALSE(a.try_lock(dir / "held.lock", held));
  EXPECT_TRUE(held);
}

// A checkpoint is mapped, not read into memory: the mapping holds the file's bytes (an empty file none), a missing
// file is an error, and a file replaced while mapped keeps the old bytes in the mapping (POSIX) or waits for it
// to be unmapped (Windows: replace_file retries while the file is held).
TEST(PlatformFiles, AMappedFileHoldsItsBytes) {
  TempFolder dir;
  const fs::path file = dir / fs::u8path(u8"检查点 last.pt");
  write_text(file, "checkpoint bytes");
  {
    MappedFile mapped;
    ASSERT_FALSE(mapped.open(file));
    EXPECT_EQ(std::string(mapped.data(), mapped.size()), "checkpoint bytes");
  }
  write_text(dir / "empty", "");
  MappedFile empty;
  EXPECT_FALSE(empty.open(dir / "empty"));
  EXPECT_EQ(empty.size(), 0u);
  MappedFile missing;
  EXPECT_TRUE(missing.open(dir / "missing"));
  // Created new: a second create of the same temporary name is refused, never written through.
  OutputFile first, second;
  ASSERT_FALSE(first.create(dir / ".x.tmp1"));
  EXPECT_TRUE(second.create(dir / ".x.tmp1"));
}

// A shard is read at offsets from several threads through one open file; a read past its end is an error.
TEST(PlatformFiles, APositionalFileReadsAtAnyOffsetFromManyThreads) {
  TempFolder dir;
  const fs::path file = dir / fs::u8path(u8"分片 000000.tar");
  std::string bytes;
  for (int i = 0; i < 70000; ++i) bytes += static_cast<char>('a' + i % 26);
  write_text(file, bytes);
  PositionalFile shard;
  ASSERT_FALSE(shard.open(file));
  EXPECT_EQ(shard.size(), bytes.size());
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&, t] {
      std::vector<uint8_t> out(1000);
      for (size_t offset = 997 * t; offset + out.size() <= bytes.size(); offset += 4001) {
        if (shard.read_at(offset, out.size(), out.data()) ||
            std::string(out.begin(), out.end()) != bytes.substr(offset, out.size()))
          ++wrong;
      }
    });
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong, 0);
  std::vector<uint8_t> out(10);
  EXPECT_TRUE(shard.read_at(bytes.size() - 5, out.size(), out.data()));  // the file ends first
  EXPECT_FALSE(shard.read_at(bytes.size() - 10, out.size(), out.data()));
  PositionalFile missing;
  EXPECT_TRUE(missing.open(dir / "missing"));
}

TEST(PlatformFiles, TheHomeFolderIsAnExistingFolder) {
  const fs::path home = home_folder();
  ASSERT_FALSE(home.empty());
  EXPECT_TRUE(fs::is_directory(home)) << utf8(home);
  // The cache folder may not exist yet (it is made when first used); where it is, is known.
  EXPECT_TRUE(user_cache_folder().is_absolute()) << utf8(user_cache_folder());
}

TEST(PlatformFiles, FolderAndFileNamesInAnyScript) {
  TempFolder dir;
  const fs::path data = dir / fs::u8path(u8"数据 集") / fs::u8path(u8"Ünïcødé train");
  fs::create_directories(data);
  const fs::path image = data / fs::u8path(u8"图像 1.jpg");
  write_text(image, "jpeg bytes");
  EXPECT_EQ(read_text(image), "jpeg bytes");
  link_file_atomically(image, data / fs::u8path(u8"最佳.jpg"));
  EXPECT_EQ(read_text(data / fs::u8path(u8"最佳.jpg")), "jpeg bytes");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(data)) names.push_back(utf8(entry.path().filename()));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{utf8(image.filename()), utf8(fs::u8path(u8"最佳.jpg"))}));
}

TEST(PlatformFiles, PathsLongerThan260Characters) {
  TempFolder dir;
  fs::path deep = dir.path();
  for (int i = 0; i < 6; ++i) deep /= "a-folder-name-of-fifty-characters-for-long-paths-" + std::to_string(i);
  fs::create_directories(TempFolder::as_long_path(deep));
  const fs::path file = deep / "last.pt";
  ASSERT_GT(file.native().size(), 300u);
  write_text(file, "weights");
  write_text(file, "weights, replaced");
  EXPECT_EQ(read_text(file), "weights, replaced");
  link_file_atomically(file, deep / "best.pt");
  EXPECT_EQ(read_text(deep / "best.pt"), "weights, replaced");
  EXPECT_FALSE(remove_file(deep / "best.pt"));
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(read_file(deep / "best.pt", bytes)) << "removed";
}

TEST(PlatformFiles, HardLinkKeepsItsBytesWhenTheOriginalIsReplaced) {
  TempFolder dir;
  write_text(dir / "last.pt", "step 100");
  link_file_atomically(dir / "last.pt", dir / "step-100.pt");
  overwrite_first_byte(dir / "last.pt", 'S');  // one file under two names: the change shows through both
  EXPECT_EQ(read_text(dir / "step-100.pt"), "Step 100");
  write_text(dir / "last.pt", "step 200");  // a new file under the old name
  EXPECT_EQ(read_text(dir / "step-100.pt"), "Step 100");
  EXPECT_EQ(read_text(dir / "last.pt"), "step 200");
}

TEST(PlatformFiles, CopiesWhereNoHardLinkCanBeMade) {
  // A link cannot cross file systems: the memory file system against the temporary folder's. Wine shows the
  // root of the Linux file system as drive Z:.
#ifdef _WIN32
  const fs::path other = "Z:\\dev\\shm";
#else
  const fs::path other = "/dev/shm";
#endif
  TempFolder dir;
  std::error_code ec;
  if (!fs::is_directory(other, ec)) GTEST_SKIP() << other << " is not here";
  const fs::path source = other / ("trainer-platform-" + std::to_string(process_id()) + ".pt");
  write_text(source, "checkpoint bytes");
  EXPECT_TRUE(hard_link(source, dir / "probe")) << "the two folders are on one file system";
  link_file_atomically(source, dir / "best.pt");
  overwrite_first_byte(source, 'C');  // a copy: the change does not show through
  remove_file(source);
  EXPECT_EQ(read_text(dir / "best.pt"), "checkpoint bytes");
  EXPECT_FALSE(fs::exists(dir / "best.pt.link"));
}

TEST(PlatformFiles, FreeSpaceAndAFailedWriteNameTheFile) {
  TempFolder dir;
  const auto free = free_bytes(dir.path());
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0u);
  std::string message;
  try {
    write_text(dir / "missing folder" / "last.pt", "x");
  } catch (const WriteError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("cannot write"), std::string::npos) << message;
  EXPECT_NE(message.find("last.pt"), std::string::npos) << message;
}

TEST(PlatformProcess, FactsAboutThisProcess) {
  EXPECT_GT(process_id(), 0);
  const std::string host = host_name();
  EXPECT_FALSE(host.empty());
  EXPECT_EQ(host.find_first_of("/\\ "), std::string::npos) << host;
  EXPECT_GT(peak_resident_mib(), 0.5);
  const auto args = own_command_line();
  ASSERT_FALSE(args.empty());
  EXPECT_NE(args[0].find("trainer_platform_tests"), std::string::npos) << args[0];
  set_environment_default("TRAINER_PLATFORM_TEST_VARIABLE", "first");
  set_environment_default("TRAINER_PLATFORM_TEST_VARIABLE", "second");
  ASSERT_NE(std::getenv("TRAINER_PLATFORM_TEST_VARIABLE"), nullptr);
  EXPECT_STREQ(std::getenv("TRAINER_PLATFORM_TEST_VARIABLE"), "first");
}

TEST(PlatformStop, ACtrlCBecomesAStopRequest) {
  StopRequests stop;
  EXPECT_EQ(stop.pending(), 0);
  press_ctrl_c();
  ASSERT_TRUE(wait_until([&] { return stop.pending() != 0; })) << "no stop request arrived";
  EXPECT_EQ(stop.pending(), SIGINT);
  EXPECT_STREQ(signal_name(stop.pending()), "SIGINT");
}

TEST(PlatformStop, TheLaunchersQueueKeepsEveryRequest) {
  StopRequestQueue stops;
  EXPECT_EQ(stops.next(), 0);
  press_ctrl_c();
  int first = 0;
  ASSERT_TRUE(wait_until([&] { return (first = stops.next()) != 0; }));
  EXPECT_EQ(first, SIGINT);
  press_ctrl_c();
  int second = 0;
  ASSERT_TRUE(wait_until([&] { return (second = stops.next()) != 0; }));
  EXPECT_EQ(second, SIGINT);
  EXPECT_EQ(stops.next(), 0);
}

TEST(PlatformChildren, TwoChildrenReportReadyAndStopWhenAsked) {
  TempFolder dir;
  StopRequestQueue stops;
  std::vector<ChildProcess> children;
  for (int rank = 0; rank < 2; ++rank)
    children.push_back(ChildProcess::start_self(child_args("wait-for-stop", dir), {{"RANK", std::to_string(rank)}}));
  std::vector<const ChildProcess*> all{&children[0], &children[1]};
  std::string output[2];
  ASSERT_TRUE(wait_until(
      [&] {
        wait_for_children(all, stops, 50ms);
        for (int i = 0; i < 2; ++i) children[i].read_output(output[i]);
        return fs::exists(dir / "ready-0") && fs::exists(dir / "ready-1");
      },
      30s))
      << output[0] << output[1];
  for (auto& c : children) c.request_stop(SIGINT);
  ASSERT_TRUE(wait_until(
      [&] {
        wait_for_children(all, stops, 50ms);
        for (int i = 0; i < 2; ++i) children[i].read_output(output[i]);
        return children[0].poll() && children[1].poll();
      },
      30s));
  for (int i = 0; i < 2; ++i) {
    children[i].read_output(output[i]);
    EXPECT_EQ(children[i].poll()->code, 130) << children[i].poll()->how;
    EXPECT_NE(output[i].find("rank " + std::to_string(i) + " ready"), std::string::npos) << output[i];
    EXPECT_NE(output[i].find("stopped by SIGINT"), std::string::npos) << output[i];
  }
}

TEST(PlatformChildren, AKilledChildSaysSo) {
  TempFolder dir;
  StopRequestQueue stops;
  ChildProcess child = ChildProcess::start_self(child_args("wait-for-stop", dir), {});
  ASSERT_TRUE(wait_until([&] { return fs::exists(dir / "ready-0"); }, 30s));
  child.kill();
  ASSERT_TRUE(wait_until([&] {
    wait_for_children({&child}, stops, 50ms);
    return child.poll().has_value();
  }));
  EXPECT_EQ(child.poll()->code, 137) << child.poll()->how;
}

TEST(PlatformChildren, AShellCommandsOutputArrivesWholeAndItsExitCodeWithIt) {
  // This executable as the command, through the shell: 3 MB and 5 bytes of every byte value (a tar's bytes,
  // '\n', '\r' and 0x1A included), in the pieces the pipe gives.
  const size_t count = (size_t{3} << 20) + 5;
  std::string received;
  size_t pieces = 0;
  const ChildExit exit = run_shell_command("\"" + own_command_line().at(0) + "\" child bytes " + std::to_string(count),
                                           [&](const uint8_t* data, size_t size) {
                                             received.append(reinterpret_cast<const char*>(data), size);
                                             ++pieces;
                                           });
  EXPECT_EQ(exit.code, 3) << exit.how;
  EXPECT_EQ(exit.how, "exited with code 3");
  ASSERT_EQ(received.size(), count);
  EXPECT_GE(pieces, 3u);  // at most 1 MiB a piece
  for (size_t i = 0; i < count; ++i)
    if (static_cast<uint8_t>(received[i]) != (i * 7 + i / 256) % 256) {
      ADD_FAILURE() << "byte " << i;
      break;
    }
  // A command that does not exist: the shell says so on stderr and exits non-zero.
  const ChildExit missing = run_shell_command("no-such-command-for-trainer-tests", [](const uint8_t*, size_t) {});
  EXPECT_NE(missing.code, 0) << missing.how;
}

TEST(PlatformLauncher, ARankThatFailsStopsTheOtherAndIsNamed) {
  TempFolder dir;
  std::string message;
  try {
    launch_local_ranks({2, child_args("rank1-fails", dir), std::nullopt, 0, {}});
  } catch (const TrainError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("rank 1 of 2 exited with code 3; its last line: rank 1 failing"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the other ranks were stopped"), std::string::npos) << message;
}

TEST(PlatformLauncher, ACtrlCReachesEveryRankOnce) {
  TempFolder dir;
  std::thread user([&] {
    if (wait_until([&] { return fs::exists(dir / "ready-0") && fs::exists(dir / "ready-1"); }, 30s)) press_ctrl_c();
  });
  int code = -1;
  std::string failure;
  try {
    code = launch_local_ranks({2, child_args("wait-for-stop", dir), std::nullopt, 0, {}});
  } catch (const Error& e) {
    failure = e.what();
  }
  user.join();
  EXPECT_EQ(code, 130) << failure;
}

}  // namespace
}  // namespace trainer
