/*
 * Depthwise rows on planes, AVX-512 (contract in ../kernels.h). A vector of 16 pixels in each of
 * the m rows at once, so that a tap's products go to m independent sums. Where the output rows
 * read source rows in a pattern with code of its own (f32_dwrow_shapes.h), each source row's vectors
 * are loaded once for every output row that reads them. At pixel step 2 a tap's vector is the
 * even lanes of two loads.
 */
#include "../f32_dwrow_shapes.h"
#include "../kernels.h"

#include <immintrin.h>

static inline __m512 act(__m512 v, int relu) { return relu ? _mm512_max_ps(_mm512_setzero_ps(), v) : v; }

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* The lanes of a vector read at x that lie in [0, len). */
static inline __mmask16 window(int64_t x, int64_t len) {
    const int64_t lo = x >= 0 ? 0 : -x < 16 ? -x : 16, hi = len - x >= 16 ? 16 : len - x > 0 ? len - x : 0;
    return lo >= hi ? 0 : (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/* A tap's 16 pixels from row position x (masks of [x, x + 16) and, at step 2, [x + 16, x + 32)). */
static inline __attribute__((always_inline)) __m512 tap(const int64_t STEP, const float *p, int64_t x, __mmask16 k0,
                                                        __mmask16 k1) {
    if (STEP == 1) return _mm512_maskz_loadu_ps(k0, p + x);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(k0, p + x), even, _mm512_maskz_loadu_ps(k1, p + x + 16));
}

/* The later call's rows nx[0 .. ahead) at position x, step lines of each (see the contract). */
static inline __attribute__((always_inline)) void fetch_ahead(const int64_t STEP, const float *const *nx,
                                                              int64_t ahead, int64_t x) {
    for (int64_t h = 0; h < ahead; h++) {
        __builtin_prefetch(nx[h] + x);
        if (STEP == 2) __builtin_prefetch(nx[h] + x + 16);
    }
}

/* m rows, each tap row's source read on its own */
static inline __attribute__((always_inline)) void rows_m(const int64_t m, const int64_t STEP, int64_t n, int64_t nr,
                                                         const float *const *rows, int64_t rs, int64_t rd, int64_t nk,
                                                         const int64_t *toff, int64_t len, const float *w, float init,
                                                         float *y, int64_t ys, int relu, const float *const *nx,
                                                         int64_t ahead) {
    for (int64_t i = 0; i < n; i += 16) {
        fetch_ahead(STEP, nx, ahead, i * STEP);
        __m512 acc[8];
        for (int64_t r = 0; r < m; r++) acc[r] = _mm512_set1_ps(init);
        for (int64_t a = 0; a < nr; a++)
            for (int64_t b = 0; b < nk; b++) {
                const __m512 wv = _mm512_set1_ps(w[a * nk + b]);
                const int64_t x = toff[b] + i * STEP;
                const __mmask16 k0 = window(x, len), k1 = STEP == 1 ? 0 : window(x + 16, len);
                for (int64_t r = 0; r < m; r++)
                    acc[r] = _mm512_fmadd_ps(wv, tap(STEP, rows[r * rs + a * rd], x, k0, k1), acc[r]);
            }
        for (int64_t r = 0; r < m; r++) _mm512_mask_storeu_ps(y + r * ys + i, tail_mask(n - i), act(acc[r], relu));
    }
}

/* M rows (7 or 8) over NR tap rows one source row apart, output rows RS source rows apart: source
 * row j feeds output rows r with j = r RS + a, a < NR (nk <= 8). A W tap at a time, its NR weights
 * held in registers, so that the FMAs take no broadcast loads; each row's sum in two halves (even
 * and odd tap rows), so that twice as many FMAs are in flight as there are rows. */
static inline __attribute__((always_inline)) void shared_m(const int64_t M, const int64_t RS, const int64_t NR,
                                                           const int64_t STEP, int64_t n, const float *const *rows,
                                                           const int64_t nk, const int64_t *toff, int64_t len,
                                                           const float *w, float init, float *y, int64_t ys, int relu,
                                                           const float *const *nx, int64_t ahead) {
    for (int64_t i = 0; i < n; i += 16) {
        fetch_ahead(STEP, nx, ahead, i * STEP);
        __m512 acc[2][8];
#pragma GCC unroll 8
        for (int64_t r = 0; r < M; r++) acc[0][r] = _mm512_set1_ps(init), acc[1][r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nk; b++) {
            __m512 wv[7];
#pragma GCC unroll 7
            for (int64_t a = 0; a < NR; a++) wv[a] = _mm512_set1_ps(w[a * nk + b]);
            const int64_t x0 = toff[b] + i * STEP;
            const __mmask16 k0 = window(x0, len), k1 = STEP == 1 ? 0 : window(x0 + 16, len);
            /* the row pointers loaded again for each tap: held across taps they crowd out of the
             * general registers into vector ones, and each move back takes an FMA port */
            const float *const *rp = rows;
            __asm__("" : "+r"(rp));
#pragma GCC unroll 32
            for (int64_t j = 0; j < (M - 1) * RS + NR; j++) {
                const int64_t r0 = j - NR + 1 > 0 ? (j - NR + RS) / RS : 0, r1 = j / RS < M - 1 ? j / RS : M - 1;
                const __m512 x = tap(STEP, rp[j], x0, k0, k1);
#pragma GCC unroll 8
                for (int64_t r = r0; r <= r1; r++)
                    acc[(j - r * RS) & 1][r] = _mm512_fmadd_ps(wv[j - r * RS], x, acc[(j - r * RS) & 1][r]);
            }
        }
#pragma GCC unroll 8
        for (int64_t r = 0; r < M; r++)
            _mm512_mask_storeu_ps(y + r * ys + i, tail_mask(n - i), act(_mm512_add_ps(acc[0][r], acc[1][r]), relu));
    }
}

/* The cases of NCONV_DWROW_DISPATCH; square kernels with the W taps' count constant too. */
#define SHARED_CASE(RS, NR, STEP)                                                                        \
    if (rs == RS && nr == NR && step == STEP) {                                                          \
        if (m == 8) shared_m(8, RS, NR, STEP, n, rows, nk, toff, len, w, init, y, ys, relu, nx, ahead); \
        else shared_m(7, RS, NR, STEP, n, rows, nk, toff, len, w, init, y, ys, relu, nx, ahead);     \
        return;                                                                                          \
    }
#define ROWS_CASE(M)                                                                                     \
    case M:                                                                                              \
        if (step == 1) rows_m(M, 1, n, nr, rows, rs, rd, nk, toff, len, w, init, y, ys, relu, nx, ahead);           \
        else rows_m(M, 2, n, nr, rows, rs, rd, nk, toff, len, w, init, y, ys, relu, nx, ahead);                     \
        break;

void nconv_f32_dwrow__avx512(int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs, int64_t rd,
                             int64_t nk, const int64_t *toff, int64_t step, int64_t len, const float *w, float init,
                             float *y, int64_t ys, int relu, int64_t ahead) {
    const float *const *nx = rows + (m - 1) * rs + (nr - 1) * rd + 1;
    NCONV_DWROW_DISPATCH
}
