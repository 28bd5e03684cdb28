#include "trainer/platform/read_loop.hpp"

namespace trainer {

std::error_code read_all(size_t size_reported, std::vector<uint8_t>& bytes, const ReadCall& read) {
  bytes.clear();
  bytes.resize(size_reported);
  size_t got = 0;
  uint8_t tail[1 << 16];
  for (;;) {
    const bool inside = got < bytes.size();
    size_t n = 0;
    if (auto ec = read(inside ? bytes.data() + got : tail, inside ? bytes.size() - got : sizeof tail, n)) return ec;
    if (n == 0) break;
    if (!inside) bytes.insert(bytes.end(), tail, tail + n);
    got += n;
  }
  bytes.resize(got);
  return {};
}

}  // namespace trainer
