// SHA-256 (FIPS 180-4), streamed: what torch.hub checks a downloaded weights file against (the hex digits after
// the last '-' of its published name are the start of the file's SHA-256).
//   Sha256 h; h.update(bytes, n); ...; std::string hex = h.hex_digest();
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace trainer {

// Whether `text` is a SHA-256 written out: 64 hex digits, either case (sha256sum prints lower, Get-FileHash upper).
bool is_sha256_hex(const std::string& text);

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  // The 64 lowercase hex digits of everything updated so far; the object is spent afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  size_t used_ = 0;      // bytes in block_
  uint64_t length_ = 0;  // bytes updated
};

}  // namespace trainer
