#include "trainer/platform/files.hpp"

#include <algorithm>
#include <cstdlib>

#include "trainer/platform/read_loop.hpp"

#include "windows_support.hpp"

namespace trainer {

namespace {

HANDLE as_handle(intptr_t h) { return reinterpret_cast<HANDLE>(h); }

// Another program holding the file open without sharing delete (a virus scanner, an indexer, an image viewer)
// makes a replace fail for as long as it holds it: these are worth waiting out.
bool held_by_another_program(DWORD error) {
  return error == ERROR_ACCESS_DENIED || error == ERROR_SHARING_VIOLATION || error == ERROR_LOCK_VIOLATION;
}

}  // namespace

OutputFile::~OutputFile() {
  if (handle_ != -1) CloseHandle(as_handle(handle_));
}

std::error_code OutputFile::create(const std::filesystem::path& path) {
  // Readers may open it meanwhile and it may be renamed while open; the handle is not inherited by children. A new
  // file only (CREATE_NEW), and a link at its name is not followed: a guessable temporary name must not make a
  // write land in a file someone put there.
  const HANDLE h = CreateFileW(windows::long_path(path).c_str(), GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_DELETE,
                               nullptr, CREATE_NEW, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, nullptr);
  if (h == INVALID_HANDLE_VALUE) return windows::last_error();
  handle_ = reinterpret_cast<intptr_t>(h);
  return {};
}

std::error_code OutputFile::append(const std::filesystem::path& path) {
  const HANDLE h = CreateFileW(windows::long_path(path).c_str(), GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_DELETE,
                               nullptr, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) return windows::last_error();
  LARGE_INTEGER zero{};
  if (!SetFilePointerEx(h, zero, nullptr, FILE_END)) {
    const std::error_code ec = windows::last_error();
    CloseHandle(h);
    return ec;
  }
  handle_ = reinterpret_cast<intptr_t>(h);
  return {};
}

std::error_code OutputFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const DWORD chunk = static_cast<DWORD>(std::min<size_t>(size, 1u << 30));
    DWORD written = 0;
    if (!WriteFile(as_handle(handle_), p, chunk, &written, nullptr)) return windows::last_error();
    p += written;
    size -= written;
  }
  return {};
}

std::error_code OutputFile::flush_to_disk() {
  return FlushFileBuffers(as_handle(handle_)) ? std::error_code{} : windows::last_error();
}

std::error_code OutputFile::close() {
  const BOOL closed = CloseHandle(as_handle(handle_));
  handle_ = -1;
  return closed ? std::error_code{} : windows::last_error();
}

std::error_code replace_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  const std::wstring source = windows::long_path(from), target = windows::long_path(to);
  DWORD waited_ms = 0;
  for (DWORD pause_ms = 10;; pause_ms = std::min<DWORD>(pause_ms * 2, 500)) {
    // WRITE_THROUGH: the call returns once the move is on the disk (NTFS journals it), as fsync of the folder
    // does on POSIX.
    if (MoveFileExW(source.c_str(), target.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) return {};
    const DWORD error = GetLastError();
    if (!held_by_another_program(error) || waited_ms >= 10000)
      return {static_cast<int>(error), windows::system_errors()};
    Sleep(pause_ms);
    waited_ms += pause_ms;
  }
}

std::error_code hard_link(const std::filesystem::path& from, const std::filesystem::path& to) {
  return CreateHardLinkW(windows::long_path(to).c_str(), windows::long_path(from).c_str(), nullptr)
             ? std::error_code{}
             : windows::last_error();
}

std::filesystem::path home_folder() {
  // The wide environment, so a profile folder such as C:\Users\Zoë survives.
  if (const wchar_t* profile = _wgetenv(L"USERPROFILE"); profile != nullptr && *profile != L'\0') return profile;
  const wchar_t* drive = _wgetenv(L"HOMEDRIVE");
  const wchar_t* path = _wgetenv(L"HOMEPATH");
  if (drive != nullptr && path != nullptr) return std::filesystem::path(std::wstring(drive) + path);
  return {};
}

std::filesystem::path user_cache_folder() {
  if (const wchar_t* local = _wgetenv(L"LOCALAPPDATA"); local != nullptr && *local != L'\0') return local;
  const std::filesystem::path home = home_folder();
  return home.empty() ? home : home / "AppData" / "Local";
}

std::error_code remove_file(const std::filesystem::path& path) {
  if (DeleteFileW(windows::long_path(path).c_str())) return {};
  const DWORD error = GetLastError();
  if (error == ERROR_FILE_NOT_FOUND || error == ERROR_PATH_NOT_FOUND) return {};
  return {static_cast<int>(error), windows::system_errors()};
}

