// The resampler's x86-64 SIMD kernels (resample.cpp) and the CPU check that picks them, for every compiler:
// GCC and Clang compile each kernel for the ISA its target attribute names, MSVC (which takes intrinsics of any
// ISA without a flag) as it is, and the CPU is asked once (__builtin_cpu_supports, or __cpuid and _xgetbv on
// MSVC). Each kernel does what it can and returns how far it got; the caller finishes in plain C++, with the same
// integer arithmetic, so every path gives the same bytes. Elsewhere than x86-64 the features are all false.
// Only C headers here: the Windows lane also checks this file in MSVC's dialect (clang-cl mode).
//   if (x86_features().avx2) done = accumulate_row_avx2(acc, row, k, n);
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace trainer {

struct X86Features {
  bool sse41 = false, avx2 = false;
};
const X86Features& x86_features();

// Pillow's horizontal pass for three channels, one row: output pixel xx is sum(in[first[xx] + t] * w[t]) over
// its count[xx] taps (weights ksize apart per pixel), plus a half, shifted by `precision_bits`, clamped. Reads one
// byte past a pixel's last tap, so it stops at the first output pixel whose taps reach `safe_w`; returns that
// index (the caller does the rest). SSE4.1.
int horizontal_row3_sse41(const uint8_t* in, const int* first, const int* count, const int32_t* weights, int ksize,
                          int out_w, int safe_w, uint8_t* out, int precision_bits);

// acc[j] += row[j] * k over whole groups of 8; returns the count done (a multiple of 8). AVX2.
size_t accumulate_row_avx2(int32_t* acc, const uint8_t* row, int32_t k, size_t n);

// out[j] = clamp(acc[j] >> precision_bits, 0, 255) over whole groups of 8; returns the count done. AVX2.
size_t clip_row_avx2(const int32_t* acc, uint8_t* out, size_t n, int precision_bits);

}  // namespace trainer
