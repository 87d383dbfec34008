/* Helpers shared by the AVX2 micro-kernels (compiled with -mavx2 -mfma). */
#ifndef NCONV_AVX2_UTIL_H
#define NCONV_AVX2_UTIL_H

#include <immintrin.h>
#include <stdint.h>

/* Lanes i < n set (n clamped to 0..8): masks for loads and stores of partial rows. */
static inline __m256i nconv__avx2_mask(int64_t n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#endif