std::error_code read_file(const std::filesystem::path& path, std::vector<uint8_t>& bytes) {
  const HANDLE h = CreateFileW(windows::long_path(path).c_str(), GENERIC_READ,
                               FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                               FILE_FLAG_SEQUENTIAL_SCAN, nullptr);
  if (h == INVALID_HANDLE_VALUE) return windows::last_error();
  LARGE_INTEGER size{};
  const bool sized = GetFileSizeEx(h, &size) && size.QuadPart > 0;
  const auto ec =
      read_all(sized ? static_cast<size_t>(size.QuadPart) : 0, bytes, [h](uint8_t* buffer, size_t room, size_t& got) {
        DWORD n = 0;  // ReadFile takes at most a DWORD's worth: 1 GiB a call
        if (!ReadFile(h, buffer, static_cast<DWORD>(std::min<size_t>(room, 1u << 30)), &n, nullptr))
          return windows::last_error();
        got = n;
        return std::error_code{};
      });
  CloseHandle(h);
  return ec;
}

PositionalFile::~PositionalFile() {
  if (handle_ != -1) CloseHandle(reinterpret_cast<HANDLE>(handle_));
}

std::error_code PositionalFile::open(const std::filesystem::path& path) {
  const HANDLE h = CreateFileW(windows::long_path(path).c_str(), GENERIC_READ,
                               FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                               FILE_ATTRIBUTE_NORMAL | FILE_FLAG_RANDOM_ACCESS, nullptr);
  if (h == INVALID_HANDLE_VALUE) return windows::last_error();
  LARGE_INTEGER size{};
  if (!GetFileSizeEx(h, &size)) {
    const std::error_code ec = windows::last_error();
    CloseHandle(h);
    return ec;
  }
  handle_ = reinterpret_cast<intptr_t>(h);
  size_ = static_cast<uint64_t>(size.QuadPart);
  return {};
}

std::error_code PositionalFile::read_at(uint64_t offset, size_t size, uint8_t* out) const {
  // On a handle opened without FILE_FLAG_OVERLAPPED, ReadFile with an OVERLAPPED reads at its offset and returns when
  // done; each call names its own offset, so threads may read at once.
  while (size > 0) {
    OVERLAPPED at{};
    at.Offset = static_cast<DWORD>(offset & 0xffffffffu);
    at.OffsetHigh = static_cast<DWORD>(offset >> 32);
    const DWORD want = static_cast<DWORD>(std::min<size_t>(size, 1u << 30));
    DWORD got = 0;
    if (!ReadFile(reinterpret_cast<HANDLE>(handle_), out, want, &got, &at)) {
      if (GetLastError() == ERROR_HANDLE_EOF) return std::make_error_code(std::errc::io_error);
      return windows::last_error();
    }
    if (got == 0) return std::make_error_code(std::errc::io_error);
    out += got;
    offset += got;
    size -= got;
  }
  return {};
}

FileLock::~FileLock() { unlock(); }

std::error_code FileLock::try_lock(const std::filesystem::path& path, bool& held) {
  unlock();
  held = false;
  // LockFileEx needs read or write access; the file is shared in every way, since it is only ever locked.
  const HANDLE h = CreateFileW(windows::long_path(path).c_str(), GENERIC_READ | GENERIC_WRITE,
                               FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_ALWAYS,
                               FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) return windows::last_error();
  OVERLAPPED first_byte{};  // the lock's range starts at offset 0; past the end of a file is allowed
  if (!LockFileEx(h, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &first_byte)) {
    const DWORD error = GetLastError();
    CloseHandle(h);
    if (error == ERROR_LOCK_VIOLATION) return {};
    return {static_cast<int>(error), windows::system_errors()};
  }
  handle_ = reinterpret_cast<intptr_t>(h);
  held = true;
  return {};
}

void FileLock::unlock() {
  if (handle_ == -1) return;
  CloseHandle(as_handle(handle_));  // closing the handle releases its locks
  handle_ = -1;
}

MappedFile::~MappedFile() {
  if (data_) UnmapViewOfFile(data_);
}

std::error_code MappedFile::open(const std::filesystem::path& path) {
  const HANDLE h = CreateFileW(windows::long_path(path).c_str(), GENERIC_READ,
                               FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                               FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) return windows::last_error();
  std::error_code ec;
  LARGE_INTEGER size{};
  if (!GetFileSizeEx(h, &size)) {
    ec = windows::last_error();
  } else if (size.QuadPart > 0) {
    // The view keeps the mapping object alive; both handles can be closed once it exists.
    const HANDLE mapping = CreateFileMappingW(h, nullptr, PAGE_READONLY, 0, 0, nullptr);
    if (!mapping) {
      ec = windows::last_error();
    } else {
      const void* at = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
      if (!at) ec = windows::last_error();
      else {
        data_ = static_cast<const char*>(at);
        size_ = static_cast<size_t>(size.QuadPart);
      }
      CloseHandle(mapping);
    }
  }
  CloseHandle(h);
  return ec;
}

}  // namespace trainer
