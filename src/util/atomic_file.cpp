#include "trainer/util/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "trainer/util/error.hpp"
#include "trainer/util/write_error.hpp"

namespace trainer {
namespace {

// Closes the descriptor and removes the temporary file unless the write was committed.
struct TempFile {
  std::filesystem::path path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed) {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  }
};

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::function<void(const ByteSink&)>& produce) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  TempFile tmp;
  tmp.path = dir / ("." + path.filename().string() + ".tmp" + std::to_string(::getpid()));
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) throw write_failure(path, errno);

  // The sink never fails: after the first failed write it only counts, and the failure is raised once the
  // producer is done. LibTorch's zip writer, handed a sink that throws, throws again from its destructor and
  // aborts the process (a full disk used to end a run with "terminate called" and a stack trace).
  int failure = 0;
  uint64_t produced = 0;
  const ByteSink sink = [&](const void* data, size_t size) -> size_t {
    produced += size;
    const char* p = static_cast<const char*>(data);
    size_t left = failure == 0 ? size : 0;
    while (left > 0) {
      const ssize_t n = ::write(tmp.fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        failure = errno;
        break;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    return size;
  };
  produce(sink);
  if (failure != 0) throw write_failure(path, failure, produced);

  if (::fsync(tmp.fd) != 0) throw write_failure(path, errno, produced);
  const int closed = ::close(tmp.fd);
  tmp.fd = -1;
  if (closed != 0) throw write_failure(path, errno, produced);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) throw write_failure(path, errno);
  tmp.committed = true;
  // The rename is durable only once the folder entry is on disk too.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace trainer
