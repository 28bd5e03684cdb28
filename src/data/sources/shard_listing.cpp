#include "trainer/data/sources/shard_listing.hpp"

#include <charconv>
#include <string_view>

#include "trainer/data/sources/shard_cache.hpp"
#include "trainer/data/sources/tar_members.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// The members of a listing: the index, then the kept members as a table of "offset size" lines and their bytes end
// to end (one member each would cost a 512-byte header and padding per label).
constexpr const char* kIndexMember = "index";
constexpr const char* kKeptTable = "kept.txt";
constexpr const char* kKeptBytes = "kept.bin";
constexpr uint64_t kMostKeptBytes = 4096;  // as a read-through keeps them

std::string tar_member(const std::string& name, const std::string& bytes) {
  return ustar_header(name, bytes.size()) + bytes + std::string(tar_padding(bytes.size()), '\0');
}

bool read_number(std::string_view text, uint64_t& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// The kept members from their table and bytes; false when they do not add up or one is not a member the index lists
// at that offset with that size.
bool read_kept(std::string_view table, std::string_view bytes, const std::vector<IndexedSample>& samples,
               std::map<uint64_t, std::string>& kept) {
  std::map<uint64_t, uint64_t> listed;  // offset -> size of every member the index lists
  for (const IndexedSample& s : samples)
    for (const IndexedMember& m : s.members) listed[m.offset] = m.size;
  uint64_t at = 0;
  while (!table.empty()) {
    const size_t end = table.find('\n');
    if (end == std::string_view::npos) return false;
    const std::string_view line = table.substr(0, end);
    table.remove_prefix(end + 1);
    const size_t space = line.find(' ');
    uint64_t offset = 0, size = 0;
    if (space == std::string_view::npos || !read_number(line.substr(0, space), offset) ||
        !read_number(line.substr(space + 1), size) || size > kMostKeptBytes || size > bytes.size() - at)
      return false;
    const auto it = listed.find(offset);
    if (it == listed.end() || it->second != size || kept.count(offset)) return false;
    kept[offset] = std::string(bytes.substr(at, size));
    at += size;
  }
  return at == bytes.size();
}

}  // namespace

fs::path shard_listing_path(const fs::path& cache, const std::string& address, const HttpValidators& validators) {
  std::string name = shard_copy_name(address, validators.text());
  return cache / (name.substr(0, name.size() - 4) + ".listing");  // "<digest>-train-000001.tar" -> ".listing"
}

std::optional<ShardListing> read_shard_listing(const fs::path& path, const std::string& location, uint64_t shard_size) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  MappedFile file;  // mapped, not read: a listing that is not one costs no memory for its size
  if (file.open(path)) return std::nullopt;
  const auto* data = reinterpret_cast<const uint8_t*>(file.data());
  try {
    std::map<std::string, std::string_view> members;
    for (const TarMember& m : list_tar_members(data, file.size(), path.string()))
      if (!members.emplace(m.name, std::string_view(reinterpret_cast<const char*>(data) + m.offset, m.size)).second)
        return std::nullopt;  // a name twice
    if (members.size() != 3 || !members.count(kIndexMember) || !members.count(kKeptTable) || !members.count(kKeptBytes))
      return std::nullopt;
    ShardListing listing;
    listing.samples =
        parse_shard_index(members[kIndexMember], location + " (its listing " + path.string() + ")", shard_size);
    if (!read_kept(members[kKeptTable], members[kKeptBytes], listing.samples, listing.kept)) return std::nullopt;
    return listing;
  } catch (const DataError&) {
    return std::nullopt;
  }
}

bool write_shard_listing(const fs::path& path, const std::vector<IndexedSample>& samples,
                         const std::map<uint64_t, std::string>& kept) {
  std::string table, bytes;
  for (const auto& [offset, member] : kept) {
    table += std::to_string(offset) + " " + std::to_string(member.size()) + "\n";
    bytes += member;
  }
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);  // the cache folder, on first use
  try {
    write_text_atomically(path, tar_member(kIndexMember, format_shard_index(samples)) + tar_member(kKeptTable, table) +
                                    tar_member(kKeptBytes, bytes) + std::string(1024, '\0'));
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace trainer
