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
    __m512 r[16];
    nconv__avx512_load_16x16(src, lds, nr, nc, r);
    nconv__avx512_transpose_16x16(r);
    nconv__avx512_store_16x16(dst, ldd, nr, nc, r);
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
