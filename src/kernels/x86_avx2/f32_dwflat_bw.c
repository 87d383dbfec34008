/*
 * Depthwise weight gradient on flattened planes, AVX2 (contract in ../kernels.h): a channel's
 * taps in blocks of up to 12, each block's sums a vector per tap in registers over every 16
 * pixels (two vectors of 8) of every image, each tap's pixels a masked load per vector (the
 * lanes whose tap leaves the plane read nothing) times the pixels' dy vector, loaded once per
 * block; reduced across lanes once per block.
 */
#include "../kernels.h"
#include "avx2_util.h"

enum { TB = 12 }; /* taps a block: their sums and dy fill 14 of the 16 registers */

static inline float hsum(__m256 v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

static inline __attribute__((always_inline)) void block(const int NB, int64_t nq, int64_t n, int64_t nt, int64_t t0,
                                                        const int64_t *off, const uint16_t *mask, const float *x,
                                                        int64_t xq, const float *dy, int64_t dyq, float *acc,
                                                        float *db) {
    __m256 s[TB], sd = _mm256_setzero_ps();
#pragma GCC unroll 12
    for (int j = 0; j < NB; j++) s[j] = _mm256_setzero_ps();
    const int64_t nv = (n + 15) / 16;
    for (int64_t q = 0; q < nq; q++, x += xq, dy += dyq)
        for (int64_t v = 0; v < nv; v++)
            for (int h = 0; h < 2; h++) {
                const int64_t left = n - v * 16 - h * 8;
                if (left <= 0) break;
                const __m256 d = _mm256_maskload_ps(dy + v * 16 + h * 8, nconv__avx2_mask(left));
                const uint16_t *m = mask + v * nt + t0;
                const float *p = x + v * 16 + h * 8;
#pragma GCC unroll 12
                for (int j = 0; j < NB; j++)
                    s[j] = _mm256_fmadd_ps(_mm256_maskload_ps(p + off[t0 + j], nconv__avx2_bits_mask(m[j], h)), d, s[j]);
                if (db) sd = _mm256_add_ps(sd, d);
            }
#pragma GCC unroll 12
    for (int j = 0; j < NB; j++) acc[t0 + j] += hsum(s[j]);
    if (db) *db += hsum(sd);
}

void nconv_f32_dwflat_bw__avx2(int64_t nch, int64_t nq, int64_t n, int64_t nt, const int64_t *off,
                               const uint16_t *mask, const float *x, int64_t xs, int64_t xq, const float *dy,
                               int64_t dys, int64_t dyq, float *acc, float *db) {
    for (int64_t c = 0; c < nch; c++, x += xs, dy += dys, acc += nt) {
        for (int64_t t0 = 0; t0 < nt; t0 += TB) {
            float *dbc = db && t0 == 0 ? db + c : NULL;
            switch (nt - t0 < TB ? nt - t0 : TB) {
#define CASE(k) \
    case k: block(k, nq, n, nt, t0, off, mask, x, xq, dy, dyq, acc, dbc); break;
                CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8) CASE(9) CASE(10) CASE(11) CASE(12)
#undef CASE
            }
        }
    }
}
