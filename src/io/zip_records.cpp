#include "trainer/io/zip_records.hpp"

#include <zlib.h>

#include <cstdint>
#include <string_view>

namespace trainer {

namespace {

uint32_t le(std::string_view b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

}  // namespace

namespace {

// The directory walked once for both questions: the damage, and (when `records` is given) each stored record's bytes.
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
  const uint32_t count = le(b, end + 10, 2), directory = le(b, end + 16, 4);
  if (count == 0xFFFFu || directory == 0xFFFFFFFFu) return {};  // zip64: left to the reader
  size_t at = directory;
  for (uint32_t n = 0; n < count; ++n) {
    if (at + 46 > b.size() || le(b, at, 4) != 0x02014b50) return structure("damaged zip directory");
    const uint32_t crc = le(b, at + 16, 4), stored = le(b, at + 20, 4), method = le(b, at + 10, 2);
    const uint32_t inflated = le(b, at + 24, 4);
    const uint32_t name_length = le(b, at + 28, 2), extra = le(b, at + 30, 2), comment = le(b, at + 32, 2);
    const size_t local = le(b, at + 42, 4);  // in size_t: local + 30 must not wrap 32 bits around
    if (at + 46 + name_length > b.size()) return structure("damaged zip directory");
    const std::string name(b.data() + at + 46, name_length);
    at += 46 + name_length + extra + comment;
    // The reader allocates a record's declared size before it reads a byte: a stored record's must be its size,
    // and a deflated one's no more than deflate's largest ratio (1032:1) allows, so that a few bytes of directory
    // cannot ask for gigabytes.
    if (method == 0 && inflated != stored && inflated != 0xFFFFFFFFu)
      return structure("record " + name + " declares " + std::to_string(inflated) + " bytes but stores " +
                       std::to_string(stored));
    if (method == 8 && stored != 0xFFFFFFFFu && inflated != 0xFFFFFFFFu && inflated / 1032 > stored)
      return structure("record " + name + " declares " + std::to_string(inflated) + " bytes inflated from " +
                       std::to_string(stored) + ", more than deflate can give");
    if (method != 0 && method != 8)
      return structure("record " + name + " uses zip compression method " + std::to_string(method));
    // Records over 4 GiB (zip64) are left to the reader.
    if (stored == 0xFFFFFFFFu || inflated == 0xFFFFFFFFu || local == 0xFFFFFFFFu) continue;
    if (local + 30 > b.size() || le(b, local, 4) != 0x04034b50)
      return structure("record " + name + " has a damaged header");
    const size_t begin = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
    if (begin + stored > b.size()) return structure("record " + name + " is cut short");
    if (records) records->push_back({name, method == 8, std::string_view(b.data() + begin, stored), inflated});
    if (method != 0) continue;  // a deflated record's CRC is of its inflated bytes: left to the reader
    const auto actual =
        static_cast<uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(b.data() + begin), static_cast<uInt>(stored)));
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
