/*
 * Depthwise rows' weight gradient on planes, AVX-512 (contract in ../kernels.h). The sums of a
 * group of taps stay in registers over every image and row, 16 pixels at a time. Where output rows
 * are 1 or 2 source rows apart and tap rows 1 (3, 5 or 7 taps a row), each vector of pixels runs
 * down the source rows: a source row's tap vectors are loaded once and feed every output row that
 * reads it, and the dy vectors of those rows pass from row to row in registers. Loads, not
 * products, bound this kernel (a 64-byte load off a line's start reads two lines): three taps one
 * column apart share two loads (taps3). Other shapes run over the (output row, tap row) pairs.
 * Tap rows that the registers do not hold take further passes. At pixel step 2 a tap's vector is
 * the even lanes of two loads. Lanes past n are zeros in dy and in the taps alike, so that no
 * product 0 * Inf enters a sum; rows of zeros take no loads, their products (dy times 0) summed
 * apart to keep a non-finite dy's NaN.
 */
#include "../f32_dwrow_bw_dispatch.h"
#include "../kernels.h"

#include <immintrin.h>

enum { CHUNK = 8 }; /* vectors of a row whose masks are made once for all rows */

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* The lanes of a vector read at x that lie in [0, len). */
static inline __mmask16 window(int64_t x, int64_t len) {
    const int64_t lo = x >= 0 ? 0 : -x < 16 ? -x : 16, hi = len - x >= 16 ? 16 : len - x > 0 ? len - x : 0;
    return lo >= hi ? 0 : (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/* The masks of the vectors i0 + 16 v, v < nv, for taps b0 .. b0 + NB: keep, the pixels before n;
 * k0 (step 1: and keep) and k1, the lanes of the tap's one or two loads within the row. */
static inline __attribute__((always_inline)) void masks(const int64_t NB, const int64_t STEP, int64_t b0,
                                                        int64_t i0, int64_t nv, const bw_args *g,
                                                        __mmask16 keep[CHUNK], __mmask16 k0[CHUNK][8],
                                                        __mmask16 k1[CHUNK][8]) {
    for (int64_t v = 0; v < nv; v++) {
        const int64_t i = i0 + 16 * v;
        keep[v] = tail_mask(g->n - i);
#pragma GCC unroll 8
        for (int64_t b = 0; b < NB; b++) {
            const int64_t x = g->toff[b0 + b] + i * STEP;
            k0[v][b] = STEP == 1 ? window(x, g->len) & keep[v] : window(x, g->len);
            k1[v][b] = STEP == 1 ? 0 : window(x + 16, g->len);
        }
    }
}

/* A tap's 16 pixels from row position x (p NULL: zeros). */
static inline __attribute__((always_inline)) __m512 tap(const int64_t STEP, const float *p, int64_t x, __mmask16 k0,
                                                        __mmask16 k1, __mmask16 keep) {
    if (!p) return _mm512_setzero_ps();
    if (STEP == 1) return _mm512_maskz_loadu_ps(k0, p + x);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_maskz_permutex2var_ps(keep, _mm512_maskz_loadu_ps(k0, p + x), even,
                                        _mm512_maskz_loadu_ps(k1, p + x + 16));
}

/* A tap's 16 pixels at p (within the row, no pixel past n). */
static inline __attribute__((always_inline)) __m512 tap_in(const int64_t STEP, const float *p) {
    if (STEP == 1) return _mm512_loadu_ps(p);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(_mm512_loadu_ps(p), even, _mm512_loadu_ps(p + 16));
}

/* Three taps one column apart (CONSEC) from shared loads, p at the first's pixel i: step 1, two
 * loads (positions x, x + 2) and a permute for the middle tap; step 2, the even and odd lanes of
 * two loads and the third tap the first's lanes moved by one, its last from a third load of one
 * lane. w: the loads' masks (step 1: w[1] with keep in it; step 2: w[2] of lane 0 only). */
static inline __attribute__((always_inline)) void taps3(const int64_t STEP, const int MASKED, const float *p,
                                                        const __mmask16 *w, __mmask16 keep, __m512 *x) {
    if (STEP == 1) {
        const __m512i mid = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30);
        const __m512 a = MASKED ? _mm512_maskz_loadu_ps(w[0], p) : _mm512_loadu_ps(p);
        const __m512 c = MASKED ? _mm512_maskz_loadu_ps(w[1], p + 2) : _mm512_loadu_ps(p + 2);
        x[0] = MASKED ? _mm512_maskz_mov_ps(keep, a) : a;
        x[1] = MASKED ? _mm512_maskz_permutex2var_ps(keep, a, mid, c) : _mm512_permutex2var_ps(a, mid, c);
        x[2] = c;
        return;
    }
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    const __m512 a = MASKED ? _mm512_maskz_loadu_ps(w[0], p) : _mm512_loadu_ps(p);
    const __m512 b = MASKED ? _mm512_maskz_loadu_ps(w[1], p + 16) : _mm512_loadu_ps(p + 16);
    const __m512 c = _mm512_maskz_loadu_ps(w[2], p + 32), e = _mm512_permutex2var_ps(a, even, b);
    x[0] = MASKED ? _mm512_maskz_mov_ps(keep, e) : e;
    x[1] = MASKED ? _mm512_maskz_permutex2var_ps(keep, a, odd, b) : _mm512_permutex2var_ps(a, odd, b);
    x[2] = MASKED ? _mm512_maskz_permutex2var_ps(keep, e, next, c) : _mm512_permutex2var_ps(e, next, c);
}

/* by_source's products of source row j (at p, NULL: zeros) at pixel i, the output rows that read
 * it as tap row a having their dy at d[a] (valid[a]): into s, or for a row of zeros, dy times 0
 * into z (NaN where a dy is not finite, as those products would make it). */
static inline __attribute__((always_inline)) void source_products(const int64_t NA, const int64_t NB,
                                                                  const int64_t STEP, const int MASKED,
                                                                  const int CONSEC, const float *p, int64_t i,
                                                                  const bw_args *g,
                                                                  const __mmask16 *k0, const __mmask16 *k1,
                                                                  __mmask16 keep, const __m512 *d, const int *valid,
                                                                  __m512 *s, __m512 *z) {
    if (!p) {
#pragma GCC unroll 8
        for (int64_t a = 0; a < NA; a++)
            if (valid[a]) z[a] = _mm512_fmadd_ps(d[a], _mm512_setzero_ps(), z[a]);
        return;
    }
    __m512 x[8];
    if (CONSEC) taps3(STEP, MASKED, p + g->toff[0] + i * STEP, k0, keep, x);
    else
#pragma GCC unroll 8
        for (int64_t b = 0; b < NB; b++)
            x[b] = MASKED ? tap(STEP, p, g->toff[b] + i * STEP, k0[b], k1[b], keep)
                          : tap_in(STEP, p + g->toff[b] + i * STEP);
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++)
        if (valid[a])
#pragma GCC unroll 8
            for (int64_t b = 0; b < NB; b++) s[a * NB + b] = _mm512_fmadd_ps(d[a], x[b], s[a * NB + b]);
}

