// Counter-based randomness: a value is a pure function of its inputs (seed, epoch, index, ...), so data
// order and augmentation do not depend on thread scheduling and resume exactly.
#pragma once

#include <cstdint>

namespace trainer {

// SplitMix64's finaliser: a fast, well-mixed 64-bit hash.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t hash_combine(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b)); }

// A tiny generator over mix64 for loops that need a stream of numbers from one seed.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_++); }
  // Uniform in [0, bound) without modulo bias worth caring about for bound << 2^64.
  uint64_t below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
  }

 private:
  uint64_t state_;
};

// Uniform in [0, 1): the top 53 bits of the next value.
inline double uniform01(SplitMix64& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

}  // namespace trainer
