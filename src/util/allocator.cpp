#include "trainer/util/allocator.hpp"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainer {

void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_"})
    if (std::getenv(name) != nullptr) return;  // the user tunes glibc themselves
  // No block gets its own mapping, however large: a 224 px float batch of 64 (38 MiB) or a ResNet-50
  // activation would otherwise be mapped, page-faulted in and unmapped again on every step, which costs
  // more than the arithmetic on some machines (a ResNet-50 CPU step took 1.6-1.9x as long). Large blocks now
  // come from the heap (glibc falls back to another arena, or to mmap, when a heap cannot grow).
  ::mallopt(M_MMAP_MAX, 0);
  // Freed memory stays in the heap for the next step instead of being returned and faulted in again.
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace trainer
