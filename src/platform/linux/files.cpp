#include "trainer/platform/files.hpp"

#include "trainer/platform/read_loop.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace trainer {

namespace {

std::error_code last_error() { return {errno, std::generic_category()}; }

}  // namespace

OutputFile::~OutputFile() {
  if (handle_ >= 0) ::close(static_cast<int>(handle_));
}

std::error_code OutputFile::create(const std::filesystem::path& path) {
  // A new file only (O_EXCL), never through a link at its name (O_NOFOLLOW): a temporary name others can guess
  // must not make a write land in a file someone put there.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return last_error();
  handle_ = fd;
  return {};
}

std::error_code OutputFile::append(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return last_error();
  handle_ = fd;
  return {};
}

std::error_code OutputFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(static_cast<int>(handle_), p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return last_error();
    p += n;
    size -= static_cast<size_t>(n);
  }
  return {};
}

std::error_code OutputFile::flush_to_disk() {
  return ::fsync(static_cast<int>(handle_)) == 0 ? std::error_code{} : last_error();
}

std::error_code OutputFile::close() {
  const int closed = ::close(static_cast<int>(handle_));
  handle_ = -1;
  return closed == 0 ? std::error_code{} : last_error();
}

std::error_code replace_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) return last_error();
  // The rename is durable only once the folder entry is on disk too.
  const auto dir = to.has_parent_path() ? to.parent_path() : std::filesystem::path(".");
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return {};
}

std::error_code hard_link(const std::filesystem::path& from, const std::filesystem::path& to) {
  return ::link(from.c_str(), to.c_str()) == 0 ? std::error_code{} : last_error();
}

std::filesystem::path home_folder() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return home;
  const struct passwd* entry = ::getpwuid(::getuid());
  return entry != nullptr && entry->pw_dir != nullptr ? std::filesystem::path(entry->pw_dir) : std::filesystem::path();
}

std::filesystem::path user_cache_folder() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') return xdg;
  const std::filesystem::path home = home_folder();
  return home.empty() ? home : home / ".cache";
}

std::error_code remove_file(const std::filesystem::path& path) {
  return ::unlink(path.c_str()) == 0 || errno == ENOENT ? std::error_code{} : last_error();
}

std::error_code read_file(const std::filesystem::path& path, std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return last_error();
  struct stat info {};
  const size_t size = ::fstat(fd, &info) == 0 && info.st_size > 0 ? static_cast<size_t>(info.st_size) : 0;
  const auto ec = read_all(size, bytes, [fd](uint8_t* buffer, size_t room, size_t& got) {
    for (;;) {
      const ssize_t n = ::read(fd, buffer, room);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return last_error();
      got = static_cast<size_t>(n);
      return std::error_code{};
    }
  });
  ::close(fd);
  return ec;
}

PositionalFile::~PositionalFile() {
  if (handle_ >= 0) ::close(static_cast<int>(handle_));
}

std::error_code PositionalFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return last_error();
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const std::error_code ec = S_ISREG(info.st_mode) ? last_error() : std::make_error_code(std::errc::invalid_argument);
    ::close(fd);
    return ec;
  }
  handle_ = fd;
  size_ = static_cast<uint64_t>(info.st_size);
  return {};
}

std::error_code PositionalFile::read_at(uint64_t offset, size_t size, uint8_t* out) const {
  while (size > 0) {
    const ssize_t n = ::pread(static_cast<int>(handle_), out, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return last_error();
    if (n == 0) return std::make_error_code(std::errc::io_error);  // the file ended first
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return {};
}

FileLock::~FileLock() { unlock(); }

std::error_code FileLock::try_lock(const std::filesystem::path& path, bool& held) {
  unlock();
  held = false;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return last_error();
  int locked = 0;
  do {
    locked = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) return {};
    return {error, std::generic_category()};
  }
  handle_ = fd;
  held = true;
  return {};
}

void FileLock::unlock() {
  if (handle_ < 0) return;
  ::close(static_cast<int>(handle_));  // closing the descriptor releases its flock
  handle_ = -1;
}

MappedFile::~MappedFile() {
  if (size_ > 0) ::munmap(const_cast<char*>(data_), size_);
}

std::error_code MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return last_error();
  struct stat info {};
  std::error_code ec;
  if (::fstat(fd, &info) != 0) {
    ec = last_error();
  } else if (!S_ISREG(info.st_mode)) {
    ec = std::make_error_code(std::errc::invalid_argument);
  } else if (info.st_size > 0) {
    void* at = ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (at == MAP_FAILED) {
      ec = last_error();
    } else {
      data_ = static_cast<const char*>(at);
      size_ = static_cast<size_t>(info.st_size);
    }
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return ec;
}

}  // namespace trainer
