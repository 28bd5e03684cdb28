#include "fuzz/fuzz_support.hpp"

#include <zlib.h>

#include <fstream>
#include <random>

namespace trainer::fuzz {

ScratchDir::ScratchDir() {
  std::random_device random;
  path_ =
      std::filesystem::temp_directory_path() / ("trainer-fuzz-" + std::to_string(random()) + std::to_string(random()));
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path ScratchDir::write(const std::string& name, const std::string& bytes) const {
  const std::filesystem::path file = path_ / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file;
}

const ScratchDir& scratch() {
  static const ScratchDir dir;  // one per process, for as long as it runs
  return dir;
}

namespace {

uint32_t le(const std::vector<uint8_t>& b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(b[at + static_cast<size_t>(i)]) << (8 * i);
  return v;
}
void put_le32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

std::vector<uint8_t> with_matching_crcs(const uint8_t* data, size_t size) {
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

std::vector<std::string> split(const uint8_t* data, size_t size, char separator, size_t count) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t at = 0;
  while (parts.size() + 1 < count) {
    const size_t end = all.find(separator, at);
    if (end == std::string::npos) break;
    parts.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  parts.push_back(all.substr(at));
  return parts;
}

}  // namespace trainer::fuzz
