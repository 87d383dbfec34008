/* Depthwise backward-weights on a run of pixels, AVX2 + FMA (contract
 * in ../kernels.h): channels are the vector dimension, 8 per register, the
 * tail masked. The sums of a row's taps stay in registers across a chunk of
 * the run's pixels and reach acc once per chunk (chunks of pixels over every
 * channel: the rows are read in address order); with 3, 5 or 7 taps each dy
 * vector is loaded once for all of them (3 taps: two sets of sums, even and
 * odd pixels, for enough independent FMA chains). Only the pixels at the
 * run's ends test their columns against the row. */
#include "../kernels.h"
#include "avx2_util.h"

#define INLINE static inline __attribute__((always_inline))

enum { CHUNK = 16 }; /* pixels per pass over the channels */

/* full: all 8 lanes (plain loads); else the masked tail. */
INLINE __m256 load(const float *p, __m256i m, int full) { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); }

INLINE __m256 column(const float *row, int64_t col, int64_t cs, int64_t width, int checked, __m256i m, int full) {
    return !checked || (col >= 0 && col < width) ? load(row + col * cs, m, full) : _mm256_setzero_ps();
}

/* Pixels [p0, p1) into the sums s (KT fixed) or s[0][t] (t < kt, pixel pairs into s[0], s[1]). */
INLINE void pixels(const int KT, int64_t kt, int64_t p0, int64_t p1, const float *dy, int64_t cs, const float *row,
                   const nconv_dw_run *g, int checked, __m256i m, int full, __m256 (*s)[7], __m256 *any) {
    if (KT == 3)
        for (; p0 + 2 <= p1; p0 += 2) {
            const __m256 g0 = load(dy + p0 * cs, m, full), g1 = load(dy + (p0 + 1) * cs, m, full);
            const int64_t col = g->first + p0 * g->step;
#pragma GCC unroll 3
            for (int t = 0; t < 3; t++) {
                s[0][t] = _mm256_fmadd_ps(g0, column(row, col + t * g->tap, cs, g->width, checked, m, full), s[0][t]);
                s[1][t] = _mm256_fmadd_ps(g1, column(row, col + g->step + t * g->tap, cs, g->width, checked, m, full),
                                          s[1][t]);
            }
        }
    for (; p0 < p1; p0++) {
        const __m256 d = load(dy + p0 * cs, m, full);
        const int64_t col = g->first + p0 * g->step;
        if (KT) {
#pragma GCC unroll 7
            for (int t = 0; t < KT; t++)
                s[0][t] = _mm256_fmadd_ps(d, column(row, col + t * g->tap, cs, g->width, checked, m, full), s[0][t]);
        } else {
            for (int64_t t = 0; t < kt; t++)
                any[t] = _mm256_fmadd_ps(d, column(row, col + t * g->tap, cs, g->width, checked, m, full), any[t]);
        }
    }
}

/* Pixels [p0, p1) of one row: those outside [lo, hi) with column tests, the others without. */
INLINE void row_sums(const int KT, int64_t kt, int64_t p0, int64_t p1, int64_t lo, int64_t hi, const float *dy,
                     int64_t cs, const float *row, const nconv_dw_run *g, __m256i m, int full, __m256 *any,
                     float *acc) {
    __m256 s[2][7];
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 7; t++) s[k][t] = _mm256_setzero_ps();
    if (!KT)
        for (int64_t t = 0; t < kt; t++) any[t] = _mm256_setzero_ps();
    pixels(KT, kt, p0, lo < p1 ? lo : p1, dy, cs, row, g, 1, m, full, s, any);
    pixels(KT, kt, lo > p0 ? lo : p0, hi < p1 ? hi : p1, dy, cs, row, g, 0, m, full, s, any);
    pixels(KT, kt, hi > p0 ? hi : p0, p1, dy, cs, row, g, 1, m, full, s, any);
    for (int64_t t = 0; t < (KT ? KT : kt); t++) {
        const __m256 v = !KT ? any[t] : KT == 3 ? _mm256_add_ps(s[0][t], s[1][t]) : s[0][t];
        _mm256_maskstore_ps(acc + t * cs, m, _mm256_add_ps(load(acc + t * cs, m, full), v));
    }
}

void nconv_f32_dwacc__avx2(int64_t channels, int64_t cs, int64_t n, int64_t kr, int64_t kt, const float *dy,
                           const float *const *rows, const nconv_dw_run *g, float *acc) {
    __m256 any[256];
    if (kt > 256) { /* longer rows of taps: one tap at a time */
        for (int64_t t = 0; t < kt; t++) {
            const nconv_dw_run one = {g->first + t * g->tap, g->step, 0, g->width, 1};
            for (int64_t r = 0; r < kr; r++)
                nconv_f32_dwacc__avx2(channels, cs, n, 1, 1, dy, rows + r, &one, acc + (r * kt + t) * cs);
        }
        return;
    }
    int64_t lo, hi;
    nconv__dw_inside_range(g, n, kt, &lo, &hi);
    for (int64_t p0 = 0; p0 < n; p0 += CHUNK) {
        const int64_t p1 = p0 + CHUNK < n ? p0 + CHUNK : n;
        for (int64_t c = 0; c < channels; c += 8) {
            const int full = channels - c >= 8;
            const __m256i m = nconv__avx2_mask(channels - c);
            for (int64_t r = 0; r < kr; r++) {
                const float *row = rows[r] + c;
                float *a = acc + r * kt * cs + c;
                switch (kt) {
                case 3:
                    row_sums(3, 3, p0, p1, lo, hi, dy + c, cs, row, g, m, full, any, a);
                    break;
                case 5:
                    row_sums(5, 5, p0, p1, lo, hi, dy + c, cs, row, g, m, full, any, a);
                    break;
                case 7:
                    row_sums(7, 7, p0, p1, lo, hi, dy + c, cs, row, g, m, full, any, a);
                    break;
                default:
                    row_sums(0, kt, p0, p1, lo, hi, dy + c, cs, row, g, m, full, any, a);
                }
            }
        }
    }
}