static inline __attribute__((always_inline)) __m512 dy_at(const int MASKED, const float *p, __mmask16 keep) {
    return MASKED ? _mm512_maskz_loadu_ps(keep, p) : _mm512_loadu_ps(p);
}

/* by_source over the source rows [j0, j1) at pixel i: rows every tap row of which some output row
 * reads (RS 1: j in [NA - 1, m - 1]), a row's dy vectors passed on to the next row's. */
static inline __attribute__((always_inline)) void inner_rows(const int64_t NA, const int64_t NB, const int64_t STEP,
                                                             const int MASKED, const int CONSEC, int64_t a0,
                                                             int64_t j0, int64_t j1,
                                                             const float *dq, int64_t xoff, int64_t i,
                                                             const bw_args *g, const __mmask16 *k0,
                                                             const __mmask16 *k1, __mmask16 keep, __m512 *s,
                                                             __m512 *z) {
    __m512 d[8];
    int valid[8];
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) valid[a] = 1;
    /* as the row before j0 left them: d[a], the dy of row j0 - 1 - a */
    d[NA - 1] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int64_t a = 0; a + 1 < NA; a++) d[a] = dy_at(MASKED, dq + (j0 - 1 - a) * g->dys + i, keep);
    for (int64_t j = j0; j < j1; j++) {
#pragma GCC unroll 8
        for (int64_t a = NA - 1; a > 0; a--) d[a] = d[a - 1];
        d[0] = dy_at(MASKED, dq + j * g->dys + i, keep);
        const float *row = g->rows[a0 + j];
        source_products(NA, NB, STEP, MASKED, CONSEC, row ? row + xoff : NULL, i, g, k0, k1, keep, d, valid, s, z);
    }
}

