/*
 * f32 matrix transpose, AVX-512: dst[j][i] = src[i][j] for i < rows,
 * j < cols, in 16 x 16 register tiles (unpack, shuffle within 128-bit lanes,
 * then two lane shuffles); the strips past the last whole tile go to the AVX2
 * kernel. Each destination row of a tile is one 64-byte store: the 8 x 8
 * tiles wrote every packed weight row (16 floats) in two halves at different
 * times, and the weight packing of 1x1 layers took a fifth of their time.
 */
#include "../kernels.h"

#include <immintrin.h>

static void tile_16x16(const float *src, int64_t lds, float *dst, int64_t ldd) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
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
        _mm512_storeu_ps(dst + m * ldd, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_storeu_ps(dst + (4 + m) * ldd, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_storeu_ps(dst + (8 + m) * ldd, _mm512_shuffle_f32x4(v0, v2, 0xdd));
        _mm512_storeu_ps(dst + (12 + m) * ldd, _mm512_shuffle_f32x4(v1, v3, 0xdd));
    }
}

void nconv_f32_transpose__avx512(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd) {
    const int64_t r16 = rows - rows % 16, c16 = cols - cols % 16;
    for (int64_t i = 0; i < r16; i += 16)
        for (int64_t j = 0; j < c16; j += 16) tile_16x16(src + i * lds + j, lds, dst + j * ldd + i, ldd);
    if (c16 < cols) nconv_f32_transpose__avx2(r16, cols - c16, src + c16, lds, dst + c16 * ldd, ldd);
    if (r16 < rows) nconv_f32_transpose__avx2(rows - r16, cols, src + r16 * lds, lds, dst + r16, ldd);
}
