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

/* Reduction steps with A packed six to a step (ak[r], r < 6; the GEMM and
 * indirect-B kernels): one panel's six accumulators acc0 .. acc5 from B
 * vector b, or two panels' (e, f) from bq and br, each broadcast feeding both. */
#define NCONV_AVX512_FMA6(acc, b, ak)                                                                     \
    acc##0 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[0]), b, acc##0);                                         \
    acc##1 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[1]), b, acc##1);                                         \
    acc##2 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[2]), b, acc##2);                                         \
    acc##3 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[3]), b, acc##3);                                         \
    acc##4 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[4]), b, acc##4);                                         \
    acc##5 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[5]), b, acc##5)

#define NCONV_AVX512_FMA12(e, f, bq, br, ak)                                                              \
    do {                                                                                                  \
        __m512 v = _mm512_set1_ps((ak)[0]);                                                               \
        e##0 = _mm512_fmadd_ps(v, bq, e##0), f##0 = _mm512_fmadd_ps(v, br, f##0);                         \
        v = _mm512_set1_ps((ak)[1]);                                                                      \
        e##1 = _mm512_fmadd_ps(v, bq, e##1), f##1 = _mm512_fmadd_ps(v, br, f##1);                         \
        v = _mm512_set1_ps((ak)[2]);                                                                      \
        e##2 = _mm512_fmadd_ps(v, bq, e##2), f##2 = _mm512_fmadd_ps(v, br, f##2);                         \
        v = _mm512_set1_ps((ak)[3]);                                                                      \
        e##3 = _mm512_fmadd_ps(v, bq, e##3), f##3 = _mm512_fmadd_ps(v, br, f##3);                         \
        v = _mm512_set1_ps((ak)[4]);                                                                      \
        e##4 = _mm512_fmadd_ps(v, bq, e##4), f##4 = _mm512_fmadd_ps(v, br, f##4);                         \
        v = _mm512_set1_ps((ak)[5]);                                                                      \
        e##5 = _mm512_fmadd_ps(v, bq, e##5), f##5 = _mm512_fmadd_ps(v, br, f##5);                         \
    } while (0)

#endif
