// One WebDataset shard's bytes: a local file kept open and read at offsets (one open for all its samples: a sample
// costs one pread from the page cache, where a folder's image costs an open, a read and a close), or an http(s)
// address read by ranges.
//   ShardFile shard("data/train-000001.tar");
//   for (const IndexedSample& s : shard.samples(/*write_index=*/true)) ...
//   shard.read(member.offset, member.size, bytes);
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainer/data/sources/shard_index.hpp"
#include "trainer/platform/files.hpp"

namespace trainer {

// A remote shard read through for want of an index: `keep_suffix` (".cls") asks for the bytes of the small members
// whose names end with it (the labels, so that they need no range request each); `listings`, when not empty, is the
// folder where the read's listing is kept for later starts, which read it instead of the shard when the shard is
// the same version (shard_listing.hpp). What the read gave comes back.
struct ReadThrough {
  std::string keep_suffix;
  std::filesystem::path listings;
  bool happened = false;                 // the shard had no index and was read through
  bool listed = false;                   // the shard had no index and an earlier start's listing was read instead
  std::map<uint64_t, std::string> kept;  // the bytes of the members asked for (at most 4096 each), by offset
};

class ShardFile {
 public:
  // Opens a local shard (DataError naming it when it cannot be); an address is not fetched yet. `local_copy`: the
  // file that holds the shard named `location` (a pipe: shard's copy, pipe_shard.hpp), read as a local shard and
  // named by `location` in messages.
  explicit ShardFile(std::string location, std::string local_copy = "");

  const std::string& location() const { return location_; }
  bool remote() const { return remote_; }
  // An address whose reads still go over the network (no local copy in use yet).
  bool read_remotely() const { return remote_ && copy_.load(std::memory_order_acquire) == nullptr; }
  // A local shard's size; 0 for an address.
  uint64_t size() const;

  // `size` bytes from `offset` into `out`. Throws DataError naming the shard and the offset (past the end of a local
  // shard; an address that fails after its retries, or at once without `retry`).
  void read(uint64_t offset, uint64_t size, std::vector<uint8_t>& out, bool retry = true) const;

  // The samples, from the shard's index (shard_index_location) when it has one, else from its tar headers: a local
  // shard mapped for the one pass, an address without an index (404, 403 or 410 for it) read through once, its
  // members' bytes passed over (`through`, when given, says so and gets the members it asks for). `write_index`: a
  // local index made from the tar is written beside the shard, when the folder lets it. Throws DataError naming the
  // shard or its index.
  std::vector<IndexedSample> samples(bool write_index, ReadThrough* through = nullptr) const;

  // From now on an address's reads come from `local_copy`, a file that holds the same bytes (checked by the caller:
  // shard_cache.hpp), while other threads read. Once only; throws DataError when the copy cannot be opened.
  void use_copy(const std::string& local_copy) const;

 private:
  void read_local(const PositionalFile& file, uint64_t offset, uint64_t size, std::vector<uint8_t>& out) const;
  std::vector<IndexedSample> read_remote_tar(ReadThrough* through) const;

  std::string location_;
  std::string path_;  // the file read: the location, or its local copy
  bool remote_ = false;
  std::unique_ptr<PositionalFile> file_;
  // An address's local copy, set once while the shard is being read (mutable: which bytes a read gives never changes).
  mutable std::unique_ptr<PositionalFile> copy_file_;
  mutable std::atomic<const PositionalFile*> copy_{nullptr};
};

}  // namespace trainer
