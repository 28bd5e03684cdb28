// A remote shard's listing, kept in the cache folder (data.shards.cache) once the shard was read through for want of
// an index, so that later starts read the listing instead of the whole shard again: its samples' index and the bytes
// of the members the read kept (the labels). A listing belongs to one version of the shard: its name digests the
// address with the shard's validators (size, ETag, Last-Modified; http_range.hpp), so a shard replaced on its server
// is read through again, and a server that sends no validators gets no listing. The file is a tar: a member "index"
// (DALI's text, as beside a shard), then a member per kept member, named by its offset in the shard. It is written
// atomically and read with the tar and index readers' checks; one that fails them is not used (the shard is read
// through and its listing written again), so a listing only ever saves a read.
//   const fs::path path = shard_listing_path(cache, address, http_validators(address));
//   if (auto listing = read_shard_listing(path, address, size)) use(listing->samples, listing->kept);
//   write_shard_listing(path, samples, kept);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainer/data/sources/shard_index.hpp"
#include "trainer/util/http_range.hpp"

namespace trainer {

struct ShardListing {
  std::vector<IndexedSample> samples;
  std::map<uint64_t, std::string> kept;  // kept members' bytes, by offset in the shard
};

// "<cache>/<digest of the address and its validators>-train-000001.listing".
std::filesystem::path shard_listing_path(const std::filesystem::path& cache, const std::string& address,
                                         const HttpValidators& validators);

// The listing at `path` of the shard `location` of `shard_size` bytes; nothing when there is none or it fails a check
// (not a tar, no index, an index past the shard's end, a kept member not at an offset the index lists).
std::optional<ShardListing> read_shard_listing(const std::filesystem::path& path, const std::string& location,
                                               uint64_t shard_size);

// Writes the listing (atomically). A listing only saves a later start a read: false, not an error, when it cannot be
// written (a read-only folder, a full disk).
bool write_shard_listing(const std::filesystem::path& path, const std::vector<IndexedSample>& samples,
                         const std::map<uint64_t, std::string>& kept);

}  // namespace trainer
