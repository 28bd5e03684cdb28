// The regular files of a tar archive (a WebDataset shard) and where their bytes are, read from the archive's
// 512-byte headers: POSIX ustar (with its name prefix), GNU (long names in 'L' records, sizes in base 256) and pax
// (path and size records). Links, folders and other entries are passed over, as webdataset and DALI do.
//   for (const TarMember& m : list_tar_members(data, size, "train-000000.tar")) use(m.name, data + m.offset, m.size);
//   std::string block = ustar_header("000001.jpg", bytes.size());   // `trainer shards make`
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

struct TarMember {
  std::string name;
  uint64_t offset = 0;  // of the member's bytes, after its header
  uint64_t size = 0;
};

// Throws DataError naming `where` and the header's offset for a checksum that does not match (not a tar, or a
// damaged one), a malformed number field, a header cut short, or a member whose bytes run past the end (a truncated
// file). The archive may end with its two zero blocks or, as Python's tarfile accepts, at a header boundary.
std::vector<TarMember> list_tar_members(const uint8_t* data, uint64_t size, const std::string& where);

// One ustar header for a regular file of `size` bytes with fixed metadata (mode 0644, owner 0, time 0), so the same
// members make the same bytes. `name` is at most 100 bytes. Throws DataError when it does not fit.
std::string ustar_header(const std::string& name, uint64_t size);

// The padding after a member of `size` bytes, up to the next 512-byte block.
inline uint64_t tar_padding(uint64_t size) { return (512 - size % 512) % 512; }

}  // namespace trainer
