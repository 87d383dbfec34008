/* Depthwise micro-kernels, AVX2 + FMA (contracts in ../kernels.h): channels
 * are the vector dimension, 8 per register, the tail masked. */
#include "../kernels.h"
#include "avx2_util.h"

void nconv_f32_dwconv__avx2(int64_t channels, int64_t ks, const float *const *rows, const float *w,
                            const float *init, float *out, int relu) {
    const __m256 zero = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= channels; c += 8) {
        __m256 acc = init ? _mm256_loadu_ps(init + c) : zero;
        for (int64_t t = 0; t < ks; t++)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(rows[t] + c), _mm256_loadu_ps(w + t * channels + c), acc);
        _mm256_storeu_ps(out + c, relu ? _mm256_max_ps(zero, acc) : acc);
    }
    if (c < channels) {
        const __m256i m = nconv__avx2_mask(channels - c);
        __m256 acc = init ? _mm256_maskload_ps(init + c, m) : zero;
        for (int64_t t = 0; t < ks; t++)
            acc = _mm256_fmadd_ps(_mm256_maskload_ps(rows[t] + c, m), _mm256_maskload_ps(w + t * channels + c, m), acc);
        _mm256_maskstore_ps(out + c, m, relu ? _mm256_max_ps(zero, acc) : acc);
    }
}

void nconv_f32_vmacc__avx2(int64_t n, const float *a, const float *b, float *acc) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), _mm256_loadu_ps(acc + i)));
    if (i < n) {
        const __m256i m = nconv__avx2_mask(n - i);
        _mm256_maskstore_ps(acc + i, m,
                            _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m),
                                            _mm256_maskload_ps(acc + i, m)));
    }
}
