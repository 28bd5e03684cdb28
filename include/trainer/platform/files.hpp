// The file operations whose guarantees differ by operating system, behind one interface. Paths are
// std::filesystem::path (UTF-16 at every Windows call, so a dataset under "D:\数据 集" opens); on Windows, paths
// longer than 260 characters get the "\\?\" prefix the wide calls need. Failures are std::error_code values whose
// message() names the cause in the system's words ("No space left on device", "The disk is full.").
//   OutputFile out;
//   if (auto ec = out.create(tmp)) fail(ec);  ... out.write(p, n); out.flush_to_disk(); out.close();
//   if (auto ec = replace_file(tmp, final_path)) fail(ec);
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <system_error>
#include <vector>

namespace trainer {

// A file this process creates and writes alone; it is not inherited by child processes. create() makes a new file
// only (an existing one, or a symbolic link at the name, is an error: remove it first), append() opens or creates
// one but never through a symbolic link at its name.
class OutputFile {
 public:
  OutputFile() = default;
  ~OutputFile();  // closes it, ignoring errors
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::error_code create(const std::filesystem::path& path);
  // Opens it for writing after its last byte, creating it when absent (a download resumed from its .partial file).
  std::error_code append(const std::filesystem::path& path);
  // All `size` bytes, retrying short writes.
  std::error_code write(const void* data, size_t size);
  // fsync / FlushFileBuffers: the bytes are on the disk when this returns.
  std::error_code flush_to_disk();
  std::error_code close();

 private:
  intptr_t handle_ = -1;
};

// Moves `from` over `to` in one step: a reader sees the old file or the new one, never a mix, and a crash leaves
// one of the two. POSIX: rename(2), then the folder is flushed so the new entry is on the disk. Windows:
// MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH); while another program holds `to` open without
// sharing delete (an antivirus scan, a viewer), the move is retried for up to 10 s before it fails.
std::error_code replace_file(const std::filesystem::path& from, const std::filesystem::path& to);

// Makes `to` a second name of the file `from` (CreateHardLinkW on Windows). Fails where the file system has no
// hard links (FAT32, exFAT, many network shares) and across file systems.
std::error_code hard_link(const std::filesystem::path& from, const std::filesystem::path& to);

// The user's home folder, where per-user caches live: $HOME (else the account's entry) on POSIX, %USERPROFILE% on
// Windows (as Python's os.path.expanduser, which PyTorch's hub cache follows). Empty when none is known.
std::filesystem::path home_folder();

// The user's folder for caches: $XDG_CACHE_HOME, else ~/.cache (POSIX); %LOCALAPPDATA%, else
// %USERPROFILE%\AppData\Local (Windows). Empty when none is known.
std::filesystem::path user_cache_folder();

// Removes a file; one that is already gone is not an error.
std::error_code remove_file(const std::filesystem::path& path);

// The whole file into `bytes`. Windows opens it sharing read, write and delete, so reading a checkpoint never
// blocks the training run that replaces it.
std::error_code read_file(const std::filesystem::path& path, std::vector<uint8_t>& bytes);

// A file kept open for reads at any offset, from several threads at once (a WebDataset shard: one open for all its
// samples). POSIX: pread(2). Windows: ReadFile with the offset in an OVERLAPPED, over a handle that shares read, write
// and delete (still, Windows refuses to replace a file while it is open). Each read copies from the page cache once,
// as read() of a whole small file does, with no page faults on a mapping.
//   PositionalFile shard;
//   if (auto ec = shard.open(path)) fail(ec);  ... shard.read_at(offset, size, buffer);
class PositionalFile {
 public:
  PositionalFile() = default;
  ~PositionalFile();
  PositionalFile(const PositionalFile&) = delete;
  PositionalFile& operator=(const PositionalFile&) = delete;

  std::error_code open(const std::filesystem::path& path);
  uint64_t size() const { return size_; }
  // Exactly `size` bytes from `offset` (retrying short reads); the file ending first is an error (io_error).
  std::error_code read_at(uint64_t offset, size_t size, uint8_t* out) const;

 private:
  intptr_t handle_ = -1;
  uint64_t size_ = 0;
};

// An exclusive advisory lock on a file, which every holder of a FileLock on the same file respects (other
// processes, and other FileLocks in this one), held until unlock() or destruction; the system releases it when its
// process ends, a crash or a kill included, so a lock is never left behind. The file is created when absent (empty,
// never removed). POSIX: flock(LOCK_EX | LOCK_NB) on a descriptor of its own (Linux carries it to the server on NFS).
// Windows: LockFileEx(LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY) on its first byte.
//   FileLock lock;
//   bool held = false;
//   if (auto ec = lock.try_lock(path, held)) fail(ec);  // the file could not be opened or locked at all
//   if (!held) ...another holds it: try again later
class FileLock {
 public:
  FileLock() = default;
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // `held` is true when this call took the lock, false when another holds it (not an error).
  std::error_code try_lock(const std::filesystem::path& path, bool& held);
  void unlock();

 private:
  intptr_t handle_ = -1;
};

// A whole file mapped read-only into memory: its bytes are read from the disk as they are touched and count as
// the page cache's, not this process's heap, so a checkpoint of any size can be checked and then loaded without
// being held twice. POSIX: mmap(PROT_READ, MAP_PRIVATE); a file replaced by rename (as every writer here
// replaces files) keeps its old bytes in the mapping, while one truncated in place by another program would fault.
// Windows: CreateFileMappingW(PAGE_READONLY) over a handle that shares read, write and delete; while mapped, a
// replace of the file may be refused, which replace_file waits out. An empty file maps to no bytes.
//   MappedFile file;
//   if (auto ec = file.open(path)) fail(ec);  ... use(file.data(), file.size());
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::error_code open(const std::filesystem::path& path);
  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace trainer
