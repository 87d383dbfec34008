/*
 * Depthwise on flattened planes, AVX2 (contract in ../kernels.h): two 16-pixel groups (four
 * vectors of 8) at once, so that each tap's broadcast weight feeds four independent sums; each
 * tap's pixels are a masked load per vector (the lanes whose tap leaves the plane read nothing),
 * the lane masks made from the group's 16 bits.
 */
#include "../kernels.h"
#include "avx2_util.h"

static inline __m256 act(__m256 v, int relu) { return relu ? _mm256_max_ps(_mm256_setzero_ps(), v) : v; }

/* A vector's first `left` lanes (all 8 at most) into o. */
static inline void store(float *o, int64_t left, __m256 v) {
    if (left >= 8) _mm256_storeu_ps(o, v);
    else if (left > 0) _mm256_maskstore_ps(o, nconv__avx2_mask(left), v);
}

void nconv_f32_dwflat__avx2(int64_t nch, int64_t n, int64_t nt, const int64_t *off, const uint16_t *mask,
                            const float *x, int64_t xs, const float *w, const float *init, float *y, int64_t ys,
                            int relu) {
    const int64_t ng = (n + 15) / 16;
    for (int64_t c = 0; c < nch; c++, x += xs, y += ys, w += nt) {
        const __m256 b = _mm256_set1_ps(init ? init[c] : 0.0f);
        for (int64_t g = 0; g < ng; g += 2) {
            const int two = g + 1 < ng;
            __m256 a0 = b, a1 = b, a2 = b, a3 = b;
            const uint16_t *m = mask + g * nt;
            for (int64_t t = 0; t < nt; t++) {
                const __m256 wt = _mm256_set1_ps(w[t]);
                const float *p = x + g * 16 + off[t];
                a0 = _mm256_fmadd_ps(_mm256_maskload_ps(p, nconv__avx2_bits_mask(m[t], 0)), wt, a0);
                a1 = _mm256_fmadd_ps(_mm256_maskload_ps(p + 8, nconv__avx2_bits_mask(m[t], 1)), wt, a1);
                if (two) {
                    a2 = _mm256_fmadd_ps(_mm256_maskload_ps(p + 16, nconv__avx2_bits_mask(m[nt + t], 0)), wt, a2);
                    a3 = _mm256_fmadd_ps(_mm256_maskload_ps(p + 24, nconv__avx2_bits_mask(m[nt + t], 1)), wt, a3);
                }
            }
            float *o = y + g * 16;
            const int64_t left = n - g * 16;
            store(o, left, act(a0, relu));
            store(o + 8, left - 8, act(a1, relu));
            store(o + 16, left - 16, act(a2, relu));
            store(o + 24, left - 24, act(a3, relu));
        }
    }
}
