// A zip archive's CRC-32s made to match its records, as a file crafted on purpose would have them: tests and fuzz
// targets that edit a checkpoint's bytes reach the checks behind our CRC check with it.
//   auto edited = with_matching_crcs(bytes.data(), bytes.size());
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainer::testing {

namespace zip_detail {

inline uint32_t le(const std::vector<uint8_t>& b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(b[at + static_cast<size_t>(i)]) << (8 * i);
  return v;
}
inline void put_le32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace zip_detail

// The input with every stored record's CRC-32 (in the directory and in the record's own header) made to match its
// bytes. Bytes that are not a zip come back unchanged.
inline std::vector<uint8_t> with_matching_crcs(const uint8_t* data, size_t size) {
  using zip_detail::le, zip_detail::put_le32;
  std::vector<uint8_t> b(data, data + size);
  if (b.size() < 22) return b;
  size_t end = b.size() - 22;
  while (le(b, end, 4) != 0x06054b50) {  // the end-of-directory record, searched back as a reader does
    if (end == 0 || b.size() - end > 22 + 65535) return b;
    --end;
  }
  size_t at = le(b, end + 16, 4);
  for (uint32_t n = 0, count = le(b, end + 10, 2); n < count; ++n) {
    if (at + 46 > b.size() || le(b, at, 4) != 0x02014b50) break;
    const size_t stored = le(b, at + 20, 4), local = le(b, at + 42, 4);
    const size_t next = at + 46 + le(b, at + 28, 2) + le(b, at + 30, 2) + le(b, at + 32, 2);
    if (le(b, at + 10, 2) == 0 && local + 30 <= b.size() && le(b, local, 4) == 0x04034b50) {
      const size_t begin = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
      if (begin + stored <= b.size()) {
        const auto crc = static_cast<uint32_t>(::crc32(0L, b.data() + begin, static_cast<uInt>(stored)));
        put_le32(b, at + 16, crc);
        put_le32(b, local + 14, crc);
      }
    }
    at = next;
  }
  return b;
}

}  // namespace trainer::testing