/* inner_rows at output rows 2 source rows apart: the pairs of source rows (j, j + 1), j even in
 * [j0, j1), each of whose tap rows some output row reads: row j as the even tap rows, j + 1 as the
 * odd ones, both of output rows j / 2 - k (k = a / 2); the pair's dy vectors passed on. */
static inline __attribute__((always_inline)) void inner_pairs(const int64_t NA, const int64_t NB,
                                                              const int64_t STEP, const int MASKED, const int CONSEC,
                                                              int64_t a0, int64_t j0, int64_t j1, const float *dq,
                                                              int64_t xoff, int64_t i, const bw_args *g,
                                                              const __mmask16 *k0, const __mmask16 *k1,
                                                              __mmask16 keep, __m512 *s, __m512 *z) {
    enum { NW = 4 }; /* (NA + 1) / 2 at most */
    __m512 w[NW], d[8];
    int even[8], odd[8];
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) even[a] = a % 2 == 0, odd[a] = a % 2 == 1;
    /* as the pair before j0 left them: w[k], the dy of output row j0 / 2 - 1 - k */
#pragma GCC unroll 4
    for (int64_t k = 0; k < (NA + 1) / 2; k++)
        w[k] = k + 1 < (NA + 1) / 2 ? dy_at(MASKED, dq + (j0 / 2 - 1 - k) * g->dys + i, keep) : _mm512_setzero_ps();
    for (int64_t j = j0; j < j1; j += 2) {
#pragma GCC unroll 4
        for (int64_t k = (NA + 1) / 2 - 1; k > 0; k--) w[k] = w[k - 1];
        w[0] = dy_at(MASKED, dq + j / 2 * g->dys + i, keep);
#pragma GCC unroll 8
        for (int64_t a = 0; a < NA; a++) d[a] = w[a / 2];
        const float *r0 = g->rows[a0 + j], *r1 = g->rows[a0 + j + 1];
        source_products(NA, NB, STEP, MASKED, CONSEC, r0 ? r0 + xoff : NULL, i, g, k0, k1, keep, d, even, s, z);
        source_products(NA, NB, STEP, MASKED, CONSEC, r1 ? r1 + xoff : NULL, i, g, k0, k1, keep, d, odd, s, z);
    }
}

/* by_source over the source row j at pixel i with its checks: which output rows read it. */
static inline __attribute__((always_inline)) void edge_row(const int64_t NA, const int64_t NB, const int64_t STEP,
                                                           const int64_t RS, const int MASKED, const int CONSEC,
                                                           int64_t a0, int64_t j,
                                                           const float *dq, int64_t xoff, int64_t i, const bw_args *g,
                                                           const __mmask16 *k0, const __mmask16 *k1, __mmask16 keep,
                                                           __m512 *s, __m512 *z) {
    __m512 d[8];
    int valid[8];
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) {
        const int64_t t = j - a;
        valid[a] = t >= 0 && t % RS == 0 && t / RS < g->m;
        d[a] = valid[a] ? dy_at(MASKED, dq + t / RS * g->dys + i, keep) : _mm512_setzero_ps();
    }
    const float *row = g->rows[a0 + j];
    source_products(NA, NB, STEP, MASKED, CONSEC, row ? row + xoff : NULL, i, g, k0, k1, keep, d, valid, s, z);
}

