/*
 * f32 matrix transpose, AVX2: dst[j][i] = src[i][j] for i < rows, j < cols,
 * in 8 x 8 register tiles (unpack, shuffle, lane permute) over 32 x 32
 * blocks; edges scalar.
 * Converts between NCHW and NHWC around the channels-last engine.
 */
#include "../kernels.h"

#include <immintrin.h>

enum { TB = 32 };

static void tile_8x8(const float *src, int64_t lds, float *dst, int64_t ldd) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds), r2 = _mm256_loadu_ps(src + 2 * lds),
           r3 = _mm256_loadu_ps(src + 3 * lds), r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
           r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xee);
    r2 = _mm256_shuffle_ps(t1, t3, 0x44), r3 = _mm256_shuffle_ps(t1, t3, 0xee);
    r4 = _mm256_shuffle_ps(t4, t6, 0x44), r5 = _mm256_shuffle_ps(t4, t6, 0xee);
    r6 = _mm256_shuffle_ps(t5, t7, 0x44), r7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(r0, r4, 0x20));
    _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(r1, r5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(r2, r6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(r3, r7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(r0, r4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(r1, r5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(r2, r6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(r3, r7, 0x31));
}

/* 8 x 8 tiles over a block of at most TB x TB. */
static void transpose_block(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd) {
    int64_t i = 0;
    for (; i + 8 <= rows; i += 8) {
        int64_t j = 0;
        for (; j + 8 <= cols; j += 8) tile_8x8(src + i * lds + j, lds, dst + j * ldd + i, ldd);
        for (; j < cols; j++)
            for (int64_t r = 0; r < 8; r++) dst[j * ldd + i + r] = src[(i + r) * lds + j];
    }
    for (; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) dst[j * ldd + i] = src[i * lds + j];
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
