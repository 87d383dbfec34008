/*
 * Forward of small groups, AVX2 + FMA (contract in ../kernels.h). Four
 * pixels at a time (four independent accumulators hide the FMA latency);
 * per tap and group channel j one weight vector serves the four, and each
 * pixel's input vector is spread over its groups' lanes (an in-lane permute
 * for q = 2, 4, a broadcast load for q = 8).
 */
#include "../kernels.h"
#include "avx2_util.h"

static inline __m256 spread(const float *p, __m256 v, int q, int j) {
    if (q == 8) return _mm256_broadcast_ss(p + j);
    if (q == 4) {
        switch (j) {
        case 0: return _mm256_permute_ps(v, 0x00);
        case 1: return _mm256_permute_ps(v, 0x55);
        case 2: return _mm256_permute_ps(v, 0xAA);
        default: return _mm256_permute_ps(v, 0xFF);
        }
    }
    return j == 0 ? _mm256_permute_ps(v, 0xA0) : _mm256_permute_ps(v, 0xF5);
}

#define STEP(J)                                                                         \
    do {                                                                                \
        const __m256 wj = _mm256_loadu_ps(wt + (J) * 8);                                \
        a0 = _mm256_fmadd_ps(wj, spread(p0, v0, q, J), a0);                             \
        if (np > 1) a1 = _mm256_fmadd_ps(wj, spread(p0 + ss, v1, q, J), a1);            \
        if (np > 2) a2 = _mm256_fmadd_ps(wj, spread(p0 + 2 * ss, v2, q, J), a2);        \
        if (np > 3) a3 = _mm256_fmadd_ps(wj, spread(p0 + 3 * ss, v3, q, J), a3);        \
    } while (0)

/* np (1..4) pixels from pixel 0 of src. */
static inline __attribute__((always_inline)) void pixels(const int q, const int np, int64_t ks,
                                                         const float *const *src, int64_t off, int64_t ss,
                                                         const float *w, __m256 init, float *dst, int64_t ds,
                                                         int relu) {
    __m256 a0 = init, a1 = init, a2 = init, a3 = init;
    for (int64_t t = 0; t < ks; t++) {
        const float *p0 = src[t] + off, *wt = w + t * q * 8;
        const __m256 z = _mm256_setzero_ps();
        const __m256 v0 = q < 8 ? _mm256_loadu_ps(p0) : z;
        const __m256 v1 = q < 8 && np > 1 ? _mm256_loadu_ps(p0 + ss) : z;
        const __m256 v2 = q < 8 && np > 2 ? _mm256_loadu_ps(p0 + 2 * ss) : z;
        const __m256 v3 = q < 8 && np > 3 ? _mm256_loadu_ps(p0 + 3 * ss) : z;
        STEP(0);
        STEP(1);
        if (q > 2) {
            STEP(2);
            STEP(3);
        }
        if (q > 4) {
            STEP(4);
            STEP(5);
            STEP(6);
            STEP(7);
        }
    }
    if (relu) {
        const __m256 z = _mm256_setzero_ps();
        a0 = _mm256_max_ps(z, a0), a1 = _mm256_max_ps(z, a1), a2 = _mm256_max_ps(z, a2), a3 = _mm256_max_ps(z, a3);
    }
    _mm256_storeu_ps(dst, a0);
    if (np > 1) _mm256_storeu_ps(dst + ds, a1);
    if (np > 2) _mm256_storeu_ps(dst + 2 * ds, a2);
    if (np > 3) _mm256_storeu_ps(dst + 3 * ds, a3);
}

static inline __attribute__((always_inline)) void run(const int q, int64_t n, int64_t ks, const float *const *src,
                                                      int64_t ss, const float *w, const float *init, float *dst,
                                                      int64_t ds, int relu) {
    const __m256 b = init ? _mm256_loadu_ps(init) : _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) pixels(q, 4, ks, src, i * ss, ss, w, b, dst + i * ds, ds, relu);
    for (; i < n; i++) pixels(q, 1, ks, src, i * ss, ss, w, b, dst + i * ds, ds, relu);
}

void nconv_f32_gfwd__avx2(int64_t n, int64_t q, int64_t ks, const float *const *src, int64_t ss, const float *w,
                          const float *init, float *dst, int64_t ds, int relu) {
    if (q == 2) run(2, n, ks, src, ss, w, init, dst, ds, relu);
    else if (q == 4) run(4, n, ks, src, ss, w, init, dst, ds, relu);
    else run(8, n, ks, src, ss, w, init, dst, ds, relu);
}
