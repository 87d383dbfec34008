/* Helpers shared by the AVX-512 micro-kernels (compiled with -mavx512f -mavx512vl -mavx2 -mfma). */
#ifndef NCONV_AVX512_UTIL_H
#define NCONV_AVX512_UTIL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

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

/* Sixteen f32 lanes narrowed to bf16: round to nearest even on the dropped half, NaN kept quiet
 * (the scalar conversion's bits). Built with AVX512-BF16 (../x86_avx512_bf16/), VCVTNEPS2BF16
 * rounds the same way in one instruction, but it reads subnormal inputs as zero: a vector with
 * one takes the integer lanes. */
static inline __m256i nconv__avx512_to_bf16(__m512 f) {
#ifdef __AVX512BF16__
    if (!_mm512_fpclass_ps_mask(f, 0x20)) return (__m256i)_mm512_cvtneps_pbh(f); /* 0x20: subnormal */
#endif
    const __m512i x = _mm512_castps_si512(f);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i half = _mm512_add_epi32(x, _mm512_set1_epi32(0x7fff));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(half, odd), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

/* n f32 narrowed to bf16 (the bf16_convert kernels' narrowing), the tail through a buffer
 * (AVX-512F has no masked 16-bit stores). */
static inline void nconv__avx512_narrow_bf16(int64_t n, const float *s, uint16_t *d) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(d + i), nconv__avx512_to_bf16(_mm512_loadu_ps(s + i)));
    if (i < n) {
        uint16_t t[16];
        const __m512 v = _mm512_maskz_loadu_ps(nconv__avx512_mask(n - i), s + i);
        _mm256_storeu_si256((__m256i *)t, nconv__avx512_to_bf16(v));
        memcpy(d + i, t, sizeof(uint16_t) * (size_t)(n - i));
    }
}

/* Sixteen f32 lanes narrowed to bf16 (bf16 != 0) or f16, round to nearest even. */
static inline __m256i nconv__avx512_to_16bit(__m512 f, int bf16) {
    return bf16 ? nconv__avx512_to_bf16(f) : _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
}

/* Sixteen 16-bit values widened exactly: bf16 (bf16 != 0) by a shift into the top half, f16 by
 * VCVTPH2PS. */
static inline __m512 nconv__avx512_widen16(__m256i h, int bf16) {
    return bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

/* The first n (<= 16) 16-bit values at p widened, zeros past them (AVX-512F has no masked 16-bit
 * loads: a partial row goes through a buffer). */
static inline __m512 nconv__avx512_load16(const uint16_t *p, int64_t n, int bf16) {
    if (n == 16) return nconv__avx512_widen16(_mm256_loadu_si256((const __m256i *)p), bf16);
    uint16_t t[16] = {0};
    memcpy(t, p, sizeof(uint16_t) * (size_t)n);
    return nconv__avx512_widen16(_mm256_loadu_si256((const __m256i *)t), bf16);
}

/* A row of 16 f32 lanes narrowed (to bf16 when bf16 != 0, else f16) into c, columns j < nc
 * (AVX-512F has no masked 16-bit stores: a partial row goes through a buffer). */
static inline void nconv__avx512_store16(uint16_t *c, int64_t nc, __m512 v, int bf16) {
    const __m256i h = nconv__avx512_to_16bit(v, bf16);
    if (nc == 16) {
        _mm256_storeu_si256((__m256i *)c, h);
        return;
    }
    uint16_t t[16];
    _mm256_storeu_si256((__m256i *)t, h);
    memcpy(c, t, sizeof(uint16_t) * (size_t)nc);
}

/* Rows i < nr, columns j < nc of a 16 x 16 f32 tile (rows lds apart) into r, zeros past them
 * (rows past nr load nothing, from row 0 masked off: one branchless sequence kept in registers). */
static inline __attribute__((always_inline)) void nconv__avx512_load_16x16(const float *src, int64_t lds, int64_t nr,
                                                                           int64_t nc, __m512 r[16]) {
    const __mmask16 mc = nconv__avx512_mask(nc);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = _mm512_maskz_loadu_ps(i < nr ? mc : 0, src + (i < nr ? i : 0) * lds);
}

/* Lanes i < nr of r[j], j < nc, into rows j of an f32 tile (ldd apart). */
static inline __attribute__((always_inline)) void nconv__avx512_store_16x16(float *dst, int64_t ldd, int64_t nr,
                                                                            int64_t nc, const __m512 r[16]) {
    const __mmask16 mr = nconv__avx512_mask(nr);
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(dst + (j < nc ? j : 0) * ldd, j < nc ? mr : 0, r[j]);
}

/* A 16 x 16 tile in registers transposed in place: r[i] lane j becomes r[j] lane i (unpack,
 * shuffle within 128-bit lanes, then two lane shuffles). */
static inline __attribute__((always_inline)) void nconv__avx512_transpose_16x16(__m512 r[16]) {
    __m512 t[16];
    /* pairs of rows interleaved, per 128-bit lane */
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* r[4g + m], lane L: column 4L + m of rows 4g .. 4g + 3 */
    for (int g = 0; g < 4; g++) {
        r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    /* column 4L + m: lane L of r[m], r[4 + m], r[8 + m], r[12 + m] */
    for (int m = 0; m < 4; m++) {
        const __m512 v0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), v1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xdd);
        const __m512 v2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88);
        const __m512 v3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xdd);
        t[m] = _mm512_shuffle_f32x4(v0, v2, 0x88), t[4 + m] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        t[8 + m] = _mm512_shuffle_f32x4(v0, v2, 0xdd), t[12 + m] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/*
 * The 6 x 16 tiles of the AVX-512 kernels split each reduction in two:
 * even k into one set of six accumulators, odd k into another, summed at the
 * end. One 16-wide accumulator per row gives six FMA chains, fewer than FMA
 * latency x FMA pipes (4 x 2 on the CPUs it was written for). Every AVX-512
 * 6 x 16 kernel sums in this order, so the one-panel and all-panels igemm
 * kernels agree bit for bit.
 */

