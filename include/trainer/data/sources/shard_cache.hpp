// The local cache of shards that live elsewhere (data.shards.cache): pipe: shards' copies (pipe_shard.hpp), which
// are always made, and copies of http(s) shards up to data.shards.cache_mb, made by one thread in the background
// while training reads the shards by ranges. A copy is the shard's bytes up to its end-of-archive blocks, checked
// against the shard's own index (the same members at the same offsets) before it counts, with its index beside it;
// from then on the shard is read from the disk, this run and every later one. Only where the bytes come from
// changes, never which bytes: a run gives the same weights with or without the cache, whenever its copies finish.
//
// Which shards are kept: the first in list order that fit. The epoch order is a global permutation, so every shard is
// read throughout every epoch and any set of copies serves its share of the reads (a cache of a third of the data
// saves a third of the network reads); keeping the same ones for good, rather than evicting, never fetches a shard
// twice. The limit counts every file in the folder (other runs' copies included); nothing there is ever deleted by
// the trainer.
//
// Copiers take turns: every copier of every process using the folder (the ranks of a machine, the eval split's, a
// second run) copies only while it holds the folder's lock file (kCopyLockName, a FileLock), one shard at a time, so a
// shard is fetched once however many ranks want it: a copier that finds the copy another made uses it, and the limit
// holds with all of them together. The system drops a lock whose process ends, a killed one too.
//   ShardCopier copier(cache_folder, limit_bytes, jobs);   // copies in the background
//   copier.take_news();   // "2 more shard(s) copied into the cache /home/me/.cache/trainer/shards (4 of the 12 ..."
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer/config/config.hpp"
#include "trainer/data/sources/shard_file.hpp"
#include "trainer/data/sources/shard_index.hpp"
#include "trainer/platform/files.hpp"

namespace trainer {

// The file in the cache folder whose FileLock a copier holds while it copies.
inline constexpr const char* kCopyLockName = "copying.lock";

// data.shards.cache, or trainer/shards in the user's cache folder when it is empty (empty when there is none).
std::filesystem::path shard_cache_folder(const ShardsConfig& config);

// A copy's file name in the cache: the first 24 hex digits of the SHA-256 of the address (without its query: a
// presigned address is signed anew, the object stays) or of the command, then the shard's own name for the reader of
// the folder (the last word that names a .tar, up to its first dot, so that DALI's index rule names the index
// "<digest>-train-000001.idx"). `version`, when given, is digested with the address: a name for one version of
// the shard (its listing's, shard_listing.hpp).
std::string shard_copy_name(const std::string& address_or_command, const std::string& version = "");

// Bytes of the regular files directly in `folder` (0 when it does not exist).
uint64_t folder_bytes(const std::filesystem::path& folder);

// A remote shard to copy: the bytes up to its end-of-archive blocks (`bytes`, from its index), and the digest and
// size of its index's text, which the copy's members must give again.
struct ShardCopyJob {
  std::shared_ptr<const ShardFile> shard;
  std::filesystem::path copy;
  uint64_t bytes = 0;
  uint64_t index_bytes = 0;
  std::string index_digest;
};

// The job that copies a remote shard with these samples to `copy` (its path in the cache), or nothing (bytes 0) when
// their index places members past any shard a cache could hold.
ShardCopyJob shard_copy_job(std::shared_ptr<const ShardFile> shard, std::filesystem::path copy,
                            const std::vector<IndexedSample>& samples);

// Copies `job`'s shard and its index into the cache and switches the shard's reads to the copy. When `stop` turns
// true the transfer ends within about a second (HttpOptions::stop) and the copy is dropped. Throws DataError naming
// the shard (the transfer failed or was stopped, the bytes disagree with the index, the copy could not be written).
void copy_remote_shard(const ShardCopyJob& job, const std::atomic<bool>& stop);

class ShardCopier {
 public:
  // Starts one thread copying `jobs` in order, each while the folder stays within `limit` bytes with it.
  ShardCopier(std::filesystem::path folder, uint64_t limit, std::vector<ShardCopyJob> jobs);
  ~ShardCopier();  // stops the copy in progress (its partial file removed) and waits for the thread
  ShardCopier(const ShardCopier&) = delete;
  ShardCopier& operator=(const ShardCopier&) = delete;

  struct Counts {
    size_t copied = 0;   // copies made and in use
    size_t skipped = 0;  // no room left under the limit
    size_t failed = 0;   // transfers or checks that failed (those shards are read by ranges)
    bool finished = false;
    std::string first_failure;
    std::string lock_problem;  // the lock file could not be used: copies went ahead without taking turns
  };
  Counts counts() const;
  size_t jobs() const { return jobs_.size(); }
  // What changed since the last call, for the log: "" when nothing did.
  std::string take_news();

 private:
  void run();
  // Holds the folder's lock in `lock` when this returns true: waits while another holds it, goes on without it when
  // it cannot be taken at all (said once, in lock_problem); false when stopped while waiting.
  bool take_turn(FileLock& lock);

  std::filesystem::path folder_;
  uint64_t limit_;
  std::vector<ShardCopyJob> jobs_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  Counts counts_;
  Counts reported_;
  std::thread thread_;
};

}  // namespace trainer
