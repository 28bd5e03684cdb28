#include <gtest/gtest.h>
#include <sys/resource.h>

#include <torch/torch.h>

#include <algorithm>
#include <csignal>

#include "support/fixtures.hpp"
#include "trainer/io/metrics_sink.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

using testing::read_text;
using testing::TempDir;

// A file-size limit for its lifetime (SIGXFSZ ignored): write() then fails part way with EFBIG, as it fails with
// ENOSPC on a full disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) : handler_(std::signal(SIGXFSZ, SIG_IGN)) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit small = saved_;
    small.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &small);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*handler_)(int);
};

void write_string(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
}

TEST(AtomicFile, WritesAndReplaces) {
  TempDir dir;
  write_string(dir / "f", "first");
  EXPECT_EQ(read_text(dir / "f"), "first");
  write_string(dir / "f", "second");
  EXPECT_EQ(read_text(dir / "f"), "second");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(AtomicFile, FailureMidWriteKeepsTheOldFileAndLeavesNoTemporary) {
  TempDir dir;
  write_string(dir / "ck.pt", "good checkpoint");
  EXPECT_THROW(write_file_atomically(dir / "ck.pt",
                                     [](const ByteSink& sink) {
                                       sink("partial", 7);
                                       throw std::runtime_error("disk full");
                                     }),
               std::runtime_error);
  EXPECT_EQ(read_text(dir / "ck.pt"), "good checkpoint");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(AtomicFile, WriteFailureFromAFullDiskKeepsTheOldFile) {
  TempDir dir;
  write_string(dir / "ck.pt", "good checkpoint");
  const std::string big(1 << 20, 'x');
  std::string message;
  try {
    const FileSizeLimit limit(4096);
    write_string(dir / "ck.pt", big);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("cannot write " + (dir / "ck.pt").string()), std::string::npos) << message;
  EXPECT_EQ(read_text(dir / "ck.pt"), "good checkpoint");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

// LibTorch's zip writer, given a sink that fails, throws again from its destructor and aborts the process. The
// sink never fails; the write failure comes after the archive is done: a WriteError at every point of the file.
TEST(AtomicFile, ALibTorchArchiveOnAFullDiskIsAWriteErrorNotAnAbort) {
  TempDir dir;
  write_string(dir / "ck.pt", "good checkpoint");
  torch::serialize::OutputArchive archive;
  archive.write("weights", torch::arange(200000, torch::kFloat));  // 800 KB
  for (const rlim_t limit : {rlim_t{10}, rlim_t{4096}, rlim_t{300000}, rlim_t{799000}}) {
    std::string message;
    try {
      const FileSizeLimit file_size_limit(limit);
      write_file_atomically(dir / "ck.pt", [&](const ByteSink& sink) { archive.save_to(sink); });
    } catch (const WriteError& e) {
      message = e.what();
    }
    EXPECT_EQ(message.rfind("cannot write " + (dir / "ck.pt").string() + ": File too large (it needs ", 0), 0u)
        << limit << ": " << message;
    EXPECT_EQ(read_text(dir / "ck.pt"), "good checkpoint");
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  }
}

// A resume cuts metrics.jsonl and metrics.csv back to its step. On a full disk that must fail as a WriteError
// with both files as they were: rewritten in place, they were truncated first and the run's history was lost.
TEST(MetricsSink, ResumeOnAFullDiskKeepsTheWholeHistory) {
  TempDir dir;
  {
    MetricsSink sink(dir.path(), std::nullopt, /*tensorboard=*/false);
    for (int64_t step = 1; step <= 400; ++step) {
      MetricsRow row("train", 1, step);
      row.loss = 1.0 / static_cast<double>(step);
      sink.write(row);
    }
  }
  const std::string jsonl = read_text(dir / "metrics.jsonl"), csv = read_text(dir / "metrics.csv");
  ASSERT_GT(jsonl.size(), 8192u);
  std::string message;
  try {
    const FileSizeLimit limit(4096);
    MetricsSink resumed(dir.path(), int64_t{300}, /*tensorboard=*/false);
  } catch (const WriteError& e) {
    message = e.what();
  }
  EXPECT_EQ(message.rfind("cannot write " + (dir / "metrics.jsonl").string(), 0), 0u) << message;
  EXPECT_EQ(read_text(dir / "metrics.jsonl"), jsonl);
  EXPECT_EQ(read_text(dir / "metrics.csv"), csv);
  // With room, the same resume keeps steps 1..300 in both files.
  { MetricsSink resumed(dir.path(), int64_t{300}, /*tensorboard=*/false); }
  const std::string cut = read_text(dir / "metrics.csv");
  EXPECT_EQ(std::count(cut.begin(), cut.end(), '\n'), 301);
  EXPECT_EQ(cut, csv.substr(0, cut.size()));
  const std::string cut_json = read_text(dir / "metrics.jsonl");
  EXPECT_EQ(std::count(cut_json.begin(), cut_json.end(), '\n'), 300);
  EXPECT_EQ(cut_json, jsonl.substr(0, cut_json.size()));
}

TEST(AtomicFile, MissingFolderIsAnError) {
  TempDir dir;
  EXPECT_THROW(write_string(dir / "missing-folder" / "ck.pt", "x"), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "missing-folder"));
}

TEST(AtomicFile, UnreplaceableTargetKeepsTheOldOne) {
  TempDir dir;
  std::filesystem::create_directories(dir / "ck.pt" / "inside");  // a non-empty folder cannot be renamed over
  EXPECT_THROW(write_string(dir / "ck.pt", "new"), Error);
  EXPECT_TRUE(std::filesystem::is_directory(dir / "ck.pt" / "inside"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

}  // namespace
}  // namespace trainer
