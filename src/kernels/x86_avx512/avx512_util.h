/* Helpers shared by the AVX-512 micro-kernels (compiled with -mavx512f -mavx512vl -mavx2 -mfma). */
#ifndef NCONV_AVX512_UTIL_H
#define NCONV_AVX512_UTIL_H

#include <immintrin.h>
#include <stdint.h>

/* Lanes j < n of 16 (n clamped to 0..16): masks for partial rows. */
static inline __mmask16 nconv__avx512_mask(int64_t n) {
    n = n < 0 ? 0 : n > 16 ? 16 : n;
    return (__mmask16)((1u << n) - 1u);
}

/* The low and high 8 lanes, for kernels that store through 256-bit paths. */
static inline __m256 nconv__avx512_lo(__m512 v) { return _mm512_castps512_ps256(v); }
static inline __m256 nconv__avx512_hi(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/*
 * The 6 x 16 tiles of the AVX-512 kernels split each reduction in two:
 * even k into one set of six accumulators, odd k into another, summed at the
 * end. One 16-wide accumulator per row gives six FMA chains, fewer than FMA
 * latency x FMA pipes (4 x 2 where this was measured: six chains ran at 75%
 * of the 512-bit peak, twelve at 100%). Every AVX-512 6 x 16 kernel sums in
 * this order, so the one-panel and all-panels igemm kernels agree bit for bit.
 */

#endif
