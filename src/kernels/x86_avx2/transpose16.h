/*
 * The transposes between a 16-bit storage type and f32, AVX2 with F16C (contract in
 * ../kernels.h), for f16_transpose.c and bf16_transpose.c: the f32 transpose's 8 x 8 register
 * tiles over 32 x 32 blocks with each 16-bit row widened as it is loaded, or narrowed as it is
 * stored, so the conversion takes no pass over memory of its own. Partial 16-bit rows go
 * through a buffer.
 */
#ifndef NCONV_AVX2_TRANSPOSE16_H
#define NCONV_AVX2_TRANSPOSE16_H

#include "../kernels.h"
#include "avx2_util.h"

#include <immintrin.h>
#include <string.h>

#define NCONV_INLINE static inline __attribute__((always_inline))

enum { TB = 32 };

/* The first n (<= 8) of eight 16-bit values into d (a partial row through a buffer). */
NCONV_INLINE void row16(uint16_t *d, __m128i h, int64_t n) {
    if (n == 8) {
        _mm_storeu_si128((__m128i *)d, h);
        return;
    }
    uint16_t t[8];
    _mm_storeu_si128((__m128i *)t, h);
    memcpy(d, t, sizeof(uint16_t) * (size_t)n);
}

/* Rows i < nr, columns j < nc of a tile (8 and 8: a whole one). */
NCONV_INLINE void tile16(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t nr, int64_t nc, int to_f32,
                         int bf16) {
    __m256 r[8];
    if (to_f32) {
        const uint16_t *s = src;
        for (int i = 0; i < 8; i++) r[i] = i < nr ? nconv__avx2_load16(s + i * lds, nc, bf16) : _mm256_setzero_ps();
        nconv__avx2_transpose_8x8(r);
        nconv__avx2_store_8x8(dst, ldd, nr, nc, r);
        return;
    }
    nconv__avx2_load_8x8(src, lds, nr, nc, r);
    nconv__avx2_transpose_8x8(r);
    uint16_t *d = dst;
    for (int j = 0; j < nc; j += 2) { /* rows j and j + 1, for bf16 narrowed by one pack */
        const int two = j + 1 < nc;
        __m128i h0, h1 = _mm_setzero_si128();
        if (bf16 && two) {
            const __m256i v = nconv__avx2_to_bf16x2(r[j], r[j + 1]);
            h0 = _mm256_castsi256_si128(v), h1 = _mm256_extracti128_si256(v, 1);
        } else {
            h0 = nconv__avx2_to_16bit(r[j], bf16);
            if (two) h1 = nconv__avx2_to_16bit(r[j + 1], bf16);
        }
        row16(d + j * ldd, h0, nr);
        if (two) row16(d + (j + 1) * ldd, h1, nr);
    }
}

/* 8 x 8 tiles over a block of at most TB x TB; elements of 2 (16-bit) or 4 bytes. */
NCONV_INLINE void block16(int64_t rows, int64_t cols, const char *s, int64_t lds, char *d, int64_t ldd, int to_f32,
                          int bf16) {
    const int64_t es = to_f32 ? 2 : 4, ed = to_f32 ? 4 : 2;
    const int64_t r8 = rows - rows % 8, c8 = cols - cols % 8;
    /* whole tiles by a call with constant sizes, which the compiler folds to plain loads and stores */
    for (int64_t i = 0; i < r8; i += 8) {
        for (int64_t j = 0; j < c8; j += 8)
            tile16(s + (i * lds + j) * es, lds, d + (j * ldd + i) * ed, ldd, 8, 8, to_f32, bf16);
        if (c8 < cols) tile16(s + (i * lds + c8) * es, lds, d + (c8 * ldd + i) * ed, ldd, 8, cols - c8, to_f32, bf16);
    }
    for (int64_t j = 0; j < cols && r8 < rows; j += 8)
        tile16(s + (r8 * lds + j) * es, lds, d + (j * ldd + r8) * ed, ldd, rows - r8, cols - j < 8 ? cols - j : 8,
               to_f32, bf16);
}

/* dst[j][i] = src[i][j] for i < rows, j < cols, converted, in blocks of 32 x 32 (as the f32
 * transpose, for whole cache lines per block row). */
NCONV_INLINE void transpose16(int64_t rows, int64_t cols, const void *src, int64_t lds, void *dst, int64_t ldd,
                              int to_f32, int bf16) {
    const int64_t es = to_f32 ? 2 : 4, ed = to_f32 ? 4 : 2;
    for (int64_t i0 = 0; i0 < rows; i0 += TB)
        for (int64_t j0 = 0; j0 < cols; j0 += TB)
            block16(rows - i0 < TB ? rows - i0 : TB, cols - j0 < TB ? cols - j0 : TB,
                    (const char *)src + (i0 * lds + j0) * es, lds, (char *)dst + (j0 * ldd + i0) * ed, ldd, to_f32,
                    bf16);
}

#endif
