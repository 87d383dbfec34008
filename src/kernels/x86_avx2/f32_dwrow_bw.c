/*
 * Depthwise rows' weight gradient on planes, AVX2 (contract in ../kernels.h). The sums of a group
 * of taps stay in registers over every image and row, 8 pixels at a time. Where output rows are 1
 * or 2 source rows apart and tap rows 1 (3, 5 or 7 taps a row), each vector of pixels runs down
 * the source rows: a source row's tap vectors are loaded once and feed every output row that
 * reads it, and the dy vectors of those rows pass from row to row in registers. Other shapes run
 * over the (output row, tap row) pairs. Tap rows that the registers do not hold take further
 * passes. At pixel step 2 a tap's vector is the even lanes of two loads. Vectors whose every tap
 * lies within the row, and no pixel past n, load without masks; elsewhere lanes past n are zeros
 * in dy and in the taps alike, so that no product 0 * Inf enters a sum; rows of zeros take no
 * loads, their products (dy times 0) summed apart to keep a non-finite dy's NaN.
 */
#include "../f32_dwrow_bw_dispatch.h"
#include "../kernels.h"
#include "avx2_util.h"

#include <immintrin.h>

enum { CHUNK = 8 }; /* vectors of a row whose masks are made once for all rows */

/* The lanes of a vector read at x that lie in [0, len), as a maskload's mask. */
static inline __m256i window(int64_t x, int64_t len) {
    const int64_t lo = x >= 0 ? 0 : -x < 8 ? -x : 8, hi = len - x >= 8 ? 8 : len - x > 0 ? len - x : 0;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), lane),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane));
}

/* The masks of the vectors i0 + 8 v, v < nv, for taps b0 .. b0 + NB: keep, the pixels before n;
 * k0 (step 1: and keep) and k1, the lanes of the tap's one or two loads within the row. */
static inline __attribute__((always_inline)) void masks(const int64_t NB, const int64_t STEP, int64_t b0,
                                                        int64_t i0, int64_t nv, const bw_args *g,
                                                        __m256i keep[CHUNK], __m256i k0[CHUNK][8],
                                                        __m256i k1[CHUNK][8]) {
    for (int64_t v = 0; v < nv; v++) {
        const int64_t i = i0 + 8 * v;
        keep[v] = nconv__avx2_mask(g->n - i);
#pragma GCC unroll 8
        for (int64_t b = 0; b < NB; b++) {
            const int64_t x = g->toff[b0 + b] + i * STEP;
            k0[v][b] = STEP == 1 ? _mm256_and_si256(window(x, g->len), keep[v]) : window(x, g->len);
            k1[v][b] = STEP == 1 ? keep[v] : window(x + 8, g->len);
        }
    }
}

static inline __attribute__((always_inline)) __m256 load8(const int MASKED, const float *p, __m256i k) {
    return MASKED ? _mm256_maskload_ps(p, k) : _mm256_loadu_ps(p);
}

/* A tap's 8 pixels from row position x (p NULL: zeros). */
static inline __attribute__((always_inline)) __m256 tap(const int64_t STEP, const int MASKED, const float *p,
                                                        int64_t x, __m256i k0, __m256i k1, __m256i keep) {
    if (!p) return _mm256_setzero_ps();
    if (STEP == 1) return load8(MASKED, p + x, k0);
    const __m256 ev = _mm256_shuffle_ps(load8(MASKED, p + x, k0), load8(MASKED, p + x + 8, k1), 0x88);
    const __m256 v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8));
    return MASKED ? _mm256_and_ps(v, _mm256_castsi256_ps(keep)) : v;
}

/* A fixed order of the lanes' sum. */
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* by_source's products of source row j (at p, NULL: zeros) at pixel i, the output rows that read
 * it as tap row a having their dy at d[a] (valid[a]): into s, or for a row of zeros, dy times 0
 * into z (NaN where a dy is not finite, as those products would make it). */
