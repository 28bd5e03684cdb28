#include "trainer/io/zip_records.hpp"

#include <zlib.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "trainer/util/text.hpp"

namespace trainer {

namespace {

uint64_t le(std::string_view b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

// Where the directory is and how many records it lists, as LibTorch's zip reader (miniz) takes them: from the
// zip64 end record whenever its locator sits before the end record (LibTorch and PyTorch write one into every
// archive), from the end record otherwise. Reading the other would let a file show us one directory and LibTorch
// another (a 2,290-byte checkpoint whose end record listed 0 records, its zip64 record 7).
struct Directory {
  uint64_t offset = 0, size = 0, count = 0;
};
std::optional<Directory> find_directory(std::string_view b, size_t end, std::string& problem) {
  Directory d{le(b, end + 16, 4), le(b, end + 12, 4), le(b, end + 10, 2)};
  uint64_t on_this_disk = le(b, end + 8, 2);
  if (end >= 20 && le(b, end - 20, 4) == 0x07064b50) {
    const uint64_t at = le(b, end - 20 + 8, 8);
    if (at > end - 20 || end - 20 - at < 56 || le(b, at, 4) != 0x06064b50) {
      problem = "damaged zip64 directory record";
      return std::nullopt;
    }
    on_this_disk = le(b, at + 24, 8);
    d = {le(b, at + 48, 8), le(b, at + 40, 8), le(b, at + 32, 8)};
  }
  if (d.count != on_this_disk || d.offset > b.size() || d.size > b.size() - d.offset) {
    problem = "damaged zip directory";
    return std::nullopt;
  }
  return d;
}

// A directory entry's 32-bit sizes and offset, those marked 0xFFFFFFFF taken from its zip64 extra field (id 1:
// the inflated size, the stored size, the local header's offset, each present only where marked), as the reader
// takes them.
bool read_zip64_fields(std::string_view extra, uint64_t& inflated, uint64_t& stored, uint64_t& local) {
  for (size_t at = 0; at + 4 <= extra.size();) {
    const uint64_t id = le(extra, at, 2), length = le(extra, at + 2, 2);
    if (at + 4 + length > extra.size()) return false;
    if (id == 1) {
      std::string_view field = extra.substr(at + 4, length);
      for (uint64_t* value : {&inflated, &stored, &local}) {
        if (*value != 0xFFFFFFFFu) continue;
        if (field.size() < 8) return false;
        *value = le(field, 0, 8);
        field.remove_prefix(8);
      }
      return true;
    }
    at += 4 + length;
  }
  return false;
}

// The directory walked for one of two questions: the damage (CRCs included), or (when `records` is given) each
// record's bytes, its structure checked alike.
std::vector<ZipDamage> walk_directory(const char* data, size_t size, std::vector<ZipRecord>* records) {
  const std::string_view b(data, size);
  std::vector<ZipDamage> damaged;
  const auto structure = [](std::string what) { return std::vector<ZipDamage>{{"", std::move(what)}}; };
  // The end-of-central-directory record: the last 22 bytes, or before them a comment of up to 64 KiB.
  size_t end = std::string::npos;
  for (size_t i = b.size() >= 22 ? b.size() - 22 : 0; b.size() >= 22; --i) {
    if (le(b, i, 4) == 0x06054b50) {
      end = i;
      break;
    }
    if (i == 0 || b.size() - i > 22 + 65535) break;
  }
  if (end == std::string::npos) return structure("no zip directory (not an archive, or cut short)");
  std::string problem;
  const auto directory = find_directory(b, end, problem);
  if (!directory) return structure(problem);
  size_t at = directory->offset;
  // LibTorch's reader finds a record by its name with A-Z lowered (miniz's locate_file without its case-sensitive
  // flag), so `data.PKL` is the record it reads as `data.pkl`, and of two names that fold alike it reads whichever
  // its sorted directory gives first: our checks could walk one and LibTorch read the other.
  std::unordered_set<std::string> folded_names;
  for (uint64_t n = 0; n < directory->count; ++n) {
    if (at + 46 > b.size() || le(b, at, 4) != 0x02014b50) return structure("damaged zip directory");
    const uint64_t crc = le(b, at + 16, 4), method = le(b, at + 10, 2);
    uint64_t stored = le(b, at + 20, 4), inflated = le(b, at + 24, 4), local = le(b, at + 42, 4);
    const uint64_t name_length = le(b, at + 28, 2), extra = le(b, at + 30, 2), comment = le(b, at + 32, 2);
    if (at + 46 + name_length + extra > b.size()) return structure("damaged zip directory");
    const std::string name(b.data() + at + 46, name_length);
    if ((stored == 0xFFFFFFFFu || inflated == 0xFFFFFFFFu || local == 0xFFFFFFFFu) &&
        !read_zip64_fields(b.substr(at + 46 + name_length, extra), inflated, stored, local))
      return structure("record " + name + " has a damaged zip64 field");
    at += 46 + name_length + extra + comment;
    if (!folded_names.insert(ascii_lower(name)).second)
      return structure("record " + name + " is named twice (names compare without regard to case)");
    // The reader allocates a record's declared size before it reads a byte: a stored record's must be its size,
    // and a deflated one's no more than deflate's largest ratio (1032:1) allows, so that a few bytes of directory
    // cannot ask for gigabytes.
    if (method == 0 && inflated != stored)
      return structure("record " + name + " declares " + std::to_string(inflated) + " bytes but stores " +
                       std::to_string(stored));
    // LibTorch and PyTorch store tensors as they are and deflate only code and debug records, a few kilobytes
    // each: a deflated record declaring more than 64 MiB would have the reader allocate up to 1,032 times its
    // stored bytes for nothing an archive holds.
    if (method == 8 && inflated > (uint64_t{64} << 20))
      return structure("record " + name + " declares " + std::to_string(inflated) +
                       " bytes compressed, more than any archive's compressed records");
    if (method == 8 && inflated / 1032 > stored)
      return structure("record " + name + " declares " + std::to_string(inflated) + " bytes inflated from " +
                       std::to_string(stored) + ", more than deflate can give");
    if (method != 0 && method != 8)
      return structure("record " + name + " uses zip compression method " + std::to_string(method));
    if (local > b.size() || b.size() - local < 30 || le(b, local, 4) != 0x04034b50)
      return structure("record " + name + " has a damaged header");
    const uint64_t begin = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
    if (begin > b.size() || stored > b.size() - begin) return structure("record " + name + " is cut short");
    if (records)
      records->push_back({name, method == 8, std::string_view(b.data() + begin, static_cast<size_t>(stored)),
                          static_cast<size_t>(inflated)});
    // Listing the records checks no CRC (damaged_records does): a peek at one record must not read every byte.
    if (records || method != 0) continue;  // a deflated record's CRC is of its inflated bytes: left to the reader
    const auto actual = static_cast<uint32_t>(
        ::crc32_z(0L, reinterpret_cast<const Bytef*>(b.data() + begin), static_cast<size_t>(stored)));
    if (actual != crc) damaged.push_back({name, "record " + name + " does not match its CRC-32"});
  }
  return damaged;
}

}  // namespace

std::vector<ZipDamage> damaged_records(const char* data, size_t size) { return walk_directory(data, size, nullptr); }

std::vector<ZipRecord> zip_records(const char* data, size_t size) {
  std::vector<ZipRecord> records;
  walk_directory(data, size, &records);
  return records;
}

std::optional<std::string> record_contents(const ZipRecord& record, size_t most) {
  if (record.inflated_size > most) return std::nullopt;
  if (!record.deflated) return std::string(record.bytes);
  // Raw deflate, into no more than the declared size: what it inflates to past that is not read.
  std::string out(record.inflated_size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return std::nullopt;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(record.bytes.data()));
  z.avail_in = static_cast<uInt>(record.bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int status = inflate(&z, Z_FINISH);
  const bool whole = status == Z_STREAM_END && z.avail_out == 0;
  inflateEnd(&z);
  if (!whole) return std::nullopt;
  return out;
}

std::optional<std::string> first_damaged_record(const char* data, size_t size) {
  const auto damaged = damaged_records(data, size);
  return damaged.empty() ? std::nullopt : std::optional<std::string>(damaged.front().what);
}

bool is_tensor_data_record(const std::string& name) {
  // LibTorch's archives keep tensor bytes in <archive>/data/<key>; pickles and the version record elsewhere.
  const size_t slash = name.rfind("/data/");
  return slash != std::string::npos && name.find('/', slash + 6) == std::string::npos && name.size() > slash + 6;
}

}  // namespace trainer
