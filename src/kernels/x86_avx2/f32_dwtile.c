/* Depthwise on channel-blocked rows, AVX2 (contract in ../kernels.h). Tiles of UR pixels x NV
 * vectors keep one accumulator each, NV vectors at a time across the block.
 * Rows of 3, 5 or 7 taps one column apart, pixels 1 or 2 columns apart (the common kernels): the
 * row's KT x NV weights stay in registers (NV 1: 7 weights and 8 sums fill the 16 registers) and each input column is loaded once for all the
 * (pixel, tap) pairs that read it, so a tap costs no loads but its share of a column. Those
 * shapes are constants of each variant (tiles of 8, 7, 4, 2 and 1 pixels), the column stride a
 * run-time value (one pointer walks the columns).
 * Any other taps: per tap, the NV weight vectors are loaded once and each accumulator takes one
 * FMA whose input comes from memory at the pixel's pointer plus the tap's offset. */
#include "../kernels.h"
#include "avx2_util.h"

#define INLINE static inline __attribute__((always_inline))
enum { VL = 8, NV_REUSE = 1, NV_ANY = 2, MAX_UR = 8, MAX_ACC = 12 };

INLINE void init_acc(const int NV, const int UR, const float *init, __m256 *acc) {
#pragma GCC unroll 8
    for (int i = 0; i < UR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NV; b++) acc[i * NV + b] = _mm256_loadu_ps(init + b * VL);
}

INLINE void store_acc(const int NV, const int UR, const __m256 *acc, float *out, int64_t os, __m256i mlast,
                      int flags) {
    const __m256 zero = _mm256_setzero_ps();
    const int relu = flags & NCONV_DW_RELU, stream = flags & NCONV_DW_STREAM;
    const int full = _mm256_movemask_ps(_mm256_castsi256_ps(mlast)) == 0xff;
#pragma GCC unroll 8
    for (int i = 0; i < UR; i++)
#pragma GCC unroll 4
        for (int b = 0; b < NV; b++) {
            const __m256 v = relu ? _mm256_max_ps(zero, acc[i * NV + b]) : acc[i * NV + b];
            if (b == NV - 1 && !full) _mm256_maskstore_ps(out + i * os + b * VL, mlast, v);
            else if (stream) _mm256_stream_ps(out + i * os + b * VL, v);
            else _mm256_storeu_ps(out + i * os + b * VL, v);
        }
}

/* KT taps one column apart, pixels SP columns apart; x: pixel 0's first column, columns cs apart;
 * tap t's weights at w[r] + t * ws. */
INLINE void reuse_tile(const int KT, const int SP, const int NV, const int UR, int64_t cs, int64_t ws, int64_t nr,
                       const float *const *rows, const float *const *w, int64_t xoff, int64_t woff, const float *init,
                       float *out, int64_t os, __m256i mlast, int flags) {
    __m256 acc[MAX_UR * NV_REUSE];
    init_acc(NV, UR, init, acc);
    for (int64_t r = 0; r < nr; r++) {
        const float *x = rows[r] + xoff, *wr = w[r] + woff;
        __m256 wv[7 * NV_REUSE];
#pragma GCC unroll 7
        for (int t = 0; t < KT; t++)
#pragma GCC unroll 2
            for (int b = 0; b < NV; b++) wv[t * NV + b] = _mm256_loadu_ps(wr + t * ws + b * VL);
#pragma GCC unroll 21
        for (int q = 0; q < (UR - 1) * SP + KT; q++, x += cs) {
            __m256 xv[NV_REUSE];
#pragma GCC unroll 2
            for (int b = 0; b < NV; b++) {
                xv[b] = _mm256_loadu_ps(x + b * VL);
                NCONV_IN_REGISTER(xv[b]);
            }
#pragma GCC unroll 8
            for (int i = 0; i < UR; i++) {
                const int t = q - i * SP;
                if (t >= 0 && t < KT)
#pragma GCC unroll 2
                    for (int b = 0; b < NV; b++)
                        acc[i * NV + b] = _mm256_fmadd_ps(xv[b], wv[t * NV + b], acc[i * NV + b]);
            }
        }
    }
    store_acc(NV, UR, acc, out, os, mlast, flags);
}

/* Any taps: pixel i's tap t at its pointer (sp floats per pixel) plus toff[t]. */
INLINE void any_tile(const int NV, const int UR, int64_t ws, int64_t sp, int64_t nr, const float *const *rows,
                     const float *const *w, int64_t woff, int64_t nt, const int64_t *toff, int64_t xoff,
                     const float *init, float *out, int64_t os, __m256i mlast, int flags) {
    __m256 acc[MAX_ACC];
    init_acc(NV, UR, init, acc);
    for (int64_t r = 0; r < nr; r++) {
        const float *xp[MAX_UR];
#pragma GCC unroll 8
        for (int i = 0; i < UR; i++) xp[i] = rows[r] + xoff + i * sp;
        const float *wr = w[r] + woff;
        for (int64_t t = 0; t < nt; t++, wr += ws) {
            const int64_t o = toff[t];
            __m256 wv[NV_ANY];
#pragma GCC unroll 4
            for (int b = 0; b < NV; b++) wv[b] = _mm256_loadu_ps(wr + b * VL);
#pragma GCC unroll 8
            for (int i = 0; i < UR; i++)
#pragma GCC unroll 4
                for (int b = 0; b < NV; b++)
                    acc[i * NV + b] = _mm256_fmadd_ps(_mm256_loadu_ps(xp[i] + o + b * VL), wv[b], acc[i * NV + b]);
        }
    }
    store_acc(NV, UR, acc, out, os, mlast, flags);
}

