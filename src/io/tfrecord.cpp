#include "trainer/io/tfrecord.hpp"

#include <array>
#include <fstream>
#include <iterator>

#include "trainer/util/error.hpp"

namespace trainer {

namespace {

constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kReflectedPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

uint64_t read_le(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return value;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  append_le(out, payload.size(), 8);
  append_le(out, masked_crc32c(out.data(), 8), 4);
  out.append(payload);
  append_le(out, masked_crc32c(payload.data(), payload.size()), 4);
  return out;
}

std::vector<std::string> read_tfrecords(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("cannot read " + file.string(), 1);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (bytes.size() - at >= 12) {
    const uint64_t length = read_le(bytes.data() + at, 8);
    if (masked_crc32c(bytes.data() + at, 8) != read_le(bytes.data() + at + 8, 4))
      throw Error(file.string() + ": bad length CRC at byte " + std::to_string(at), 1);
    // A torn last record; a length near 2^64 must not wrap `length + 4` around and pass.
    if (bytes.size() - at - 12 < 4 || length > bytes.size() - at - 12 - 4) break;
    const char* payload = bytes.data() + at + 12;
    if (masked_crc32c(payload, length) != read_le(payload + length, 4))
      throw Error(file.string() + ": bad data CRC at byte " + std::to_string(at), 1);
    records.emplace_back(payload, length);
    at += 12 + length + 4;
  }
  return records;
}

}  // namespace trainer
