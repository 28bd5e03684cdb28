// Where each sample of a WebDataset shard is: its members grouped by key (webdataset's base_plus_ext: the name up
// to the first dot after the last slash; members of one sample sit next to each other), and the index file that
// saves reading the tar, in DALI's text format so DALI and the trainer share one:
//   v1.2 <samples>
//   <ext> <offset> <size> <name> [<ext> <offset> <size> <name> ...]     one line per sample; offset of the bytes
// (v1.1 lines lack the names.)
//   auto samples = group_samples(list_tar_members(data, size, shard));
//   write(shard_index_path(shard), format_shard_index(samples));
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/sources/tar_members.hpp"

namespace trainer {

struct IndexedMember {
  std::string ext;  // after the key's dot: "jpg", "cls", "seg.png"
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct IndexedSample {
  std::string key;
  std::vector<IndexedMember> members;

  // The member with this extension, or null.
  const IndexedMember* find(std::string_view ext) const;
  // The first member an image folder would take as an image (jpg, jpeg, png, webp, bmp, tif, ...), or null.
  const IndexedMember* image() const;
};

// Consecutive members with one key form a sample; names without a key (".hidden", "dir/") are passed over, as
// DALI's index writer does.
std::vector<IndexedSample> group_samples(const std::vector<TarMember>& members);

// Throws DataError naming `where` (and the line) for an unknown version, a count that differs from the lines, a
// malformed line, an extension twice in a sample, or bytes past `shard_size` (0: the size is not known).
std::vector<IndexedSample> parse_shard_index(std::string_view text, const std::string& where, uint64_t shard_size);

// The v1.2 text of `samples`.
std::string format_shard_index(const std::vector<IndexedSample>& samples);

// Writes `text` as the index of the local shard at `shard` (atomically), when the folder lets it: an index only saves
// a later opening a read of the tar, so a read-only folder or a full disk is not an error. True when it was written.
bool write_shard_index_beside(const std::string& shard, const std::string& text);

// DALI's name for a shard's index: the shard's name up to the first dot of its file name, then ".idx"
// ("train-000001.tar" -> "train-000001.idx"); a location may be a path or an address.
std::string shard_index_location(const std::string& shard);

}  // namespace trainer
