// Keeps glibc's malloc from returning tensor memory to the kernel after every step. By default large blocks
// are mmap'd and unmapped, and the heap top is trimmed, so each step page-faults its activations and
// gradients in afresh: measured ~25% of a resnet50 CPU step on 2 cores. Fixed thresholds keep the memory for
// reuse; the process's RSS then stays at its peak, which a training run reaches every step anyway.
#pragma once

namespace trainer {

// Call once at startup. Does nothing when the user set MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_
// (their choice wins) or when the C library is not glibc.
void keep_freed_memory_for_reuse();

}  // namespace trainer
