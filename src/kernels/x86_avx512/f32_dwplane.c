/* Depthwise plane micro-kernels, AVX-512 (contracts in ../kernels.h): pixels
 * of one channel's rows are the vector dimension, 16 per register, the tail
 * masked. */
#include "../kernels.h"
#include "avx512_util.h"

void nconv_f32_dwrow__avx512(int64_t rows, int64_t n, int64_t ks, const float *const *src, int64_t src_pitch,
                             const float *w, float init, float *out, int64_t out_pitch, int relu) {
    const __m512 zero = _mm512_setzero_ps(), vi = _mm512_set1_ps(init);
    for (int64_t r = 0; r < rows; r++, out += out_pitch) {
        const int64_t ro = r * src_pitch;
        int64_t j = 0;
        /* Four independent accumulators per tap pass hide the FMA latency. */
        for (; j + 64 <= n; j += 64) {
            __m512 a0 = vi, a1 = vi, a2 = vi, a3 = vi;
            for (int64_t t = 0; t < ks; t++) {
                const __m512 wt = _mm512_set1_ps(w[t]);
                const float *s = src[t] + ro + j;
                a0 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(s), a0);
                a1 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(s + 16), a1);
                a2 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(s + 32), a2);
                a3 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(s + 48), a3);
            }
            if (relu)
                a0 = _mm512_max_ps(zero, a0), a1 = _mm512_max_ps(zero, a1), a2 = _mm512_max_ps(zero, a2),
                a3 = _mm512_max_ps(zero, a3);
            _mm512_storeu_ps(out + j, a0), _mm512_storeu_ps(out + j + 16, a1);
            _mm512_storeu_ps(out + j + 32, a2), _mm512_storeu_ps(out + j + 48, a3);
        }
        /* The rest: up to four vectors, the last masked, in one pass over the taps. */
        if (j < n) {
            const int64_t left = n - j, nv = (left + 15) / 16;
            const __mmask16 m = nconv__avx512_mask(left - (nv - 1) * 16);
            __m512 a0 = vi, a1 = vi, a2 = vi, a3 = vi;
            for (int64_t t = 0; t < ks; t++) {
                const __m512 wt = _mm512_set1_ps(w[t]);
                const float *s = src[t] + ro + j;
                a0 = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(nv == 1 ? m : 0xffff, s), a0);
                if (nv > 1) a1 = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(nv == 2 ? m : 0xffff, s + 16), a1);
                if (nv > 2) a2 = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(nv == 3 ? m : 0xffff, s + 32), a2);
                if (nv > 3) a3 = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(m, s + 48), a3);
            }
            const __m512 v[4] = {a0, a1, a2, a3};
            for (int64_t q = 0; q < nv; q++) /* max keeps NaN */
                _mm512_mask_storeu_ps(out + j + 16 * q, q == nv - 1 ? m : 0xffff,
                                      relu ? _mm512_max_ps(zero, v[q]) : v[q]);
        }
    }
}

void nconv_f32_dwdot__avx512(int64_t rows, int64_t n, int64_t ks, const float *a, int64_t a_pitch,
                             const float *const *src, int64_t src_pitch, float *acc) {
    const __mmask16 tail = nconv__avx512_mask(n % 16);
    const int64_t full = n - n % 16;
    for (int64_t t = 0; t < ks; t++) {
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        for (int64_t r = 0; r < rows; r++) {
            const float *x = src[t] + r * src_pitch, *g = a + r * a_pitch;
            int64_t j = 0;
            for (; j + 32 <= full; j += 32) {
                s0 = _mm512_fmadd_ps(_mm512_loadu_ps(g + j), _mm512_loadu_ps(x + j), s0);
                s1 = _mm512_fmadd_ps(_mm512_loadu_ps(g + j + 16), _mm512_loadu_ps(x + j + 16), s1);
            }
            if (j < full) s1 = _mm512_fmadd_ps(_mm512_loadu_ps(g + j), _mm512_loadu_ps(x + j), s1), j += 16;
            if (j < n) s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, g + j), _mm512_maskz_loadu_ps(tail, x + j), s0);
        }
        acc[t] += _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    }
}
