/* Depthwise backward-weights on channel-blocked rows, AVX2 (contract in ../kernels.h). The sums
 * of a row's taps stay in registers along its pixels, a few vectors of channels at a time.
 * Rows of 3, 5 or 7 taps one column apart, pixels 1 or 2 columns apart: dy of a tile of UR pixels
 * is loaded once, and each input column once for all the (pixel, tap) pairs that read it (the
 * shapes are constants of each variant; pixels past the last whole tile go one at a time).
 * Any other taps: TB taps x NV vectors; per pixel the NV vectors of dy are loaded once and each
 * sum takes one FMA whose input comes from memory (each tap's pointer in a register, the pixel's
 * offset added).
 * Where there are few sums, pixels alternate between PS (PU) sets of them, summed at the end, so
 * that enough FMA chains run at once.
 * The bias gradient's sums (DB variants) take the dy vectors the first row's pass loads anyway. */
#include "../kernels.h"
#include "avx2_util.h"

#define INLINE static inline __attribute__((always_inline))
enum { VL = 8, NV_REUSE = 1, SUB_NV = 2, MAX_TB = 7, MAX_SUMS = 12 };

/* KT taps one column apart, pixels SP columns apart: pixel i's tap t at x + (i SP + t) cs, its dy at
 * dy + i * cw, tap t's sums at acc + t * cw. */
INLINE void reuse_sums(const int KT, const int SP, const int NV, const int DB, int64_t n, const float *x,
                       int64_t cs, const float *dy, int64_t cw, float *acc, float *db) {
    const int PS = KT <= 3 ? 2 : 1, UR = 7; /* rows are mostly sevens: 7, 14, 28, 56, 112 */
    __m256 s[2 * 7 * NV_REUSE];
#pragma GCC unroll 28
    for (int j = 0; j < PS * KT * NV; j++) s[j] = _mm256_setzero_ps();
    __m256 dbs[NV_REUSE];
#pragma GCC unroll 2
    for (int b = 0; b < NV; b++) dbs[b] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + UR <= n; i += UR) {
        __m256 d[8 * NV_REUSE];
        const float *dp = dy + i * cw;
#pragma GCC unroll 8
        for (int u = 0; u < UR; u++, dp += cw)
#pragma GCC unroll 2
            for (int b = 0; b < NV; b++) {
                d[u * NV + b] = _mm256_loadu_ps(dp + b * VL);
                NCONV_IN_REGISTER(d[u * NV + b]);
                if (DB) dbs[b] = _mm256_add_ps(dbs[b], d[u * NV + b]);
            }
        const float *xq = x + i * SP * cs;
#pragma GCC unroll 21
        for (int q = 0; q < (UR - 1) * SP + KT; q++, xq += cs) {
            __m256 xv[NV_REUSE];
#pragma GCC unroll 2
            for (int b = 0; b < NV; b++) {
                xv[b] = _mm256_loadu_ps(xq + b * VL);
                NCONV_IN_REGISTER(xv[b]);
            }
#pragma GCC unroll 8
            for (int u = 0; u < UR; u++) {
                const int t = q - u * SP;
                if (t >= 0 && t < KT)
#pragma GCC unroll 2
                    for (int b = 0; b < NV; b++) {
                        __m256 *a = &s[((u % PS) * KT + t) * NV + b];
                        *a = _mm256_fmadd_ps(d[u * NV + b], xv[b], *a);
                    }
            }
        }
    }
    for (; i < n; i++)
#pragma GCC unroll 2
        for (int b = 0; b < NV; b++) {
            const __m256 dv = _mm256_loadu_ps(dy + i * cw + b * VL);
            if (DB) dbs[b] = _mm256_add_ps(dbs[b], dv);
#pragma GCC unroll 7
            for (int t = 0; t < KT; t++)
                s[t * NV + b] = _mm256_fmadd_ps(dv, _mm256_loadu_ps(x + (i * SP + t) * cs + b * VL), s[t * NV + b]);
        }
#pragma GCC unroll 7
    for (int t = 0; t < KT; t++)
#pragma GCC unroll 2
        for (int b = 0; b < NV; b++) {
            __m256 v = s[t * NV + b];
            if (PS == 2) v = _mm256_add_ps(v, s[(KT + t) * NV + b]);
            float *a = acc + t * cw + b * VL;
            _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), v));
        }
#pragma GCC unroll 2
    for (int b = 0; b < NV && DB; b++)
        _mm256_storeu_ps(db + b * VL, _mm256_add_ps(_mm256_loadu_ps(db + b * VL), dbs[b]));
}

/* Sums of TB taps x NV vectors: pixel i's inputs at xt[t] + i * xs, its dy at dy + i * ds, tap t's
 * sums at acc + t * as. */
