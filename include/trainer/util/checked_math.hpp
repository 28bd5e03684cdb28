// Arithmetic on sizes read from files (tensor shapes, offsets), checked for overflow in standard C++: MSVC has no
// __builtin_mul_overflow, and a hostile file must not wrap a size around.
//   uint64_t bytes = 0;
//   if (multiply_overflows(elements, element_size, bytes)) throw ...;
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

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

// Whether every element of a strided view (sizes and strides >= 0, as many of each) lies inside a storage of
// `numel` elements, in checked arithmetic: a hostile file's sizes must not wrap the products around and pass (nor
// the view's element count, which with zero strides may exceed the storage's: view_outnumbers_storage).
inline bool strided_view_fits(const std::vector<int64_t>& size, const std::vector<int64_t>& stride, uint64_t offset,
                              uint64_t numel) {
  uint64_t count = 1, last = offset, reach = 0;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == 0) return true;  // no element at all
    if (multiply_overflows(count, static_cast<uint64_t>(size[i]), count) ||
        count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    if (multiply_overflows(static_cast<uint64_t>(size[i] - 1), static_cast<uint64_t>(stride[i]), reach) ||
        add_overflows(last, reach, last))
      return false;
  }
  return last < numel;
}

// Whether a view of `size` holds more elements than its storage of `numel`: a broadcast view (zero strides; a
// 1 KB file whose 50000 x 50000 view of one float becomes 10 GB when made contiguous). No state dict or
// checkpoint saves one. Run after strided_view_fits, whose products did not overflow.
inline bool view_outnumbers_storage(const std::vector<int64_t>& size, uint64_t numel) {
  uint64_t count = 1;
  for (const int64_t s : size)
    if (s == 0 || multiply_overflows(count, static_cast<uint64_t>(s), count)) return s != 0;
  return count > numel;
}

}  // namespace trainer
