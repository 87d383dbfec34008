/*
 * Depthwise weight gradient on flattened planes, AVX-512 (contract in ../kernels.h): a channel's
 * taps in blocks of up to 12, each block's sums a vector per tap in registers over every vector
 * of 16 pixels of every image, each tap's pixels one masked load (the lanes whose tap leaves the
 * plane read nothing) times the pixels' dy vector, loaded once per block; reduced across lanes
 * once per block.
 */
#include "../kernels.h"
#include "avx512_util.h"

enum { TB = 12 }; /* taps a block: their sums, dy and a load fill 14 of the 32 registers */

/* Taps [t0, t0 + nb) of one channel (nb <= TB); db (the first block's) not NULL: dy's sum too. */
static inline __attribute__((always_inline)) void block(const int NB, int64_t nq, int64_t n, int64_t nt, int64_t t0,
                                                        const int64_t *off, const uint16_t *mask, const float *x,
                                                        int64_t xq, const float *dy, int64_t dyq, float *acc,
                                                        float *db) {
    __m512 s[TB], sd = _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int j = 0; j < NB; j++) s[j] = _mm512_setzero_ps();
    const int64_t nv = (n + 15) / 16;
    for (int64_t q = 0; q < nq; q++, x += xq, dy += dyq)
        for (int64_t v = 0; v < nv; v++) {
            const __m512 d = _mm512_maskz_loadu_ps(nconv__avx512_mask(n - v * 16), dy + v * 16);
            const uint16_t *m = mask + v * nt + t0;
            const float *p = x + v * 16;
#pragma GCC unroll 12
            for (int j = 0; j < NB; j++)
                s[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m[j], p + off[t0 + j]), d, s[j]);
            if (db) sd = _mm512_add_ps(sd, d);
        }
#pragma GCC unroll 12
    for (int j = 0; j < NB; j++) acc[t0 + j] += _mm512_reduce_add_ps(s[j]);
    if (db) *db += _mm512_reduce_add_ps(sd);
}

void nconv_f32_dwflat_bw__avx512(int64_t nch, int64_t nq, int64_t n, int64_t nt, const int64_t *off,
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
