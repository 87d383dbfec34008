/* Depthwise plane micro-kernels, AVX2 + FMA (contracts in ../kernels.h):
 * pixels of one channel's rows are the vector dimension. */
#include "../kernels.h"
#include "avx2_util.h"

void nconv_f32_dwrow__avx2(int64_t rows, int64_t n, int64_t ks, const float *const *src, int64_t src_pitch,
                           const float *w, float init, float *out, int64_t out_pitch, int relu) {
    const __m256 zero = _mm256_setzero_ps(), vi = _mm256_set1_ps(init);
    for (int64_t r = 0; r < rows; r++, out += out_pitch) {
        const int64_t ro = r * src_pitch;
        int64_t j = 0;
        /* Four independent accumulators per tap pass hide the FMA latency. */
        for (; j + 32 <= n; j += 32) {
            __m256 a0 = vi, a1 = vi, a2 = vi, a3 = vi;
            for (int64_t t = 0; t < ks; t++) {
                const __m256 wt = _mm256_broadcast_ss(w + t);
                const float *s = src[t] + ro + j;
                a0 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s), a0);
                a1 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s + 8), a1);
                a2 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s + 16), a2);
                a3 = _mm256_fmadd_ps(wt, _mm256_loadu_ps(s + 24), a3);
            }
            if (relu)
                a0 = _mm256_max_ps(zero, a0), a1 = _mm256_max_ps(zero, a1), a2 = _mm256_max_ps(zero, a2),
                a3 = _mm256_max_ps(zero, a3);
            _mm256_storeu_ps(out + j, a0), _mm256_storeu_ps(out + j + 8, a1);
            _mm256_storeu_ps(out + j + 16, a2), _mm256_storeu_ps(out + j + 24, a3);
        }
        for (; j < n; j += 8) {
            const __m256i m = nconv__avx2_mask(n - j);
            __m256 a = vi;
            for (int64_t t = 0; t < ks; t++)
                a = _mm256_fmadd_ps(_mm256_broadcast_ss(w + t), _mm256_maskload_ps(src[t] + ro + j, m), a);
            _mm256_maskstore_ps(out + j, m, relu ? _mm256_max_ps(zero, a) : a); /* max keeps NaN */
        }
    }
}

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void nconv_f32_dwdot__avx2(int64_t rows, int64_t n, int64_t ks, const float *a, int64_t a_pitch,
                           const float *const *src, int64_t src_pitch, float *acc) {
    const __m256i tail = nconv__avx2_mask(n % 8);
    const int64_t full = n - n % 8;
    for (int64_t t = 0; t < ks; t++) {
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        for (int64_t r = 0; r < rows; r++) {
            const float *x = src[t] + r * src_pitch, *g = a + r * a_pitch;
            int64_t j = 0;
            for (; j + 16 <= full; j += 16) {
                s0 = _mm256_fmadd_ps(_mm256_loadu_ps(g + j), _mm256_loadu_ps(x + j), s0);
                s1 = _mm256_fmadd_ps(_mm256_loadu_ps(g + j + 8), _mm256_loadu_ps(x + j + 8), s1);
            }
            if (j < full) s1 = _mm256_fmadd_ps(_mm256_loadu_ps(g + j), _mm256_loadu_ps(x + j), s1), j += 8;
            if (j < n) s0 = _mm256_fmadd_ps(_mm256_maskload_ps(g + j, tail), _mm256_maskload_ps(x + j, tail), s0);
        }
        acc[t] += hsum(_mm256_add_ps(s0, s1));
    }
}
