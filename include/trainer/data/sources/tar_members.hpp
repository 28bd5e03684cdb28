// The regular files of a tar archive (a WebDataset shard) and where their bytes are, read from the archive's
// 512-byte headers: POSIX ustar (with its name prefix), GNU (long names in 'L' records, sizes in base 256) and pax
// (path and size records). Links, folders and other entries are passed over, as webdataset and DALI do.
//   for (const TarMember& m : list_tar_members(data, size, "train-000000.tar")) use(m.name, data + m.offset, m.size);
//   std::string block = ustar_header("000001.jpg", bytes.size());   // `trainer shards make`
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trainer {

struct TarMember {
  std::string name;
  uint64_t offset = 0;  // of the member's bytes, after its header
  uint64_t size = 0;
};

// Throws DataError naming `where` and the header's offset for a checksum that does not match (not a tar, or a
// damaged one), a malformed number field, a header cut short, a member whose bytes run past the end (a truncated
// file), or a GNU long name or pax record over 1 MiB. The archive may end with its two zero blocks or, as Python's
// tarfile accepts, at a header boundary.
std::vector<TarMember> list_tar_members(const uint8_t* data, uint64_t size, const std::string& where);

// The same list from an archive fed a piece at a time (a remote shard without its index, read through once): only
// headers and GNU/pax records are kept, never a member's bytes. list_tar_members is this fed in one piece, so both
// list the same members and refuse the same archives with the same errors.
//   TarMemberStream tar("https://host/train-000001.tar");
//   while (!tar.done() && (n = receive(buffer))) tar.feed(buffer, n);
//   std::vector<TarMember> members = tar.finish();
class TarMemberStream {
 public:
  // `keep_suffix` (".cls"): the bytes of regular members whose names end with it and that hold at most `keep_most`
  // bytes are kept (kept()), so a label needs no second read.
  explicit TarMemberStream(std::string where, std::string keep_suffix = "", uint64_t keep_most = 0)
      : where_(std::move(where)), keep_suffix_(std::move(keep_suffix)), keep_most_(keep_most) {}
  // Throws DataError as list_tar_members does.
  void feed(const uint8_t* data, size_t size);
  // The end-of-archive blocks were read: nothing after them is needed.
  bool done() const { return done_; }
  // At the end of the bytes: the members, or DataError for a header or member cut short.
  std::vector<TarMember> finish() const;
  // The kept members' bytes, by the offset of their bytes in the archive.
  const std::map<uint64_t, std::string>& kept() const { return kept_; }

 private:
  void begin_member();  // header_ holds a whole header
  void end_member();    // a member's bytes have all been fed

  std::string where_;
  std::string keep_suffix_;
  uint64_t keep_most_ = 0;
  bool keeping_ = false;  // the current member's bytes are kept
  std::map<uint64_t, std::string> kept_;
  std::vector<TarMember> members_;
  uint64_t at_ = 0;         // bytes fed so far
  uint64_t header_at_ = 0;  // where the current member's header began
  std::string header_;      // the header being gathered (under 512 bytes between feeds)
  uint64_t body_left_ = 0, padding_left_ = 0, member_size_ = 0;
  char type_ = 0;
  std::string record_;     // a GNU 'L' or pax 'x' member's bytes, gathered
  std::string long_name_;  // from a GNU 'L' or pax record, for the next header
  uint64_t pax_size_ = 0;
  bool has_pax_size_ = false;
  bool done_ = false;
};

// One ustar header for a regular file of `size` bytes with fixed metadata (mode 0644, owner 0, time 0), so the same
// members make the same bytes. `name` is at most 100 bytes. Throws DataError when it does not fit.
std::string ustar_header(const std::string& name, uint64_t size);

// The padding after a member of `size` bytes, up to the next 512-byte block.
inline uint64_t tar_padding(uint64_t size) { return (512 - size % 512) % 512; }

}  // namespace trainer
