// Edits to a LibTorch archive (a checkpoint, a TorchScript file) as a file crafted on purpose would carry them: its
// CRC-32s made to match its records, so that tests and fuzz targets reach the checks behind our CRC check, and a
// tensor made to reach past its storage.
//   auto edited = with_matching_crcs(bytes.data(), bytes.size());
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
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

// The archive with the first tensor its data.pkl rebuilds given a first stride of 255 (a BININT1 edited in place,
// the CRC-32s made to match), which reaches past its storage when the tensor's first size is 2 or more; empty when
// the pickle is not laid out as LibTorch writes it.
inline std::string with_first_stride_widened(std::string bytes) {
  // GLOBAL torch._utils._rebuild_tensor_v2, MARK, the storage's persistent id ... BINPERSID [BINPUT n],
  // BININT1 0 (the offset), MARK sizes TUPLE, MARK, the first stride.
  size_t at = bytes.find("_rebuild_tensor_v2\n");
  if (at == std::string::npos || (at = bytes.find("tQ", at)) == std::string::npos) return {};
  at += 2;
  if (bytes.compare(at, 1, "q") == 0) at += 2;
  if (bytes.compare(at, 3, std::string("K\0(", 3)) != 0 || (at = bytes.find('t', at + 3)) == std::string::npos ||
      bytes.compare(at + 1, 2, "(K") != 0)
    return {};
  bytes[at + 3] = '\xff';
  const auto edited = with_matching_crcs(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return std::string(edited.begin(), edited.end());
}

}  // namespace trainer::testing
