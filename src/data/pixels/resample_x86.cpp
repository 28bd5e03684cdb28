#include "trainer/data/pixels/resample_x86.hpp"

#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#define TRAINER_X86 1
#include <immintrin.h>
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#define TRAINER_TARGET(isa)
#elif defined(_MSC_VER)  // clang-cl: MSVC's intrinsics, Clang's rule that a function names the ISA it uses
#include <intrin.h>
#define TRAINER_TARGET(isa) __attribute__((target(isa)))
#else
#define TRAINER_TARGET(isa) __attribute__((target(isa)))
#endif
#endif

namespace trainer {

namespace {

X86Features detect() {
  X86Features f;
#if defined(TRAINER_X86) && defined(_MSC_VER)
  int r[4];
  __cpuid(r, 0);
  const int max_leaf = r[0];
  __cpuid(r, 1);
  f.sse41 = (r[2] & (1 << 19)) != 0;
  // AVX2 also needs the OS to save the YMM registers: OSXSAVE and AVX set, XCR0's SSE and AVX state bits on.
  const bool os_avx = (r[2] & (1 << 27)) != 0 && (r[2] & (1 << 28)) != 0 && (_xgetbv(0) & 6) == 6;
  if (max_leaf >= 7) {
    __cpuidex(r, 7, 0);
    f.avx2 = os_avx && (r[1] & (1 << 5)) != 0;
  }
#elif defined(TRAINER_X86)
  __builtin_cpu_init();
  f.sse41 = __builtin_cpu_supports("sse4.1");
  f.avx2 = __builtin_cpu_supports("avx2");
#endif
  return f;
}

}  // namespace

const X86Features& x86_features() {
  static const X86Features features = detect();
  return features;
}

#ifdef TRAINER_X86

// The kernels under the ISA attribute are internal and reached through plain functions: in C++, GCC takes a
// target attribute on a function declared without it (in the header) as another version of that function.
namespace {

// A pixel's three bytes widened to four 32-bit lanes (the fourth, the next pixel's first byte, is computed and
// dropped): one multiply-add per tap instead of three.
TRAINER_TARGET("sse4.1")
int row3_sse41(const uint8_t* in, const int* first, const int* count, const int32_t* weights, int ksize,
                          int out_w, int safe_w, uint8_t* out, int precision_bits) {
  const __m128i half = _mm_set1_epi32(1 << (precision_bits - 1)), zero = _mm_setzero_si128();
  const __m128i max = _mm_set1_epi32(255);
  const __m128i shift = _mm_cvtsi32_si128(precision_bits);
  for (int xx = 0; xx < out_w; ++xx) {
    const int n = count[xx];
    if (first[xx] + n > safe_w) return xx;
    const uint8_t* p = in + static_cast<size_t>(first[xx]) * 3;
    const int32_t* k = weights + static_cast<size_t>(xx) * static_cast<size_t>(ksize);
    __m128i s = half;
    for (int t = 0; t < n; ++t) {
      int32_t bytes;
      memcpy(&bytes, p + t * 3, sizeof(bytes));
      const __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes));
      s = _mm_add_epi32(s, _mm_mullo_epi32(px, _mm_set1_epi32(k[t])));
    }
    s = _mm_min_epi32(_mm_max_epi32(_mm_sra_epi32(s, shift), zero), max);
    out[xx * 3 + 0] = static_cast<uint8_t>(_mm_extract_epi32(s, 0));
    out[xx * 3 + 1] = static_cast<uint8_t>(_mm_extract_epi32(s, 1));
    out[xx * 3 + 2] = static_cast<uint8_t>(_mm_extract_epi32(s, 2));
  }
  return out_w;
}

TRAINER_TARGET("avx2") size_t accumulate_avx2(int32_t* acc, const uint8_t* row, int32_t k, size_t n) {
  const __m256i weight = _mm256_set1_epi32(k);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + j)));
    const __m256i sum = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)),
                                         _mm256_mullo_epi32(px, weight));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + j), sum);
  }
  return j;
}

// Shifted, clamped to 0..255, then packed to 16 and to 8 bits, which keeps the values in order.
TRAINER_TARGET("avx2") size_t clip_avx2(const int32_t* acc, uint8_t* out, size_t n, int precision_bits) {
  const __m256i zero = _mm256_setzero_si256(), max = _mm256_set1_epi32(255);
  const __m128i shift = _mm_cvtsi32_si128(precision_bits);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i v = _mm256_min_epi32(
        _mm256_max_epi32(_mm256_sra_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)), shift),
                         zero),
        max);
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + j), _mm_packus_epi16(words, words));
  }
  return j;
}

}  // namespace

int horizontal_row3_sse41(const uint8_t* in, const int* first, const int* count, const int32_t* weights, int ksize,
                          int out_w, int safe_w, uint8_t* out, int precision_bits) {
  return row3_sse41(in, first, count, weights, ksize, out_w, safe_w, out, precision_bits);
}

size_t accumulate_row_avx2(int32_t* acc, const uint8_t* row, int32_t k, size_t n) {
  return accumulate_avx2(acc, row, k, n);
}

size_t clip_row_avx2(const int32_t* acc, uint8_t* out, size_t n, int precision_bits) {
  return clip_avx2(acc, out, n, precision_bits);
}

#else  // no x86-64: x86_features() is all false and these are never called

int horizontal_row3_sse41(const uint8_t*, const int*, const int*, const int32_t*, int, int, int, uint8_t*, int) {
  return 0;
}
size_t accumulate_row_avx2(int32_t*, const uint8_t*, int32_t, size_t) { return 0; }
size_t clip_row_avx2(const int32_t*, uint8_t*, size_t, int) { return 0; }

#endif

}  // namespace trainer
