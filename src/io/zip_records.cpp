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

std::optional<std::string> first_damaged_record(const char* data, size_t size) {
  const std::string_view b(data, size);
  // The end-of-central-directory record: the last 22 bytes, or before them a comment of up to 64 KiB.
  size_t end = std::string::npos;
  for (size_t i = b.size() >= 22 ? b.size() - 22 : 0; b.size() >= 22; --i) {
    if (le(b, i, 4) == 0x06054b50) {
      end = i;
      break;
    }
    if (i == 0 || b.size() - i > 22 + 65535) break;
  }
  if (end == std::string::npos) return "no zip directory (not an archive, or cut short)";
  const uint32_t count = le(b, end + 10, 2), directory = le(b, end + 16, 4);
  if (count == 0xFFFFu || directory == 0xFFFFFFFFu) return std::nullopt;  // zip64: left to the reader
  size_t at = directory;
  for (uint32_t n = 0; n < count; ++n) {
    if (at + 46 > b.size() || le(b, at, 4) != 0x02014b50) return "damaged zip directory";
    const uint32_t crc = le(b, at + 16, 4), stored = le(b, at + 20, 4), method = le(b, at + 10, 2);
    const uint32_t name_length = le(b, at + 28, 2), extra = le(b, at + 30, 2), comment = le(b, at + 32, 2);
    const uint32_t local = le(b, at + 42, 4);
    if (at + 46 + name_length > b.size()) return "damaged zip directory";
    const std::string name(b.data() + at + 46, name_length);
    at += 46 + name_length + extra + comment;
    // Records over 4 GiB (zip64) and compressed ones are left to the reader.
    if (stored == 0xFFFFFFFFu || local == 0xFFFFFFFFu || method != 0) continue;
    if (local + 30 > b.size() || le(b, local, 4) != 0x04034b50) return "record " + name + " has a damaged header";
    const size_t begin = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
    if (begin + stored > b.size()) return "record " + name + " is cut short";
    const auto actual =
        static_cast<uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(b.data() + begin), static_cast<uInt>(stored)));
    if (actual != crc) return "record " + name + " does not match its CRC-32";
  }
  return std::nullopt;
}

}  // namespace trainer
