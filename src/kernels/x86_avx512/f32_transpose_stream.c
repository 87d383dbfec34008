/*
 * f32 matrix transpose into memory the caller will not read soon, AVX-512 (contract in
 * ../kernels.h; the driver and why in ../f32_transpose_stream.h).
 */
#include "../f32_transpose_stream.h"
#include "avx512_util.h"

#include <immintrin.h>

/* n floats of s to d: masked stores up to d's first line boundary and after its last one, the
 * lines between streamed. */
static void stream_row(float *d, const float *s, int64_t n) {
    int64_t k = (int64_t)(((64 - (uintptr_t)d % 64) % 64) / sizeof(float));
    k = k < n ? k : n;
    if (k) _mm512_mask_storeu_ps(d, nconv__avx512_mask(k), _mm512_maskz_loadu_ps(nconv__avx512_mask(k), s));
    for (; k + 16 <= n; k += 16) _mm512_stream_ps(d + k, _mm512_loadu_ps(s + k));
    const __mmask16 m = nconv__avx512_mask(n - k);
    if (k < n) _mm512_mask_storeu_ps(d + k, m, _mm512_maskz_loadu_ps(m, s + k));
}

void nconv_f32_transpose_stream__avx512(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                                        int64_t ldd) {
    nconv__transpose_stream(rows, cols, src, lds, dst, ldd, nconv_f32_transpose__avx512, stream_row);
}
