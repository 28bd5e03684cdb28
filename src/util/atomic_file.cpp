#include "trainer/util/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "trainer/util/error.hpp"

namespace trainer {
namespace {

std::string errno_text() { return std::strerror(errno); }

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
  if (tmp.fd < 0) throw Error("cannot create " + tmp.path.string() + ": " + errno_text(), 1);

  const ByteSink sink = [&](const void* data, size_t size) -> size_t {
    const char* p = static_cast<const char*>(data);
    size_t left = size;
    while (left > 0) {
      const ssize_t n = ::write(tmp.fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error("cannot write " + path.string() + ": " + errno_text(), 1);
      p += n;
      left -= static_cast<size_t>(n);
    }
    return size;
  };
  produce(sink);

  if (::fsync(tmp.fd) != 0) throw Error("cannot flush " + path.string() + ": " + errno_text(), 1);
  if (::close(tmp.fd) != 0) {
    tmp.fd = -1;
    throw Error("cannot close " + path.string() + ": " + errno_text(), 1);
  }
  tmp.fd = -1;
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    throw Error("cannot replace " + path.string() + ": " + errno_text(), 1);
  tmp.committed = true;
  // The rename is durable only once the folder entry is on disk too.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace trainer
