// Arithmetic on sizes read from files (tensor shapes, offsets), checked for overflow in standard C++: MSVC has no
// __builtin_mul_overflow, and a hostile file must not wrap a size around.
//   uint64_t bytes = 0;
//   if (multiply_overflows(elements, element_size, bytes)) throw ...;
#pragma once

#include <cstdint>
#include <limits>

namespace trainer {

// a * b into `out`; true (out untouched) when the product does not fit in 64 bits.
inline bool multiply_overflows(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
  out = a * b;
  return false;
}

// a + b into `out`; true (out untouched) when the sum does not fit in 64 bits.
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t& out) {
  if (b > std::numeric_limits<uint64_t>::max() - a) return true;
  out = a + b;
  return false;
}

}  // namespace trainer
