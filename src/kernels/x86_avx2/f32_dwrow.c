/*
 * Depthwise rows on planes, AVX2 (contract in ../kernels.h). A vector of 8 pixels in each of the
 * m rows at once, so that a tap's products go to m independent sums. Where the output rows read
 * source rows in a pattern with code of its own (f32_dwrow_shapes.h), each source row's vectors are
 * loaded once for every output row that reads them. At pixel step 2 a tap's vector is the even
 * lanes of two loads. Vectors whose every tap lies within the row load without masks.
 */
#include "../f32_dwrow_shapes.h"
#include "../kernels.h"

#include <immintrin.h>

static inline __m256 act(__m256 v, int relu) { return relu ? _mm256_max_ps(_mm256_setzero_ps(), v) : v; }

/* The lanes of a vector read at x that lie in [0, len), as a maskload's mask. */
static inline __m256i window(int64_t x, int64_t len) {
    const int64_t lo = x >= 0 ? 0 : -x < 8 ? -x : 8, hi = len - x >= 8 ? 8 : len - x > 0 ? len - x : 0;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), lane),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane));
}

static inline __attribute__((always_inline)) __m256 load8(const int MASKED, const float *p, int64_t x, int64_t len) {
    return MASKED ? _mm256_maskload_ps(p + x, window(x, len)) : _mm256_loadu_ps(p + x);
}

/* A tap's 8 pixels from row position x. */
static inline __attribute__((always_inline)) __m256 tap(const int64_t STEP, const int MASKED, const float *p,
                                                        int64_t x, int64_t len) {
    if (STEP == 1) return load8(MASKED, p, x, len);
    const __m256 ev = _mm256_shuffle_ps(load8(MASKED, p, x, len), load8(MASKED, p, x + 8, len), 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8));
}

static inline void store8(float *y, int64_t left, __m256 v) {
    if (left >= 8) _mm256_storeu_ps(y, v);
    else _mm256_maskstore_ps(y, window(0, left), v);
}

/* m rows, each tap row's source read on its own */
static inline __attribute__((always_inline)) void rows_m(const int64_t m, const int64_t STEP, const int MASKED,
                                                         int64_t i, int64_t n, int64_t nr, const float *const *rows,
                                                         int64_t rs, int64_t rd, int64_t nk, const int64_t *toff,
                                                         int64_t len, const float *w, float init, float *y, int64_t ys,
                                                         int relu) {
    __m256 acc[8];
    for (int64_t r = 0; r < m; r++) acc[r] = _mm256_set1_ps(init);
    for (int64_t a = 0; a < nr; a++)
        for (int64_t b = 0; b < nk; b++) {
            const __m256 wv = _mm256_set1_ps(w[a * nk + b]);
            const int64_t x = toff[b] + i * STEP;
            for (int64_t r = 0; r < m; r++)
                acc[r] = _mm256_fmadd_ps(wv, tap(STEP, MASKED, rows[r * rs + a * rd], x, len), acc[r]);
        }
    for (int64_t r = 0; r < m; r++) store8(y + r * ys + i, n - i, act(acc[r], relu));
}

/* M rows (7 or 8) over NR tap rows one source row apart, output rows RS source rows apart: source
 * row j feeds output rows r with j = r RS + a, a < NR. A W tap at a time, its NR weights held in
 * registers, so that the FMAs take no broadcast loads. */
static inline __attribute__((always_inline)) void shared_m(const int64_t M, const int64_t RS, const int64_t NR,
                                                           const int64_t STEP, const int MASKED, int64_t i, int64_t n,
                                                           const float *const *rows, const int64_t nk,
                                                           const int64_t *toff, int64_t len, const float *w,
                                                           float init, float *y, int64_t ys, int relu) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int64_t r = 0; r < M; r++) acc[r] = _mm256_set1_ps(init);
    for (int64_t b = 0; b < nk; b++) {
        __m256 wv[7];
#pragma GCC unroll 7
        for (int64_t a = 0; a < NR; a++) wv[a] = _mm256_set1_ps(w[a * nk + b]);
        /* the row pointers loaded again for each tap: held across taps they crowd the registers */
        const float *const *rp = rows;
        __asm__("" : "+r"(rp));
#pragma GCC unroll 32
        for (int64_t j = 0; j < (M - 1) * RS + NR; j++) {
            const int64_t r0 = j - NR + 1 > 0 ? (j - NR + RS) / RS : 0, r1 = j / RS < M - 1 ? j / RS : M - 1;
            const __m256 x = tap(STEP, MASKED, rp[j], toff[b] + i * STEP, len);
#pragma GCC unroll 8
            for (int64_t r = r0; r <= r1; r++) acc[r] = _mm256_fmadd_ps(wv[j - r * RS], x, acc[r]);
        }
    }