static inline __attribute__((always_inline)) void source_products(const int64_t NA, const int64_t NB,
                                                                  const int64_t STEP, const int MASKED,
                                                                  const float *p, int64_t i, const bw_args *g,
                                                                  const __m256i *k0, const __m256i *k1, __m256i keep,
                                                                  const __m256 *d, const int *valid, __m256 *s,
                                                                  __m256 *z) {
    if (!p) {
#pragma GCC unroll 8
        for (int64_t a = 0; a < NA; a++)
            if (valid[a]) z[a] = _mm256_fmadd_ps(d[a], _mm256_setzero_ps(), z[a]);
        return;
    }
    __m256 x[8];
#pragma GCC unroll 8
    for (int64_t b = 0; b < NB; b++) x[b] = tap(STEP, MASKED, p, g->toff[b] + i * STEP, k0[b], k1[b], keep);
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++)
        if (valid[a])
#pragma GCC unroll 8
            for (int64_t b = 0; b < NB; b++) s[a * NB + b] = _mm256_fmadd_ps(d[a], x[b], s[a * NB + b]);
}

/* by_source over the source rows [j0, j1) at pixel i: rows every tap row of which some output row
 * reads (RS 1: j in [NA - 1, m - 1]), a row's dy vectors passed on to the next row's. */
static inline __attribute__((always_inline)) void inner_rows(const int64_t NA, const int64_t NB, const int64_t STEP,
                                                             const int MASKED, int64_t a0, int64_t j0, int64_t j1,
                                                             const float *dq, int64_t xoff, int64_t i,
                                                             const bw_args *g, const __m256i *k0, const __m256i *k1,
                                                             __m256i keep, __m256 *s, __m256 *z) {
    __m256 d[8];
    int valid[8];
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) valid[a] = 1;
    /* as the row before j0 left them: d[a], the dy of row j0 - 1 - a */
    d[NA - 1] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int64_t a = 0; a + 1 < NA; a++) d[a] = load8(MASKED, dq + (j0 - 1 - a) * g->dys + i, keep);
    for (int64_t j = j0; j < j1; j++) {
#pragma GCC unroll 8
        for (int64_t a = NA - 1; a > 0; a--) d[a] = d[a - 1];
        d[0] = load8(MASKED, dq + j * g->dys + i, keep);
        const float *row = g->rows[a0 + j];
        source_products(NA, NB, STEP, MASKED, row ? row + xoff : NULL, i, g, k0, k1, keep, d, valid, s, z);
    }
}

/* inner_rows at output rows 2 source rows apart: the pairs of source rows (j, j + 1), j even in
 * [j0, j1), each of whose tap rows some output row reads: row j as the even tap rows, j + 1 as the
 * odd ones, both of output rows j / 2 - k (k = a / 2); the pair's dy vectors passed on. */
static inline __attribute__((always_inline)) void inner_pairs(const int64_t NA, const int64_t NB,
                                                              const int64_t STEP, const int MASKED, int64_t a0,
                                                              int64_t j0, int64_t j1, const float *dq, int64_t xoff,
                                                              int64_t i, const bw_args *g, const __m256i *k0,
                                                              const __m256i *k1, __m256i keep, __m256 *s,
                                                              __m256 *z) {
    enum { NW = 4 }; /* (NA + 1) / 2 at most */
    __m256 w[NW], d[8];
    int even[8], odd[8];
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) even[a] = a % 2 == 0, odd[a] = a % 2 == 1;
    /* as the pair before j0 left them: w[k], the dy of output row j0 / 2 - 1 - k */
