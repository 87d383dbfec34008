/*
 * f32 matrix transpose, AVX-512: dst[j][i] = src[i][j] for i < rows,
 * j < cols, in 16 x 16 register tiles (unpack, shuffle within 128-bit lanes,
 * then two lane shuffles); partial tiles at the edges through masked loads
 * and stores, so that narrow matrices (the rows of small planes, 7 or 14
 * columns) move in vectors too. Each destination row of a tile is
 * one 64-byte store: the 8 x 8 tiles wrote every packed weight row (16
 * floats) in two halves at different times, and the weight packing of 1x1
 * layers took a fifth of their time.
 */
#include "../kernels.h"
#include "avx512_util.h"

#include <immintrin.h>

/* Rows i < nr, columns j < nc of a tile (16 and 16: a whole one). */
static inline __attribute__((always_inline)) void tile_16x16(const float *src, int64_t lds, float *dst, int64_t ldd,
                                                             int64_t nr, int64_t nc) {
    __m512 r[16], t[16];
    /* rows past nr load nothing (from row 0, masked off): one branchless sequence the compiler keeps in registers */
    const __mmask16 mc = nconv__avx512_mask(nc), mr = nconv__avx512_mask(nr);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = _mm512_maskz_loadu_ps(i < nr ? mc : 0, src + (i < nr ? i : 0) * lds);
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
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(dst + (j < nc ? j : 0) * ldd, j < nc ? mr : 0, t[j]);
}

void nconv_f32_transpose__avx512(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd) {
    const int64_t r16 = rows - rows % 16, c16 = cols - cols % 16;
    /* whole tiles by a call with constant sizes, which the compiler folds to plain loads and stores */
    for (int64_t i = 0; i < r16; i += 16) {
        for (int64_t j = 0; j < c16; j += 16) tile_16x16(src + i * lds + j, lds, dst + j * ldd + i, ldd, 16, 16);
        if (c16 < cols) tile_16x16(src + i * lds + c16, lds, dst + c16 * ldd + i, ldd, 16, cols - c16);
    }
    for (int64_t j = 0; j < cols && r16 < rows; j += 16)
        tile_16x16(src + r16 * lds + j, lds, dst + j * ldd + r16, ldd, rows - r16, cols - j < 16 ? cols - j : 16);
}