#pragma GCC unroll 8
    for (int64_t r = 0; r < M; r++) store8(y + r * ys + i, n - i, act(acc[r], relu));
}

/* The later call's rows nx[0 .. ahead) at the vector of pixel i (see the contract): a line per
 * 16 floats, so every other vector of 8 at pixel step 1. */
static inline void fetch_ahead(const float *const *nx, int64_t ahead, int64_t i, int64_t step) {
    if (step == 1 && i % 16) return;
    for (int64_t h = 0; h < ahead; h++) __builtin_prefetch(nx[h] + i * step);
}

/* Whether every tap of the vector at pixel i lies within [0, len), the taps' offsets within
 * [tmin, tmax]. */
static inline int inside(int64_t i, int64_t step, int64_t tmin, int64_t tmax, int64_t len) {
    return tmin + i * step >= 0 && tmax + (i + 8) * step <= len;
}

/* The cases of NCONV_DWROW_DISPATCH, each vector with masks or, inside the row, without (there nk
 * == NR, a constant, where it is). */
#define SHARED_M(M, RS, NR, STEP)                                                                       \
    if (in) shared_m(M, RS, NR, STEP, 0, i, n, rows, nk == NR ? NR : nk, toff, len, w, init, y, ys, relu); \
    else shared_m(M, RS, NR, STEP, 1, i, n, rows, nk, toff, len, w, init, y, ys, relu);
#define SHARED_CASE(RS, NR, STEP)                                                                        \
    if (rs == RS && nr == NR && step == STEP) {                                                          \
        for (int64_t i = 0; i < n; i += 8) {                                                             \
            const int in = inside(i, step, tmin, tmax, len);                                             \
            fetch_ahead(nx, ahead, i, step);                                                             \
            if (m == 8) {                                                                                \
                SHARED_M(8, RS, NR, STEP)                                                                \
            } else {                                                                                     \
                SHARED_M(7, RS, NR, STEP)                                                                \
            }                                                                                            \
        }                                                                                                \
        return;                                                                                          \
    }
#define ROWS_CASE(M)                                                                                     \
    case M:                                                                                              \
        for (int64_t i = 0; i < n; i += 8) {                                                             \
            const int in = inside(i, step, tmin, tmax, len);                                               \
            fetch_ahead(nx, ahead, i, step);                                                               \
            if (step == 1 && in) rows_m(M, 1, 0, i, n, nr, rows, rs, rd, nk, toff, len, w, init, y, ys, relu); \
            else if (step == 1) rows_m(M, 1, 1, i, n, nr, rows, rs, rd, nk, toff, len, w, init, y, ys, relu); \
            else if (in) rows_m(M, 2, 0, i, n, nr, rows, rs, rd, nk, toff, len, w, init, y, ys, relu);   \
            else rows_m(M, 2, 1, i, n, nr, rows, rs, rd, nk, toff, len, w, init, y, ys, relu);           \
        }                                                                                                \
        break;

void nconv_f32_dwrow__avx2(int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs, int64_t rd,
                           int64_t nk, const int64_t *toff, int64_t step, int64_t len, const float *w, float init,
                           float *y, int64_t ys, int relu, int64_t ahead) {
    const float *const *nx = rows + (m - 1) * rs + (nr - 1) * rd + 1;
    int64_t tmin = toff[0], tmax = toff[0];
    for (int64_t b = 1; b < nk; b++) tmin = toff[b] < tmin ? toff[b] : tmin, tmax = toff[b] > tmax ? toff[b] : tmax;
    NCONV_DWROW_DISPATCH
}
