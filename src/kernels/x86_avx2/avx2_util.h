/* Helpers shared by the AVX2 micro-kernels (compiled with -mavx2 -mfma). */
#ifndef NCONV_AVX2_UTIL_H
#define NCONV_AVX2_UTIL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Lanes i < n set (n clamped to 0..8): masks for loads and stores of partial rows. */
static inline __m256i nconv__avx2_mask(int64_t n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Lanes i < 8 set where bit 8 h + i of m is: the half h of a 16-lane bit mask as a vector mask. */
static inline __m256i nconv__avx2_bits_mask(unsigned m, int h) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)(m >> (8 * h))), bit), bit);
}

/* Eight f32 lanes narrowed to bf16: round to nearest even on the dropped half, NaN kept quiet
 * (the scalar conversion's bits). */
static inline __m128i nconv__avx2_to_bf16(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), odd), 16);
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i r =
        _mm256_blendv_epi8(rounded, _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40)), nan);
    /* 32 -> 16 bits: pack within each 128-bit half, then put the halves in order */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}

/* Sixteen f32 lanes (lo, then hi) narrowed to bf16, the bits of nconv__avx2_to_bf16 on each half.
 * Rows without NaN, nearly all of them, take the rounding alone, two halves to one pack. */
static inline __m256i nconv__avx2_to_bf16x2(__m256 lo, __m256 hi) {
    if (__builtin_expect(_mm256_movemask_ps(_mm256_cmp_ps(lo, hi, _CMP_UNORD_Q)) != 0, 0))
        return _mm256_setr_m128i(nconv__avx2_to_bf16(lo), nconv__avx2_to_bf16(hi));
    const __m256i x = _mm256_castps_si256(lo), y = _mm256_castps_si256(hi);
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
    const __m256i rx = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, half), _mm256_and_si256(_mm256_srli_epi32(x, 16), one)), 16);
    const __m256i ry = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(y, half), _mm256_and_si256(_mm256_srli_epi32(y, 16), one)), 16);
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(rx, ry), 0xd8);
}

/* Eight 16-bit values widened exactly: bf16 (bf16 != 0) by a shift into the top half, f16 by F16C. */
static inline __m256 nconv__avx2_widen16(__m128i h, int bf16) {
    return bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

/* The first n (<= 8) 16-bit values at p widened, zeros past them (AVX2 has no masked 16-bit loads:
 * a partial row goes through a buffer). */
static inline __m256 nconv__avx2_load16(const uint16_t *p, int64_t n, int bf16) {
    if (n == 8) return nconv__avx2_widen16(_mm_loadu_si128((const __m128i *)p), bf16);
    uint16_t t[8] = {0};
    memcpy(t, p, sizeof(uint16_t) * (size_t)n);
    return nconv__avx2_widen16(_mm_loadu_si128((const __m128i *)t), bf16);
}

/* Eight f32 lanes narrowed to bf16 (bf16 != 0) or f16 (F16C), round to nearest even. */
static inline __m128i nconv__avx2_to_16bit(__m256 f, int bf16) {
    return bf16 ? nconv__avx2_to_bf16(f) : _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
}

/* A row of 16 f32 lanes, as two halves of 8, narrowed (to bf16 when bf16 != 0, else f16) into c,
 * columns j < nc. */
static inline void nconv__avx2_store16(uint16_t *c, int64_t nc, __m256 lo, __m256 hi, int bf16) {
    const __m256i v = bf16 ? nconv__avx2_to_bf16x2(lo, hi)
                           : _mm256_setr_m128i(_mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT),
                                               _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT));
    if (nc == 16) {
        _mm256_storeu_si256((__m256i *)c, v);
        return;
    }
    uint16_t t[16];
    _mm256_storeu_si256((__m256i *)t, v);
    memcpy(c, t, sizeof(uint16_t) * (size_t)nc);
}

/* Rows i < nr, columns j < nc of an 8 x 8 f32 tile (rows lds apart) into r, zeros past them. */
static inline __attribute__((always_inline)) void nconv__avx2_load_8x8(const float *src, int64_t lds, int64_t nr,
                                                                       int64_t nc, __m256 r[8]) {
    if (nr == 8 && nc == 8) {
        for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
    } else {
        const __m256i m = nconv__avx2_mask(nc);
        for (int i = 0; i < 8; i++) r[i] = i < nr ? _mm256_maskload_ps(src + i * lds, m) : _mm256_setzero_ps();
    }
}

/* Lanes i < nr of r[j], j < nc, into rows j of an f32 tile (ldd apart). */
static inline __attribute__((always_inline)) void nconv__avx2_store_8x8(float *dst, int64_t ldd, int64_t nr,
                                                                        int64_t nc, const __m256 r[8]) {
    if (nr == 8 && nc == 8) {
        for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + j * ldd, r[j]);
    } else {
        const __m256i m = nconv__avx2_mask(nr);
        for (int j = 0; j < nc; j++) _mm256_maskstore_ps(dst + j * ldd, m, r[j]);
    }
}

/* An 8 x 8 tile in registers transposed in place: r[i] lane j becomes r[j] lane i (unpack,
 * shuffle, then 128-bit lane permutes). */
static inline __attribute__((always_inline)) void nconv__avx2_transpose_8x8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]),
                 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]),
                 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]),
                 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
                 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
                 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* Channel j of a 6 x 8 half tile (rows r0 .. r5) as 6 pixels: transposed with the zero rows 6, 7. */
static inline void nconv__avx2_store_planes(float *c, int64_t ldc, int64_t nc, __m256 r0, __m256 r1, __m256 r2,
                                            __m256 r3, __m256 r4, __m256 r5) {
    const __m256 z = _mm256_setzero_ps();
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3);
    const __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    /* s_k: pixels 0-3 of channels k (low half) and k + 4 (high half); u_k: pixels 4, 5 of them */
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 u0 = _mm256_shuffle_ps(t4, z, 0x44), u1 = _mm256_shuffle_ps(t4, z, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t5, z, 0x44), u3 = _mm256_shuffle_ps(t5, z, 0xee);
    const __m256 s[4] = {s0, s1, s2, s3}, u[4] = {u0, u1, u2, u3};
    for (int j = 0; j < 8 && j < nc; j++) {
        const __m128 lo = j < 4 ? _mm256_castps256_ps128(s[j]) : _mm256_extractf128_ps(s[j - 4], 1);
        const __m128 hi = j < 4 ? _mm256_castps256_ps128(u[j]) : _mm256_extractf128_ps(u[j - 4], 1);
        _mm_storeu_ps(c + j * ldc, lo);
        _mm_storel_pi((__m64 *)(c + j * ldc + 4), hi);
    }
}

#endif
