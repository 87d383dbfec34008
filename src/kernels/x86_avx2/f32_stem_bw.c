/*
 * Backward-weights of few input channels, AVX2 + FMA (contract in ../kernels.h). A tile of up to
 * 6 taps by 2 vectors of 8 output channels is summed in registers over the whole run of pixels:
 * per pixel, the 2 vectors of dy are loaded once and each tap's input is one broadcast read
 * where it lies, so neither x nor dy is copied. The taps are split into tiles of near-equal size.
 * The sums are named variables, not an array: GCC otherwise keeps the array in memory. Each pixel
 * of a pass also prefetches one line of `ahead`; db's sums follow while dy is in L1.
 */
#include "../kernels.h"
#include "avx2_util.h"

#define EACH_TAP(X) X(0) X(1) X(2) X(3) X(4) X(5)

static inline __attribute__((always_inline)) void tile(const int T, int64_t n, const float *x, const int64_t *xo,
                                                       int64_t xs, const float *dy, int64_t ds, float *acc,
                                                       const int64_t *ao, nconv_ahead *pf) {
#define DECLARE(t) __m256 s##t##_0 = _mm256_setzero_ps(), s##t##_1 = _mm256_setzero_ps();
    EACH_TAP(DECLARE)
    for (int64_t i = 0; i < n; i++, x += xs, dy += ds) {
        const __m256 d0 = _mm256_loadu_ps(dy), d1 = _mm256_loadu_ps(dy + 8);
        nconv__ahead_next(pf);
#define ADD(t)                                                 \
    if (T > t) {                                               \
        const __m256 b = _mm256_broadcast_ss(x + xo[t]);       \
        s##t##_0 = _mm256_fmadd_ps(b, d0, s##t##_0);           \
        s##t##_1 = _mm256_fmadd_ps(b, d1, s##t##_1);           \
    }
        EACH_TAP(ADD)
    }
#define STORE(t)                                                                   \
    if (T > t) {                                                                   \
        float *p = acc + ao[t];                                                    \
        _mm256_store_ps(p, _mm256_add_ps(_mm256_load_ps(p), s##t##_0));            \
        _mm256_store_ps(p + 8, _mm256_add_ps(_mm256_load_ps(p + 8), s##t##_1));    \
    }
    EACH_TAP(STORE)
}

void nconv_f32_stem_bw__avx2(int64_t n, int64_t op, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                             const float *dy, int64_t ds, float *acc, const int64_t *ao,
                             float *db, const nconv_lines *ahead) {
    const int64_t tiles = (nt + 5) / 6;
    nconv_ahead pf = nconv__ahead_start(ahead);
    for (int64_t o0 = 0; o0 < op; o0 += 16)
        for (int64_t j = 0; j < tiles; j++) {
            const int64_t t0 = nt * j / tiles, T = nt * (j + 1) / tiles - t0;
            const float *d = dy + o0;
            float *a = acc + o0;
            switch (T) {
            case 1: tile(1, n, x, xo + t0, xs, d, ds, a, ao + t0, &pf); break;
            case 2: tile(2, n, x, xo + t0, xs, d, ds, a, ao + t0, &pf); break;
            case 3: tile(3, n, x, xo + t0, xs, d, ds, a, ao + t0, &pf); break;
            case 4: tile(4, n, x, xo + t0, xs, d, ds, a, ao + t0, &pf); break;
            case 5: tile(5, n, x, xo + t0, xs, d, ds, a, ao + t0, &pf); break;
            default: tile(6, n, x, xo + t0, xs, d, ds, a, ao + t0, &pf); break;
            }
        }
    /* db: dy is in L1 now; 2 vectors a pass, each in 4 sums (pixel i into sum i % 4: the adds' latency) */
    for (int64_t o = 0; o < op && db; o += 16) {
        __m256 s0[4], s1[4];
        for (int j = 0; j < 4; j++) s0[j] = s1[j] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; j++)
                s0[j] = _mm256_add_ps(s0[j], _mm256_loadu_ps(dy + (i + j) * ds + o)),
                s1[j] = _mm256_add_ps(s1[j], _mm256_loadu_ps(dy + (i + j) * ds + o + 8));
        for (int j = 0; i + j < n; j++)
            s0[j] = _mm256_add_ps(s0[j], _mm256_loadu_ps(dy + (i + j) * ds + o)),
            s1[j] = _mm256_add_ps(s1[j], _mm256_loadu_ps(dy + (i + j) * ds + o + 8));
        const __m256 t0 = _mm256_add_ps(_mm256_add_ps(s0[0], s0[1]), _mm256_add_ps(s0[2], s0[3]));
        const __m256 t1 = _mm256_add_ps(_mm256_add_ps(s1[0], s1[1]), _mm256_add_ps(s1[2], s1[3]));
        _mm256_store_ps(db + o, _mm256_add_ps(_mm256_load_ps(db + o), t0));
        _mm256_store_ps(db + o + 8, _mm256_add_ps(_mm256_load_ps(db + o + 8), t1));
    }
}