/* by_source's source rows at pixel i: those of the edges with their checks, the others in a run. */
static inline __attribute__((always_inline)) void source_vector(const int64_t NA, const int64_t NB,
                                                                const int64_t STEP, const int64_t RS, const int MASKED,
                                                                const int CONSEC, int64_t a0, int64_t j0, int64_t j1,
                                                                int64_t nj, const float *dq, int64_t xoff, int64_t i,
                                                                const bw_args *g, const __mmask16 *k0,
                                                                const __mmask16 *k1, __mmask16 keep, __m512 *s,
                                                                __m512 *z) {
    const int C3 = CONSEC && NB == 3;
    for (int64_t j = 0; j < j0; j++) edge_row(NA, NB, STEP, RS, MASKED, C3, a0, j, dq, xoff, i, g, k0, k1, keep, s, z);
    if (RS == 1) inner_rows(NA, NB, STEP, MASKED, C3, a0, j0, j1, dq, xoff, i, g, k0, k1, keep, s, z);
    else inner_pairs(NA, NB, STEP, MASKED, C3, a0, j0, j1, dq, xoff, i, g, k0, k1, keep, s, z);
    for (int64_t j = j1; j < nj; j++) edge_row(NA, NB, STEP, RS, MASKED, C3, a0, j, dq, xoff, i, g, k0, k1, keep, s, z);
}

/* Tap rows a0 .. a0 + NA (one source row apart), all NB taps, output rows RS source rows apart:
 * for each vector of pixels, the loop over the source rows (source row a0 + j: output row r
 * reads it as tap row a where j = r RS + a). */
static inline __attribute__((always_inline)) void by_source(const int64_t NA, const int64_t NB, const int64_t STEP,
                                                            const int64_t RS, int64_t a0, const bw_args *g,
                                                            float *acc) {
    __m512 s[32], z[8];
#pragma GCC unroll 32
    for (int64_t t = 0; t < NA * NB; t++) s[t] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) z[a] = _mm512_setzero_ps();
    const int64_t m = g->m, nj = (m - 1) * RS + NA;
    /* Where every tap row (RS 2: of the row's parity) is read: RS 1, the rows [NA - 1, m); RS 2,
     * the pairs from the first even row >= NA - 1 to row 2 m - 1. The others take edge_row. */
    int64_t j0 = RS == 1 ? NA - 1 : NA / 2 * 2, j1 = RS == 1 ? m : 2 * m <= nj ? 2 * m : nj / 2 * 2;
    if (j0 >= j1) j0 = j1 = nj;
    const int consec = NB == 3 && g->toff[1] == g->toff[0] + 1 && g->toff[2] == g->toff[0] + 2;
    for (int64_t q = 0; q < g->nq; q++) {
        const float *dq = g->dy + q * g->dyq;
        const int64_t xoff = q * g->xq;
        for (int64_t i = 0; i < g->n; i += 16) {
            const __mmask16 keep = tail_mask(g->n - i);
            __mmask16 k0[8], k1[8];
            int in = keep == 0xffff;
#pragma GCC unroll 8
            for (int64_t b = 0; b < NB; b++) {
                const int64_t x = g->toff[b] + i * STEP;
                k0[b] = STEP == 1 ? window(x, g->len) & keep : window(x, g->len);
                k1[b] = STEP == 1 ? 0 : window(x + 16, g->len);
                in = in && k0[b] == 0xffff && (STEP == 1 || k1[b] == 0xffff);
            }
            if (consec) {
                /* the loads' masks of taps3 instead */
                const int64_t x = g->toff[0] + i * STEP;
                k0[0] = window(x, g->len);
                k0[1] = STEP == 1 ? window(x + 2, g->len) & keep : window(x + 16, g->len);
                k0[2] = window(x + 32, g->len) & 1;
                if (in) source_vector(NA, NB, STEP, RS, 0, 1, a0, j0, j1, nj, dq, xoff, i, g, k0, k1, keep, s, z);
                else source_vector(NA, NB, STEP, RS, 1, 1, a0, j0, j1, nj, dq, xoff, i, g, k0, k1, keep, s, z);
            } else if (in) {
                source_vector(NA, NB, STEP, RS, 0, 0, a0, j0, j1, nj, dq, xoff, i, g, k0, k1, keep, s, z);
            } else {
                source_vector(NA, NB, STEP, RS, 1, 0, a0, j0, j1, nj, dq, xoff, i, g, k0, k1, keep, s, z);
            }
        }
    }
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) {
        const float za = _mm512_reduce_add_ps(z[a]);
#pragma GCC unroll 8
        for (int64_t b = 0; b < NB; b++) acc[(a0 + a) * g->nk + b] += _mm512_reduce_add_ps(s[a * NB + b]) + za;
    }
}