/* Reduction steps with A packed six to a step (ak[r], r < 6; the GEMM and
 * indirect-B kernels): one panel's six accumulators acc0 .. acc5 from B
 * vector b, or two panels' (e, f) from bq and br, each broadcast feeding both.
 * The ROW steps are one row r of them; the 7 x 16 kernel adds row 6. */
#define NCONV_AVX512_ROW1(acc, r, b, ak) acc##r = _mm512_fmadd_ps(_mm512_set1_ps((ak)[r]), b, acc##r)
#define NCONV_AVX512_ROW2(e, f, r, bq, br, ak)                                                            \
    do {                                                                                                  \
        const __m512 v_ = _mm512_set1_ps((ak)[r]);                                                        \
        e##r = _mm512_fmadd_ps(v_, bq, e##r), f##r = _mm512_fmadd_ps(v_, br, f##r);                       \
    } while (0)

#define NCONV_AVX512_FMA6(acc, b, ak)                                                                     \
    NCONV_AVX512_ROW1(acc, 0, b, ak);                                                                     \
    NCONV_AVX512_ROW1(acc, 1, b, ak);                                                                     \
    NCONV_AVX512_ROW1(acc, 2, b, ak);                                                                     \
    NCONV_AVX512_ROW1(acc, 3, b, ak);                                                                     \
    NCONV_AVX512_ROW1(acc, 4, b, ak);                                                                     \
    NCONV_AVX512_ROW1(acc, 5, b, ak)

#define NCONV_AVX512_FMA12(e, f, bq, br, ak)                                                              \
    do {                                                                                                  \
        NCONV_AVX512_ROW2(e, f, 0, bq, br, ak);                                                           \
        NCONV_AVX512_ROW2(e, f, 1, bq, br, ak);                                                           \
        NCONV_AVX512_ROW2(e, f, 2, bq, br, ak);                                                           \
        NCONV_AVX512_ROW2(e, f, 3, bq, br, ak);                                                           \
        NCONV_AVX512_ROW2(e, f, 4, bq, br, ak);                                                           \
        NCONV_AVX512_ROW2(e, f, 5, bq, br, ak);                                                           \
    } while (0)

/* Row r of C (lanes in m) gets v, added to what it holds when accumulating, else to *start
 * where start is not NULL. */
static inline void nconv__avx512_store_row(float *cr, __mmask16 m, __m512 v, int accumulate, const float *start) {
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cr));
    else if (start) v = _mm512_add_ps(v, _mm512_set1_ps(*start));
    _mm512_mask_storeu_ps(cr, m, v);
}

/* Rows r < min(mr, 6) of one panel's accumulators acc0 .. acc5 into C rows ldc floats apart,
 * started at rinit[r] where rinit is not NULL (the 6 x 16 indirect-B kernels). */
#define NCONV_AVX512_STORE6(acc, cp, ldc, m, mr, accumulate, rinit)                                       \
    do {                                                                                                  \
        nconv__avx512_store_row(cp, m, acc##0, accumulate, rinit);                                        \
        if ((mr) > 1) nconv__avx512_store_row((cp) + (ldc), m, acc##1, accumulate, (rinit) ? (rinit) + 1 : NULL); \
        if ((mr) > 2) nconv__avx512_store_row((cp) + 2 * (ldc), m, acc##2, accumulate, (rinit) ? (rinit) + 2 : NULL); \
        if ((mr) > 3) nconv__avx512_store_row((cp) + 3 * (ldc), m, acc##3, accumulate, (rinit) ? (rinit) + 3 : NULL); \
        if ((mr) > 4) nconv__avx512_store_row((cp) + 4 * (ldc), m, acc##4, accumulate, (rinit) ? (rinit) + 4 : NULL); \
        if ((mr) > 5) nconv__avx512_store_row((cp) + 5 * (ldc), m, acc##5, accumulate, (rinit) ? (rinit) + 5 : NULL); \
    } while (0)

#endif
