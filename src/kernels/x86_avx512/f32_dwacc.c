/* Depthwise backward-weights on a run of pixels, AVX-512 (contract in
 * ../kernels.h): channels are the vector dimension, 16 per register, the tail
 * masked. The sums of a row's taps stay in registers across a chunk of the
 * run's pixels and reach acc once per chunk (chunks of pixels over every
 * channel: the rows are read in address order); with 3, 5 or 7 taps each dy
 * vector is loaded once for all of them (3 taps: two sets of sums, even and
 * odd pixels, for enough independent FMA chains). Only the pixels at the
 * run's ends test their columns against the row. */
#include "../kernels.h"
#include "avx512_util.h"

#define INLINE static inline __attribute__((always_inline))

enum { CHUNK = 16 }; /* pixels per pass over the channels */

INLINE __m512 column(const float *row, int64_t col, int64_t cs, int64_t width, int checked, __mmask16 m) {
    return !checked || (col >= 0 && col < width) ? _mm512_maskz_loadu_ps(m, row + col * cs) : _mm512_setzero_ps();
}

/* Pixels [p0, p1) into the sums s (KT fixed) or s[0][t] (t < kt, pixel pairs into s[0], s[1]). */
INLINE void pixels(const int KT, int64_t kt, int64_t p0, int64_t p1, const float *dy, int64_t cs, const float *row,
                   const nconv_dw_run *g, int checked, __mmask16 m, __m512 (*s)[7], __m512 *any) {
    if (KT == 3)
        for (; p0 + 2 <= p1; p0 += 2) {
            const __m512 g0 = _mm512_maskz_loadu_ps(m, dy + p0 * cs), g1 = _mm512_maskz_loadu_ps(m, dy + (p0 + 1) * cs);
            const int64_t col = g->first + p0 * g->step;
#pragma GCC unroll 3
            for (int t = 0; t < 3; t++) {
                s[0][t] = _mm512_fmadd_ps(g0, column(row, col + t * g->tap, cs, g->width, checked, m), s[0][t]);
                s[1][t] =
                    _mm512_fmadd_ps(g1, column(row, col + g->step + t * g->tap, cs, g->width, checked, m), s[1][t]);
            }
        }
    for (; p0 < p1; p0++) {
        const __m512 d = _mm512_maskz_loadu_ps(m, dy + p0 * cs);
        const int64_t col = g->first + p0 * g->step;
        if (KT) {
#pragma GCC unroll 7
            for (int t = 0; t < KT; t++)
                s[0][t] = _mm512_fmadd_ps(d, column(row, col + t * g->tap, cs, g->width, checked, m), s[0][t]);
        } else {
            for (int64_t t = 0; t < kt; t++)
                any[t] = _mm512_fmadd_ps(d, column(row, col + t * g->tap, cs, g->width, checked, m), any[t]);
        }
    }
}

/* Pixels [p0, p1) of one row: those outside [lo, hi) with column tests, the others without. */
INLINE void row_sums(const int KT, int64_t kt, int64_t p0, int64_t p1, int64_t lo, int64_t hi, const float *dy,
                     int64_t cs, const float *row, const nconv_dw_run *g, __mmask16 m, __m512 *any, float *acc) {
    __m512 s[2][7];
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 7; t++) s[k][t] = _mm512_setzero_ps();
    if (!KT)
        for (int64_t t = 0; t < kt; t++) any[t] = _mm512_setzero_ps();
    pixels(KT, kt, p0, lo < p1 ? lo : p1, dy, cs, row, g, 1, m, s, any);
    pixels(KT, kt, lo > p0 ? lo : p0, hi < p1 ? hi : p1, dy, cs, row, g, 0, m, s, any);
    pixels(KT, kt, hi > p0 ? hi : p0, p1, dy, cs, row, g, 1, m, s, any);
    for (int64_t t = 0; t < (KT ? KT : kt); t++) {
        const __m512 v = !KT ? any[t] : KT == 3 ? _mm512_add_ps(s[0][t], s[1][t]) : s[0][t];
        _mm512_mask_storeu_ps(acc + t * cs, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + t * cs), v));
    }
}

void nconv_f32_dwacc__avx512(int64_t channels, int64_t cs, int64_t n, int64_t kr, int64_t kt, const float *dy,
                             const float *const *rows, const nconv_dw_run *g, float *acc) {
    __m512 any[256];
    if (kt > 256) { /* longer rows of taps: one tap at a time */
        for (int64_t t = 0; t < kt; t++) {
            const nconv_dw_run one = {g->first + t * g->tap, g->step, 0, g->width, 1};
            for (int64_t r = 0; r < kr; r++)
                nconv_f32_dwacc__avx512(channels, cs, n, 1, 1, dy, rows + r, &one, acc + (r * kt + t) * cs);
        }
        return;
    }
    int64_t lo, hi;
    nconv__dw_inside_range(g, n, kt, &lo, &hi);
    for (int64_t p0 = 0; p0 < n; p0 += CHUNK) {
        const int64_t p1 = p0 + CHUNK < n ? p0 + CHUNK : n;
        for (int64_t c = 0; c < channels; c += 16) {
            const __mmask16 m = nconv__avx512_mask(channels - c);
            for (int64_t r = 0; r < kr; r++) {
                const float *row = rows[r] + c;
                float *a = acc + r * kt * cs + c;
                switch (kt) {
                case 3:
                    row_sums(3, 3, p0, p1, lo, hi, dy + c, cs, row, g, m, any, a);
                    break;
                case 5:
                    row_sums(5, 5, p0, p1, lo, hi, dy + c, cs, row, g, m, any, a);
                    break;
                case 7:
                    row_sums(7, 7, p0, p1, lo, hi, dy + c, cs, row, g, m, any, a);
                    break;
                default:
                    row_sums(0, kt, p0, p1, lo, hi, dy + c, cs, row, g, m, any, a);
                }
            }
        }
    }
}
