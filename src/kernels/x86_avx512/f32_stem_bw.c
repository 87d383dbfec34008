/*
 * Backward-weights of few input channels, AVX-512 (contract in ../kernels.h). A tile of T taps by
 * V vectors of 16 output channels is summed in registers over the whole run of pixels: per
 * pixel, V vectors of dy are loaded once and each tap's input is one broadcast read where it
 * lies, so neither x nor dy is copied. Tiles hold at most 24 sums, leaving registers for dy and
 * the broadcast, and the taps are split into tiles of near-equal size (27 taps by 2 vectors: 14
 * and 13). Each pixel of a pass also prefetches one line of `ahead`; db's sums follow while dy is
 * in L1.
 */
#include "../kernels.h"

#include <immintrin.h>

static inline __attribute__((always_inline)) void tile(const int V, const int T, int64_t n, const float *x,
                                                       const int64_t *xo, int64_t xs, const float *dy, int64_t ds,
                                                       float *acc, const int64_t *ao, nconv_ahead *pf) {
    __m512 s[24][4];
    for (int t = 0; t < T; t++)
        for (int v = 0; v < V; v++) s[t][v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i++, x += xs, dy += ds) {
        __m512 d[4];
        for (int v = 0; v < V; v++) d[v] = _mm512_loadu_ps(dy + 16 * v);
        nconv__ahead_next(pf);
        for (int t = 0; t < T; t++) {
            const __m512 b = _mm512_set1_ps(x[xo[t]]);
            for (int v = 0; v < V; v++) s[t][v] = _mm512_fmadd_ps(b, d[v], s[t][v]);
        }
    }
    for (int t = 0; t < T; t++)
        for (int v = 0; v < V; v++) {
            float *p = acc + ao[t] + 16 * v;
            _mm512_store_ps(p, _mm512_add_ps(_mm512_load_ps(p), s[t][v]));
        }
}

#define TAPS6(X, V) X(V, 1) X(V, 2) X(V, 3) X(V, 4) X(V, 5) X(V, 6)
#define TAPS9(X, V) TAPS6(X, V) X(V, 7) X(V, 8) X(V, 9)
#define TAPS14(X, V) TAPS9(X, V) X(V, 10) X(V, 11) X(V, 12) X(V, 13) X(V, 14)
#define TAPS24(X, V)                                                                                         \
    TAPS14(X, V) X(V, 15) X(V, 16) X(V, 17) X(V, 18) X(V, 19) X(V, 20) X(V, 21) X(V, 22) X(V, 23) X(V, 24)
#define CASE(V, T)                                                                                           \
    case T: tile(V, T, n, x, xo + t0, xs, dy + 16 * v0, ds, acc + 16 * v0, ao + t0, &pf); break;

/* The most taps of a tile of V vectors: T * V sums, V vectors of dy and a broadcast in 32 registers. */
static int64_t max_taps(int64_t V) { return V == 1 ? 24 : V == 2 ? 14 : V == 3 ? 9 : 6; }

void nconv_f32_stem_bw__avx512(int64_t n, int64_t op, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                               const float *dy, int64_t ds, float *acc, const int64_t *ao,
                               float *db, const nconv_lines *ahead) {
    const int64_t nv = op / 16;
    nconv_ahead pf = nconv__ahead_start(ahead);
    for (int64_t v0 = 0; v0 < nv;) {
        /* groups of 4 vectors, 3 where 5 or 6 are left (not 4 and a lone 1 or 2) */
        const int64_t left = nv - v0, V = left == 4 || left >= 7 ? 4 : left >= 5 ? 3 : left;
        const int64_t tiles = (nt + max_taps(V) - 1) / max_taps(V);
        for (int64_t j = 0; j < tiles; j++) {
            const int64_t t0 = nt * j / tiles, T = nt * (j + 1) / tiles - t0;
            switch (V) {
            case 1: switch (T) { TAPS24(CASE, 1) } break;
            case 2: switch (T) { TAPS14(CASE, 2) } break;
            case 3: switch (T) { TAPS9(CASE, 3) } break;
            default: switch (T) { TAPS6(CASE, 4) } break;
            }
        }
        v0 += V;
    }
    /* db: dy is in L1 now; 2 vectors a pass, each in 4 sums (pixel i into sum i % 4: the adds' latency) */
    for (int64_t o = 0; o < op && db; o += 32) {
        const int V = op - o >= 32 ? 2 : 1;
        __m512 s[2][4];
        for (int v = 0; v < 2; v++)
            for (int j = 0; j < 4; j++) s[v][j] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; j++)
                for (int v = 0; v < V; v++)
                    s[v][j] = _mm512_add_ps(s[v][j], _mm512_loadu_ps(dy + (i + j) * ds + o + 16 * v));
        for (int j = 0; i + j < n; j++)
            for (int v = 0; v < V; v++)
                s[v][j] = _mm512_add_ps(s[v][j], _mm512_loadu_ps(dy + (i + j) * ds + o + 16 * v));
        for (int v = 0; v < V; v++) {
            float *p = db + o + 16 * v;
            const __m512 t = _mm512_add_ps(_mm512_add_ps(s[v][0], s[v][1]), _mm512_add_ps(s[v][2], s[v][3]));
            _mm512_store_ps(p, _mm512_add_ps(_mm512_load_ps(p), t));
        }
    }
}