#pragma GCC unroll 4
    for (int64_t k = 0; k < (NA + 1) / 2; k++)
        w[k] = k + 1 < (NA + 1) / 2 ? load8(MASKED, dq + (j0 / 2 - 1 - k) * g->dys + i, keep) : _mm256_setzero_ps();
    for (int64_t j = j0; j < j1; j += 2) {
#pragma GCC unroll 4
        for (int64_t k = (NA + 1) / 2 - 1; k > 0; k--) w[k] = w[k - 1];
        w[0] = load8(MASKED, dq + j / 2 * g->dys + i, keep);
#pragma GCC unroll 8
        for (int64_t a = 0; a < NA; a++) d[a] = w[a / 2];
        const float *r0 = g->rows[a0 + j], *r1 = g->rows[a0 + j + 1];
        source_products(NA, NB, STEP, MASKED, r0 ? r0 + xoff : NULL, i, g, k0, k1, keep, d, even, s, z);
        source_products(NA, NB, STEP, MASKED, r1 ? r1 + xoff : NULL, i, g, k0, k1, keep, d, odd, s, z);
    }
}

/* by_source over the source row j at pixel i with its checks: which output rows read it. */
static inline __attribute__((always_inline)) void edge_row(const int64_t NA, const int64_t NB, const int64_t STEP,
                                                           const int64_t RS, const int MASKED, int64_t a0, int64_t j,
                                                           const float *dq, int64_t xoff, int64_t i, const bw_args *g,
                                                           const __m256i *k0, const __m256i *k1, __m256i keep,
                                                           __m256 *s, __m256 *z) {
    __m256 d[8];
    int valid[8];
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) {
        const int64_t t = j - a;
        valid[a] = t >= 0 && t % RS == 0 && t / RS < g->m;
        d[a] = valid[a] ? load8(MASKED, dq + t / RS * g->dys + i, keep) : _mm256_setzero_ps();
    }
    const float *row = g->rows[a0 + j];
    source_products(NA, NB, STEP, MASKED, row ? row + xoff : NULL, i, g, k0, k1, keep, d, valid, s, z);
}

/* by_source's source rows at pixel i: those of the edges with their checks, the others in a run. */
static inline __attribute__((always_inline)) void source_vector(const int64_t NA, const int64_t NB,
                                                                const int64_t STEP, const int64_t RS, const int MASKED,
                                                                int64_t a0, int64_t j0, int64_t j1, int64_t nj,
                                                                const float *dq, int64_t xoff, int64_t i,
                                                                const bw_args *g, const __m256i *k0,
                                                                const __m256i *k1, __m256i keep, __m256 *s,
                                                                __m256 *z) {
    for (int64_t j = 0; j < j0; j++) edge_row(NA, NB, STEP, RS, MASKED, a0, j, dq, xoff, i, g, k0, k1, keep, s, z);
    if (RS == 1) inner_rows(NA, NB, STEP, MASKED, a0, j0, j1, dq, xoff, i, g, k0, k1, keep, s, z);
    else inner_pairs(NA, NB, STEP, MASKED, a0, j0, j1, dq, xoff, i, g, k0, k1, keep, s, z);
    for (int64_t j = j1; j < nj; j++) edge_row(NA, NB, STEP, RS, MASKED, a0, j, dq, xoff, i, g, k0, k1, keep, s, z);
}

/* Tap rows a0 .. a0 + NA (one source row apart), all NB taps, output rows RS source rows apart:
 * for each vector of pixels, the loop over the source rows (source row a0 + j: output row r
 * reads it as tap row a where j = r RS + a). */
