/*
 * f32 matrix transpose into memory the caller will not read soon, AVX2 (contract in
 * ../kernels.h; the driver and why in ../f32_transpose_stream.h): a line is two 32-byte
 * non-temporal stores.
 */
#include "../f32_transpose_stream.h"
#include "avx2_util.h"

#include <immintrin.h>

/* n floats of s to d: masked stores up to d's first line boundary and after its last one, the
 * lines between streamed. */
static void stream_row(float *d, const float *s, int64_t n) {
    int64_t k = (int64_t)(((64 - (uintptr_t)d % 64) % 64) / sizeof(float));
    k = k < n ? k : n;
    for (int64_t h = 0; h < k; h += 8) {
        const __m256i m = nconv__avx2_mask(k - h);
        _mm256_maskstore_ps(d + h, m, _mm256_maskload_ps(s + h, m));
    }
    for (; k + 16 <= n; k += 16) {
        _mm256_stream_ps(d + k, _mm256_loadu_ps(s + k));
        _mm256_stream_ps(d + k + 8, _mm256_loadu_ps(s + k + 8));
    }
    for (; k < n; k += 8) {
        const __m256i m = nconv__avx2_mask(n - k);
        _mm256_maskstore_ps(d + k, m, _mm256_maskload_ps(s + k, m));
    }
}

void nconv_f32_transpose_stream__avx2(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                                      int64_t ldd) {
    nconv__transpose_stream(rows, cols, src, lds, dst, ldd, nconv_f32_transpose__avx2, stream_row);
}