INLINE void block(const int NV, const int TB, const int DB, int64_t n, const float *x0, const int64_t *toff,
                  int64_t xs, const float *dy, int64_t ds, float *acc, int64_t as, float *db) {
    const int PU = TB * NV >= 6 ? 1 : 2;
    __m256 s[MAX_SUMS];
#pragma GCC unroll 12
    for (int j = 0; j < PU * TB * NV; j++) s[j] = _mm256_setzero_ps();
    __m256 dbs[SUB_NV];
#pragma GCC unroll 4
    for (int b = 0; b < NV; b++) dbs[b] = _mm256_setzero_ps();
    const float *xt[MAX_TB];
#pragma GCC unroll 7
    for (int t = 0; t < TB; t++) xt[t] = x0 + toff[t];
    int64_t i = 0;
    for (; i + PU <= n; i += PU)
#pragma GCC unroll 4
        for (int p = 0; p < PU; p++) {
            __m256 d[SUB_NV];
#pragma GCC unroll 7
            for (int b = 0; b < NV; b++) {
                d[b] = _mm256_loadu_ps(dy + (i + p) * ds + b * VL);
                if (DB) dbs[b] = _mm256_add_ps(dbs[b], d[b]);
            }
#pragma GCC unroll 7
            for (int t = 0; t < TB; t++)
#pragma GCC unroll 7
                for (int b = 0; b < NV; b++)
                    s[(p * TB + t) * NV + b] = _mm256_fmadd_ps(d[b], _mm256_loadu_ps(xt[t] + (i + p) * xs + b * VL),
                                                               s[(p * TB + t) * NV + b]);
        }
    for (; i < n; i++) {
        __m256 d[SUB_NV];
#pragma GCC unroll 7
        for (int b = 0; b < NV; b++) {
            d[b] = _mm256_loadu_ps(dy + i * ds + b * VL);
            if (DB) dbs[b] = _mm256_add_ps(dbs[b], d[b]);
        }
#pragma GCC unroll 7
        for (int t = 0; t < TB; t++)
#pragma GCC unroll 7
            for (int b = 0; b < NV; b++)
                s[t * NV + b] = _mm256_fmadd_ps(d[b], _mm256_loadu_ps(xt[t] + i * xs + b * VL), s[t * NV + b]);
    }
#pragma GCC unroll 7
    for (int t = 0; t < TB; t++)
#pragma GCC unroll 7
        for (int b = 0; b < NV; b++) {
            __m256 v = s[t * NV + b];
#pragma GCC unroll 3
            for (int p = 1; p < PU; p++) v = _mm256_add_ps(v, s[(p * TB + t) * NV + b]);
            float *a = acc + t * as + b * VL;
            _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), v));
        }
#pragma GCC unroll 4
    for (int b = 0; b < NV && DB; b++)
        _mm256_storeu_ps(db + b * VL, _mm256_add_ps(_mm256_loadu_ps(db + b * VL), dbs[b]));
}

#include "../f32_dwtile_bw_variants.h"
#define REUSES(X) X(3, 1, 1) X(3, 2, 1) X(5, 1, 1) X(5, 2, 1) X(7, 1, 1) X(7, 2, 1)
REUSES(REUSE)
static reuse_fn *const reuses[2][3][2][NV_REUSE + 1] = {REUSES(REUSE_ENTRY)};
/* The taps of each vector count: as many as keep the sums within MAX_SUMS. */
#define SUBS(X) TB7(X, 1) TB6(X, 2)
SUBS(SUB)
static sub_fn *const subs[2][SUB_NV + 1][MAX_TB + 1] = {SUBS(SUB_ENTRY)};
static const int64_t tb_max[SUB_NV + 1] = {0, 7, 6};

void nconv_f32_dwtile_bw__avx2(int64_t cw, int64_t cs, int64_t step, int64_t n, int64_t nr, const float *const *rows,
                                 int64_t nt, const int64_t *toff, const float *dy, float *acc, float *db) {
    const int64_t nv = cw / VL, kt = nconv__dw_reuse_taps(nt, toff, cs, step);
    if (kt) {
        for (int64_t v0 = 0; v0 < nv; v0 += NV_REUSE) {
            const int64_t sv = nv - v0 < NV_REUSE ? nv - v0 : NV_REUSE, c0 = v0 * VL;
            for (int64_t r = 0; r < nr; r++)
                reuses[db && !r][kt / 2 - 1][step - 1][sv](n, rows[r] + toff[0] + c0, cs, dy + c0, cw,
                                                          acc + r * nt * cw + c0, db ? db + c0 : NULL);
        }
        return;
    }
    for (int64_t v0 = 0; v0 < nv; v0 += SUB_NV) {
        const int64_t sv = nv - v0 < SUB_NV ? nv - v0 : SUB_NV, c0 = v0 * VL;
        for (int64_t r = 0; r < nr; r++)
            for (int64_t t0 = 0; t0 < nt; t0 += tb_max[sv]) {
                const int64_t tb = nt - t0 < tb_max[sv] ? nt - t0 : tb_max[sv];
                subs[db && !r && !t0][sv][tb](n, rows[r] + c0, toff + t0, step * cs, dy + c0, cw,
                                              acc + (r * nt + t0) * cw + c0, cw, db ? db + c0 : NULL);
            }
    }
}
