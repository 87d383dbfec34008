/*
 * f32 matrix transpose, AVX2: dst[j][i] = src[i][j] for i < rows, j < cols,
 * in 8 x 8 register tiles (unpack, shuffle, lane permute) over 32 x 32
 * blocks; partial tiles at the edges through masked loads and stores, so
 * that narrow matrices (the rows of small planes) move in vectors too.
 * Converts between NCHW and NHWC around the channels-last engine.
 */
#include "../kernels.h"
#include "avx2_util.h"

#include <immintrin.h>

enum { TB = 32 };

/* Rows i < nr, columns j < nc of a tile (8 and 8: a whole one). */
static inline __attribute__((always_inline)) void tile_8x8(const float *src, int64_t lds, float *dst, int64_t ldd,
                                                           int64_t nr, int64_t nc) {
    __m256 r[8];
    nconv__avx2_load_8x8(src, lds, nr, nc, r);
    nconv__avx2_transpose_8x8(r);
    nconv__avx2_store_8x8(dst, ldd, nr, nc, r);
}

/* 8 x 8 tiles over a block of at most TB x TB. */
static void transpose_block(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd) {
    const int64_t r8 = rows - rows % 8, c8 = cols - cols % 8;
    /* whole tiles by a call with constant sizes, which the compiler folds to plain loads and stores */
    for (int64_t i = 0; i < r8; i += 8) {
        for (int64_t j = 0; j < c8; j += 8) tile_8x8(src + i * lds + j, lds, dst + j * ldd + i, ldd, 8, 8);
        if (c8 < cols) tile_8x8(src + i * lds + c8, lds, dst + c8 * ldd + i, ldd, 8, cols - c8);
    }
    for (int64_t j = 0; j < cols && r8 < rows; j += 8)
        tile_8x8(src + r8 * lds + j, lds, dst + j * ldd + r8, ldd, rows - r8, cols - j < 8 ? cols - j : 8);
}

/* Blocks of 32 x 32: each source and destination row of a block is two whole
 * cache lines. Walking all rows per 8 columns wrote 32-byte pieces of lines
 * 2 KiB apart across half a megabyte (512 channels x 256 pixels): the gather
 * of wav2vec2's first layer's dy took 1.6x as long. */
void nconv_f32_transpose__avx2(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd) {
    for (int64_t i0 = 0; i0 < rows; i0 += TB)
        for (int64_t j0 = 0; j0 < cols; j0 += TB)
            transpose_block(rows - i0 < TB ? rows - i0 : TB, cols - j0 < TB ? cols - j0 : TB, src + i0 * lds + j0, lds,
                            dst + j0 * ldd + i0, ldd);
}