static inline __attribute__((always_inline)) void by_source(const int64_t NA, const int64_t NB, const int64_t STEP,
                                                            const int64_t RS, int64_t a0, const bw_args *g,
                                                            float *acc) {
    __m256 s[16], z[8];
#pragma GCC unroll 16
    for (int64_t t = 0; t < NA * NB; t++) s[t] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) z[a] = _mm256_setzero_ps();
    const int64_t m = g->m, nj = (m - 1) * RS + NA;
    /* Where every tap row (RS 2: of the row's parity) is read: RS 1, the rows [NA - 1, m); RS 2,
     * the pairs from the first even row >= NA - 1 to row 2 m - 1. The others take edge_row. */
    int64_t j0 = RS == 1 ? NA - 1 : NA / 2 * 2, j1 = RS == 1 ? m : 2 * m <= nj ? 2 * m : nj / 2 * 2;
    if (j0 >= j1) j0 = j1 = nj;
    for (int64_t q = 0; q < g->nq; q++) {
        const float *dq = g->dy + q * g->dyq;
        const int64_t xoff = q * g->xq;
        for (int64_t i = 0; i < g->n; i += 8) {
            const __m256i keep = nconv__avx2_mask(g->n - i);
            __m256i k0[8], k1[8];
            int in = i + 8 <= g->n;
#pragma GCC unroll 8
            for (int64_t b = 0; b < NB; b++) {
                const int64_t x = g->toff[b] + i * STEP;
                k0[b] = STEP == 1 ? _mm256_and_si256(window(x, g->len), keep) : window(x, g->len);
                k1[b] = STEP == 1 ? keep : window(x + 8, g->len);
                in = in && x >= 0 && x + 8 * STEP <= g->len;
            }
            if (in) source_vector(NA, NB, STEP, RS, 0, a0, j0, j1, nj, dq, xoff, i, g, k0, k1, keep, s, z);
            else source_vector(NA, NB, STEP, RS, 1, a0, j0, j1, nj, dq, xoff, i, g, k0, k1, keep, s, z);
        }
    }
#pragma GCC unroll 8
    for (int64_t a = 0; a < NA; a++) {
        const float za = hsum(z[a]);
#pragma GCC unroll 8
        for (int64_t b = 0; b < NB; b++) acc[(a0 + a) * g->nk + b] += hsum(s[a * NB + b]) + za;
    }
}

/* Tap row a, taps b0 .. b0 + NB: the loop over the output rows. */
static inline __attribute__((always_inline)) void by_output(const int64_t NB, const int64_t STEP, int64_t a,
                                                            int64_t b0, const bw_args *g, float *acc) {
    __m256 s[8];
#pragma GCC unroll 8
    for (int64_t b = 0; b < NB; b++) s[b] = _mm256_setzero_ps();
    for (int64_t q = 0; q < g->nq; q++)
        for (int64_t i0 = 0; i0 < g->n; i0 += 8 * CHUNK) {
            const int64_t nv = (g->n - i0 + 7) / 8 < CHUNK ? (g->n - i0 + 7) / 8 : CHUNK;
            __m256i keep[CHUNK], k0[CHUNK][8], k1[CHUNK][8];
            masks(NB, STEP, b0, i0, nv, g, keep, k0, k1);
            for (int64_t r = 0; r < g->m; r++) {
                const float *row = g->rows[r * g->rs + a * g->rd], *p = row ? row + q * g->xq : NULL;
                for (int64_t v = 0; v < nv; v++) {
                    const int64_t i = i0 + 8 * v;
                    const __m256 d = _mm256_maskload_ps(g->dy + q * g->dyq + r * g->dys + i, keep[v]);
#pragma GCC unroll 8
                    for (int64_t b = 0; b < NB; b++)
                        s[b] = _mm256_fmadd_ps(
                            d, tap(STEP, 1, p, g->toff[b0 + b] + i * STEP, k0[v][b], k1[v][b], keep[v]), s[b]);
                }
            }
        }
#pragma GCC unroll 8
    for (int64_t b = 0; b < NB; b++) acc[a * g->nk + b0 + b] += hsum(s[b]);
}

static float dy_sum(const bw_args *g) {
    __m256 s = _mm256_setzero_ps();
    for (int64_t q = 0; q < g->nq; q++)
        for (int64_t r = 0; r < g->m; r++)
            for (int64_t i = 0; i < g->n; i += 8)
                s = _mm256_add_ps(
                    s, _mm256_maskload_ps(g->dy + q * g->dyq + r * g->dys + i, nconv__avx2_mask(g->n - i)));
    return hsum(s);
}

void nconv_f32_dwrow_bw__avx2(int64_t nq, int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs,
                              int64_t rd, int64_t xq, int64_t nk, const int64_t *toff, int64_t step, int64_t len,
                              const float *dy, int64_t dys, int64_t dyq, float *acc, float *db) {
    NCONV_DWROW_BW_BODY(2, 1, 1)
}