typedef void reuse_fn(int64_t cs, int64_t ws, int64_t nr, const float *const *rows, const float *const *w,
                      int64_t xoff, int64_t woff, const float *init, float *out, int64_t os, __m256i mlast, int flags);
#define REUSE(KT, SP, NV, UR)                                                                                          \
    static void r_##KT##_##SP##_##NV##_##UR(int64_t cs, int64_t ws, int64_t nr, const float *const *rows,            \
                                            const float *const *w, int64_t xoff, int64_t woff, const float *init,    \
                                            float *out, int64_t os, __m256i mlast, int flags) {                    \
        reuse_tile(KT, SP, NV, UR, cs, ws, nr, rows, w, xoff, woff, init, out, os, mlast, flags);                    \
    }
#define REUSE_ENTRY(KT, SP, NV, UR) [KT / 2 - 1][SP - 1][NV][UR] = r_##KT##_##SP##_##NV##_##UR,
#define REUSE_URS(X, KT, SP, NV) X(KT, SP, NV, 1) X(KT, SP, NV, 2) X(KT, SP, NV, 4) X(KT, SP, NV, 7) X(KT, SP, NV, 8)
#define REUSE_NVS(X, KT, SP) REUSE_URS(X, KT, SP, 1)
#define REUSES(X)                                                                                                      \
    REUSE_NVS(X, 3, 1) REUSE_NVS(X, 3, 2) REUSE_NVS(X, 5, 1) REUSE_NVS(X, 5, 2) REUSE_NVS(X, 7, 1) REUSE_NVS(X, 7, 2)
REUSES(REUSE)
static reuse_fn *const reuses[3][2][NV_REUSE + 1][MAX_UR + 1] = {REUSES(REUSE_ENTRY)};

typedef void any_fn(int64_t ws, int64_t sp, int64_t nr, const float *const *rows, const float *const *w, int64_t woff,
                    int64_t nt, const int64_t *toff, int64_t xoff, const float *init, float *out, int64_t os,
                    __m256i mlast, int flags);
#define ANY(NV, UR)                                                                                                    \
    static void a_##NV##_##UR(int64_t ws, int64_t sp, int64_t nr, const float *const *rows, const float *const *w,  \
                              int64_t woff, int64_t nt, const int64_t *toff, int64_t xoff, const float *init,       \
                              float *out, int64_t os, __m256i mlast, int flags) {                                  \
        any_tile(NV, UR, ws, sp, nr, rows, w, woff, nt, toff, xoff, init, out, os, mlast, flags);                    \
    }
#define ANY_ENTRY(NV, UR) [NV][UR] = a_##NV##_##UR,
/* As many pixels as keep the accumulators within MAX_ACC. */
#define UR6(X, NV) X(NV, 1) X(NV, 2) X(NV, 3) X(NV, 4) X(NV, 5) X(NV, 6)
#define UR8(X, NV) UR6(X, NV) X(NV, 7) X(NV, 8)
#define ANYS(X) UR8(X, 1) UR6(X, 2)
ANYS(ANY)
static any_fn *const anys[NV_ANY + 1][MAX_UR + 1] = {ANYS(ANY_ENTRY)};
static const int64_t any_ur[NV_ANY + 1] = {0, 8, 6};

/* The next tile of the n - p pixels left: whole tiles of 8, or of 7 where the row is sevens. */
static int64_t tile_width(int64_t n, int64_t p) {
    const int64_t left = n - p;
    if (n % 8 && n % 7 == 0) return 7;
    return left >= 8 ? 8 : left >= 7 ? 7 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
}

void nconv_f32_dwtile__avx2(int64_t cw, int64_t cs, int64_t step, int64_t n, int64_t nr, const float *const *rows,
                              const float *const *w, int64_t ws, int64_t nt, const int64_t *toff, const float *init, float *out,
                              int64_t os, int64_t nc, int flags) {
    const int64_t nv = cw / VL, kt = nconv__dw_reuse_taps(nt, toff, cs, step);
    const __m256i mlast = nconv__avx2_mask(nc - (nv - 1) * VL);
    /* Streamed stores pay only where a call writes whole lines of a pixel: a reuse tile writes one
     * vector of 8 lanes (half a line) per call, an any tile two; with partial lines streamed, each
     * half left for memory on its own, several times slower than ordinary stores. */
    if (kt || nv < NV_ANY || ((uintptr_t)out | (uintptr_t)os * sizeof(float)) % 64) flags &= ~NCONV_DW_STREAM;
    if (kt) {
        for (int64_t p = 0, u; p < n; p += u) {
            u = tile_width(n, p);
            for (int64_t v0 = 0; v0 < nv; v0 += NV_REUSE) {
                const int64_t sv = nv - v0 < NV_REUSE ? nv - v0 : NV_REUSE, c0 = v0 * VL;
                reuses[kt / 2 - 1][step - 1][sv][u](cs, ws, nr, rows, w, toff[0] + p * step * cs + c0, c0, init + c0,
                                                     out + p * os + c0, os, v0 + sv == nv ? mlast : _mm256_set1_epi32(-1), flags);
            }
        }
        return;
    }
    const int64_t ur = any_ur[nv < NV_ANY ? nv : NV_ANY];
    for (int64_t p = 0, u; p < n; p += u) {
        u = n - p < ur ? n - p : ur;
        for (int64_t v0 = 0; v0 < nv; v0 += NV_ANY) {
            const int64_t sv = nv - v0 < NV_ANY ? nv - v0 : NV_ANY, c0 = v0 * VL;
            anys[sv][u](ws, step * cs, nr, rows, w, c0, nt, toff, p * step * cs + c0, init + c0, out + p * os + c0, os,
                        v0 + sv == nv ? mlast : _mm256_set1_epi32(-1), flags);
        }
    }
}