/* Tap row a, taps b0 .. b0 + NB: the loop over the output rows. */
static inline __attribute__((always_inline)) void by_output(const int64_t NB, const int64_t STEP, int64_t a,
                                                            int64_t b0, const bw_args *g, float *acc) {
    __m512 s[8];
#pragma GCC unroll 8
    for (int64_t b = 0; b < NB; b++) s[b] = _mm512_setzero_ps();
    for (int64_t q = 0; q < g->nq; q++)
        for (int64_t i0 = 0; i0 < g->n; i0 += 16 * CHUNK) {
            const int64_t nv = (g->n - i0 + 15) / 16 < CHUNK ? (g->n - i0 + 15) / 16 : CHUNK;
            __mmask16 keep[CHUNK], k0[CHUNK][8], k1[CHUNK][8];
            masks(NB, STEP, b0, i0, nv, g, keep, k0, k1);
            for (int64_t r = 0; r < g->m; r++) {
                const float *row = g->rows[r * g->rs + a * g->rd], *p = row ? row + q * g->xq : NULL;
                for (int64_t v = 0; v < nv; v++) {
                    const int64_t i = i0 + 16 * v;
                    const __m512 d = _mm512_maskz_loadu_ps(keep[v], g->dy + q * g->dyq + r * g->dys + i);
#pragma GCC unroll 8
                    for (int64_t b = 0; b < NB; b++)
                        s[b] = _mm512_fmadd_ps(d, tap(STEP, p, g->toff[b0 + b] + i * STEP, k0[v][b], k1[v][b], keep[v]),
                                               s[b]);
                }
            }
        }
#pragma GCC unroll 8
    for (int64_t b = 0; b < NB; b++) acc[a * g->nk + b0 + b] += _mm512_reduce_add_ps(s[b]);
}

static float dy_sum(const bw_args *g) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t q = 0; q < g->nq; q++)
        for (int64_t r = 0; r < g->m; r++)
            for (int64_t i = 0; i < g->n; i += 16)
                s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(tail_mask(g->n - i), g->dy + q * g->dyq + r * g->dys + i));
    return _mm512_reduce_add_ps(s);
}

void nconv_f32_dwrow_bw__avx512(int64_t nq, int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs,
                                int64_t rd, int64_t xq, int64_t nk, const int64_t *toff, int64_t step, int64_t len,
                                const float *dy, int64_t dys, int64_t dyq, float *acc, float *db) {
    NCONV_DWROW_BW_BODY(3, 3, 2)
}
