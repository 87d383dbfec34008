/*
 * The transposes between a 16-bit storage type and f32, AVX-512 (contract in ../kernels.h), for
 * f16_transpose.c and bf16_transpose.c: the f32 transpose's 16 x 16 register tiles with each
 * 16-bit row widened as it is loaded, or narrowed as it is stored, so the conversion takes no
 * pass over memory of its own. Partial 16-bit rows go through a buffer (AVX-512F has no masked
 * 16-bit loads or stores).
 */
#ifndef NCONV_AVX512_TRANSPOSE16_H
#define NCONV_AVX512_TRANSPOSE16_H

#include "../kernels.h"
#include "avx512_util.h"

#include <immintrin.h>
#include <string.h>

#define NCONV_INLINE static inline __attribute__((always_inline))

/* Rows i < nr, columns j < nc of a tile (16 and 16: a whole one). */
NCONV_INLINE void tile16(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t nr, int64_t nc, int to_f32,
                         int bf16) {
    __m512 r[16];
    if (to_f32) {
        const uint16_t *s = src;
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) r[i] = i < nr ? nconv__avx512_load16(s + i * lds, nc, bf16) : _mm512_setzero_ps();
        nconv__avx512_transpose_16x16(r);
        nconv__avx512_store_16x16(dst, ldd, nr, nc, r);
        return;
    }
    nconv__avx512_load_16x16(src, lds, nr, nc, r);
    nconv__avx512_transpose_16x16(r);
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        if (j < nc) nconv__avx512_store16((uint16_t *)dst + j * ldd, nr, r[j], bf16);
}

/* dst[j][i] = src[i][j] for i < rows, j < cols, converted; elements of 2 (16-bit) or 4 bytes. */
NCONV_INLINE void transpose16(int64_t rows, int64_t cols, const void *src, int64_t lds, void *dst, int64_t ldd,
                              int to_f32, int bf16) {
    const int64_t es = to_f32 ? 2 : 4, ed = to_f32 ? 4 : 2;
    const char *s = src;
    char *d = dst;
    const int64_t r16 = rows - rows % 16, c16 = cols - cols % 16;
    /* whole tiles by a call with constant sizes, which the compiler folds to plain loads and stores */
    for (int64_t i = 0; i < r16; i += 16) {
        for (int64_t j = 0; j < c16; j += 16)
            tile16(s + (i * lds + j) * es, lds, d + (j * ldd + i) * ed, ldd, 16, 16, to_f32, bf16);
        if (c16 < cols)
            tile16(s + (i * lds + c16) * es, lds, d + (c16 * ldd + i) * ed, ldd, 16, cols - c16, to_f32, bf16);
    }
    for (int64_t j = 0; j < cols && r16 < rows; j += 16)
        tile16(s + (r16 * lds + j) * es, lds, d + (j * ldd + r16) * ed, ldd, rows - r16, cols - j < 16 ? cols - j : 16,
               to_f32, bf16);
}

#endif
