/*
 * Depthwise on flattened planes, AVX-512 (contract in ../kernels.h): four vectors of 16 pixels
 * at once, so that each tap's broadcast weight feeds four independent sums; each tap's pixels
 * are one masked load (the lanes whose tap leaves the plane read nothing).
 */
#include "../kernels.h"
#include "avx512_util.h"

/* max(0, v) is v when v is NaN */
static inline __m512 act(__m512 v, int relu) { return relu ? _mm512_max_ps(_mm512_setzero_ps(), v) : v; }

void nconv_f32_dwflat__avx512(int64_t nch, int64_t n, int64_t nt, const int64_t *off, const uint16_t *mask,
                              const float *x, int64_t xs, const float *w, const float *init, float *y, int64_t ys,
                              int relu) {
    const int64_t nv = (n + 15) / 16;
    for (int64_t c = 0; c < nch; c++, x += xs, y += ys, w += nt) {
        const __m512 b = _mm512_set1_ps(init ? init[c] : 0.0f);
        int64_t v = 0;
        for (; v + 4 <= nv; v += 4) {
            __m512 a0 = b, a1 = b, a2 = b, a3 = b;
            const uint16_t *m = mask + v * nt;
            for (int64_t t = 0; t < nt; t++) {
                const __m512 wt = _mm512_set1_ps(w[t]);
                const float *p = x + v * 16 + off[t];
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[t], p), wt, a0);
                a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[nt + t], p + 16), wt, a1);
                a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[2 * nt + t], p + 32), wt, a2);
                a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[3 * nt + t], p + 48), wt, a3);
            }
            float *o = y + v * 16;
            _mm512_storeu_ps(o, act(a0, relu));
            _mm512_storeu_ps(o + 16, act(a1, relu));
            _mm512_storeu_ps(o + 32, act(a2, relu));
            _mm512_mask_storeu_ps(o + 48, nconv__avx512_mask(n - v * 16 - 48), act(a3, relu));
        }
        for (; v < nv; v++) {
            __m512 a0 = b;
            const uint16_t *m = mask + v * nt;
            for (int64_t t = 0; t < nt; t++)
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[t], x + v * 16 + off[t]), _mm512_set1_ps(w[t]), a0);
            _mm512_mask_storeu_ps(y + v * 16, nconv__avx512_mask(n - v * 16), act(a0, relu));
        }
    }
}
