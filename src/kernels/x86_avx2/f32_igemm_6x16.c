/*
 * Indirect GEMM micro-kernel, 6 rows x 16 columns, AVX2 + FMA.
 * Contract in ../kernels.h. Twelve accumulators stay in registers for the
 * whole reduction (ks taps x kc channels); per k: two loads of the packed
 * weights and six broadcasts feed twelve FMAs.
 */
#include "../kernels.h"
#include "avx2_util.h"

/* Step k of the reduction from the rows a0 .. a5 and the packed weights w into the twelve
 * accumulators c00 .. c51 (rows 0-5, column halves 0-1). */
#define IGEMM_STEP(k)                                                                                    \
    do {                                                                                                 \
        const __m256 b0 = _mm256_load_ps(w), b1 = _mm256_load_ps(w + 8);                                 \
        __m256 v = _mm256_broadcast_ss(a0 + (k));                                                        \
        c00 = _mm256_fmadd_ps(v, b0, c00), c01 = _mm256_fmadd_ps(v, b1, c01);                            \
        v = _mm256_broadcast_ss(a1 + (k));                                                               \
        c10 = _mm256_fmadd_ps(v, b0, c10), c11 = _mm256_fmadd_ps(v, b1, c11);                            \
        v = _mm256_broadcast_ss(a2 + (k));                                                               \
        c20 = _mm256_fmadd_ps(v, b0, c20), c21 = _mm256_fmadd_ps(v, b1, c21);                            \
        v = _mm256_broadcast_ss(a3 + (k));                                                               \
        c30 = _mm256_fmadd_ps(v, b0, c30), c31 = _mm256_fmadd_ps(v, b1, c31);                            \
        v = _mm256_broadcast_ss(a4 + (k));                                                               \
        c40 = _mm256_fmadd_ps(v, b0, c40), c41 = _mm256_fmadd_ps(v, b1, c41);                            \
        v = _mm256_broadcast_ss(a5 + (k));                                                               \
        c50 = _mm256_fmadd_ps(v, b0, c50), c51 = _mm256_fmadd_ps(v, b1, c51);                            \
    } while (0)

/* kc steps of the reduction. */
#define IGEMM_KLOOP() _Pragma("GCC unroll 4") for (int64_t k = 0; k < kc; k++, w += 16) IGEMM_STEP(k);

/* IGEMM_KLOOP fetching the next tile's rows n[0 .. 5] (NCONV_IGEMM_NEXT_A), a line of each per
 * 16 steps. */
#define IGEMM_KLOOP_NEXT(n)                                                                              \
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {                                                           \
        for (int r_ = 0; r_ < 6; r_++) __builtin_prefetch((n)[r_] + a_off + k0);                         \
        const int64_t k1 = kc - k0 < 16 ? kc : k0 + 16;                                                  \
        _Pragma("GCC unroll 4") for (int64_t k = k0; k < k1; k++, w += 16) IGEMM_STEP(k);                \
    }

/* The whole reduction (ks taps x kc channels), shared by the row-store and plane-store kernels. */
#define IGEMM_REDUCE()                         \
    for (int64_t t = 0; t < ks; t++, a += 6) { \
        NCONV_IGEMM_ROWS(a)                    \
        IGEMM_KLOOP()                          \
    }

#define IGEMM_RELU() \
    if (flags & NCONV_IGEMM_RELU) { /* max(0, c) keeps NaN, as torch.relu */                    \
        const __m256 z = _mm256_setzero_ps();                                                   \
        c00 = _mm256_max_ps(z, c00), c01 = _mm256_max_ps(z, c01), c10 = _mm256_max_ps(z, c10);  \
        c11 = _mm256_max_ps(z, c11), c20 = _mm256_max_ps(z, c20), c21 = _mm256_max_ps(z, c21);  \
        c30 = _mm256_max_ps(z, c30), c31 = _mm256_max_ps(z, c31), c40 = _mm256_max_ps(z, c40);  \
        c41 = _mm256_max_ps(z, c41), c50 = _mm256_max_ps(z, c50), c51 = _mm256_max_ps(z, c51);  \
    }

/* Rows r < mr, columns o + j (j < nc) of the tile into the c rows. */
static inline void store_tile(float *const *c, int64_t o, int64_t mr, int64_t nc, int flags, __m256 c00, __m256 c01,
                              __m256 c10, __m256 c11, __m256 c20, __m256 c21, __m256 c30, __m256 c31, __m256 c40,
                              __m256 c41, __m256 c50, __m256 c51) {
#define STORE_ROWS(st)                                                       \
    do {                                                                     \
        st(c[0] + o, c00), st(c[0] + o + 8, c01);                            \
        if (mr > 1) st(c[1] + o, c10), st(c[1] + o + 8, c11);                \
        if (mr > 2) st(c[2] + o, c20), st(c[2] + o + 8, c21);                \
        if (mr > 3) st(c[3] + o, c30), st(c[3] + o + 8, c31);                \
        if (mr > 4) st(c[4] + o, c40), st(c[4] + o + 8, c41);                \
        if (mr > 5) st(c[5] + o, c50), st(c[5] + o + 8, c51);                \
    } while (0)
    if (nc == 16 && (flags & NCONV_IGEMM_STREAM)) { /* outputs of megabytes: no read for ownership, no cache pollution */
        STORE_ROWS(_mm256_stream_ps);
    } else if (nc == 16) {
        STORE_ROWS(_mm256_storeu_ps);
    } else {
        const __m256i m0 = nconv__avx2_mask(nc), m1 = nconv__avx2_mask(nc - 8);
        _mm256_maskstore_ps(c[0] + o, m0, c00), _mm256_maskstore_ps(c[0] + o + 8, m1, c01);
        if (mr > 1) _mm256_maskstore_ps(c[1] + o, m0, c10), _mm256_maskstore_ps(c[1] + o + 8, m1, c11);
        if (mr > 2) _mm256_maskstore_ps(c[2] + o, m0, c20), _mm256_maskstore_ps(c[2] + o + 8, m1, c21);
        if (mr > 3) _mm256_maskstore_ps(c[3] + o, m0, c30), _mm256_maskstore_ps(c[3] + o + 8, m1, c31);
        if (mr > 4) _mm256_maskstore_ps(c[4] + o, m0, c40), _mm256_maskstore_ps(c[4] + o + 8, m1, c41);
        if (mr > 5) _mm256_maskstore_ps(c[5] + o, m0, c50), _mm256_maskstore_ps(c[5] + o + 8, m1, c51);
    }
#undef STORE_ROWS
}

/* store_tile into 16-bit rows (np16). */
static inline void store_tile16(uint16_t *const *c, int64_t o, int64_t mr, int64_t nc, int flags, __m256 c00,
                                __m256 c01, __m256 c10, __m256 c11, __m256 c20, __m256 c21, __m256 c30, __m256 c31,
                                __m256 c40, __m256 c41, __m256 c50, __m256 c51) {
    nconv__avx2_store16(c[0] + o, nc, c00, c01, flags & NCONV_IGEMM_BF16);
    if (mr > 1) nconv__avx2_store16(c[1] + o, nc, c10, c11, flags & NCONV_IGEMM_BF16);
    if (mr > 2) nconv__avx2_store16(c[2] + o, nc, c20, c21, flags & NCONV_IGEMM_BF16);
    if (mr > 3) nconv__avx2_store16(c[3] + o, nc, c30, c31, flags & NCONV_IGEMM_BF16);
    if (mr > 4) nconv__avx2_store16(c[4] + o, nc, c40, c41, flags & NCONV_IGEMM_BF16);
    if (mr > 5) nconv__avx2_store16(c[5] + o, nc, c50, c51, flags & NCONV_IGEMM_BF16);
}

void nconv_f32_igemm_6x16__avx2(int64_t mr, int64_t nc, int64_t kc, int64_t ks, const float *const *a,
                                int64_t a_off, const float *zero, const float *w, float *const *c, const float *init,
                                int flags) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (init) {
        c00 = c10 = c20 = c30 = c40 = c50 = _mm256_loadu_ps(init);
        c01 = c11 = c21 = c31 = c41 = c51 = _mm256_loadu_ps(init + 8);
    } else {
        /* Accumulate onto C: rows past mr repeat row 0 so the loads stay valid. */
        const __m256i m0 = nconv__avx2_mask(nc), m1 = nconv__avx2_mask(nc - 8);
        float *const r0 = c[0], *const r1 = mr > 1 ? c[1] : r0, *const r2 = mr > 2 ? c[2] : r0;
        float *const r3 = mr > 3 ? c[3] : r0, *const r4 = mr > 4 ? c[4] : r0, *const r5 = mr > 5 ? c[5] : r0;
        c00 = _mm256_maskload_ps(r0, m0), c01 = _mm256_maskload_ps(r0 + 8, m1);
        c10 = _mm256_maskload_ps(r1, m0), c11 = _mm256_maskload_ps(r1 + 8, m1);
        c20 = _mm256_maskload_ps(r2, m0), c21 = _mm256_maskload_ps(r2 + 8, m1);
        c30 = _mm256_maskload_ps(r3, m0), c31 = _mm256_maskload_ps(r3 + 8, m1);
        c40 = _mm256_maskload_ps(r4, m0), c41 = _mm256_maskload_ps(r4 + 8, m1);
        c50 = _mm256_maskload_ps(r5, m0), c51 = _mm256_maskload_ps(r5 + 8, m1);
    }
    IGEMM_REDUCE();
    IGEMM_RELU();
    store_tile(c, 0, mr, nc, flags, c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51);
}

/* All column panels of a tile in one call: the per-call set-up (A rows,
 * C rows, the framework's loop) once per tile, not per panel. Into f32 rows c
 * or, when to16, 16-bit rows c16 (then init is set); inlined into each
 * kernel, where to16 is known, so each keeps one store path. */
static inline __attribute__((always_inline)) void all_panels(int64_t mr, int64_t np, int64_t nc_last, int64_t kc,
                                                             int64_t ks, const float *const *a, int64_t a_off,
                                                             const float *zero, const float *w, int64_t ws,
                                                             float *const *c, uint16_t *const *c16, int to16,
                                                             const float *init, int flags) {
    if (!init && !to16) { /* accumulating reduction blocks are long: the per-call set-up matters little */
        for (int64_t q = 0; q < np; q++) {
            float *cq[6];
            for (int r = 0; r < 6; r++) cq[r] = c[r] + q * 16;
            nconv_f32_igemm_6x16__avx2(mr, q + 1 < np ? 16 : nc_last, kc, ks, a, a_off, zero, w + q * ws, cq, NULL,
                                       flags);
        }
        return;
    }
    const float *const *const at = a;
    const float *const w0 = w;
    /* Outputs far larger than the caches, written with plain stores: each one
     * would miss for ownership in turn. */
    const int64_t next_tile = !to16 && (flags & NCONV_IGEMM_PREFETCH) ? 6 * (c[1] - c[0]) : 0;
/* Column panel q: its initial values, the reduction, relu, the store, the next tile's lines. */
#define NP_PANEL(reduce)                                                                                          \
    do {                                                                                                          \
        __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;                                        \
        c00 = c10 = c20 = c30 = c40 = c50 = _mm256_loadu_ps(init + q * 16);                                       \
        c01 = c11 = c21 = c31 = c41 = c51 = _mm256_loadu_ps(init + q * 16 + 8);                                   \
        reduce;                                                                                                   \
        IGEMM_RELU();                                                                                             \
        if (to16)                                                                                                  \
            store_tile16(c16, q * 16, mr, q + 1 < np ? 16 : nc_last, flags, c00, c01, c10, c11, c20, c21, c30,    \
                         c31, c40, c41, c50, c51);                                                                \
        else                                                                                                      \
            store_tile(c, q * 16, mr, q + 1 < np ? 16 : nc_last, flags, c00, c01, c10, c11, c20, c21, c30, c31,   \
                       c40, c41, c50, c51);                                                                       \
        if (!to16 && next_tile)                                                                                    \
            for (int r = 0; r < 6; r++) __builtin_prefetch(c[r] + q * 16 + next_tile, 1, 3);                      \
    } while (0)
    if (ks == 1) { /* 1x1, W-folded thin inputs: the rows once for all panels (a short reduction's set-up) */
        NCONV_IGEMM_ROWS(a)
        int64_t q = 0;
        if (flags & NCONV_IGEMM_NEXT_A) {
            NP_PANEL(IGEMM_KLOOP_NEXT(at + 6));
            q++;
        }
        for (; q < np; q++) {
            w = w0 + q * ws;
            NP_PANEL(IGEMM_KLOOP());
        }
        return;
    }
    for (int64_t q = 0; q < np; q++) {
        a = at, w = w0 + q * ws;
        NP_PANEL(IGEMM_REDUCE());
    }
#undef NP_PANEL
}

void nconv_f32_igemm_6x16_np__avx2(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                   const float *const *a, int64_t a_off, const float *zero, const float *w,
                                   int64_t ws, float *const *c, const float *init, int flags) {
    all_panels(mr, np, nc_last, kc, ks, a, a_off, zero, w, ws, c, NULL, 0, init, flags);
}

void nconv_f32_igemm_6x16_rows__avx2(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a, int64_t lda,
                                   const float *w, int64_t ws, float *c, int64_t ldc, const float *init, int flags) {
    NCONV_IGEMM_ROWS_EACH_TILE(float, all_panels(mr_, np, nc_last, kc, 1, ar_, 0, NULL, w, ws, cr_, NULL, 0, init,
                                                 flags));
}

void nconv_f32_igemm_6x16_np16__avx2(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                     const float *const *a, int64_t a_off, const float *zero, const float *w,
                                     int64_t ws, uint16_t *const *c, const float *init, int flags) {
    all_panels(mr, np, nc_last, kc, ks, a, a_off, zero, w, ws, NULL, c, 1, init, flags);
}

void nconv_f32_igemm_6x16_rows16__avx2(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                     int64_t lda, const float *w, int64_t ws, uint16_t *c, int64_t ldc,
                                     const float *init, int flags) {
    NCONV_IGEMM_ROWS_EACH_TILE(uint16_t, all_panels(mr_, np, nc_last, kc, 1, ar_, 0, NULL, w, ws, NULL, cr_, 1, init,
                                                    flags));
}

void nconv_f32_igemm_6x16_planes__avx2(int64_t np, int64_t nc_last, int64_t kc, int64_t ks, const float *const *a,
                                       int64_t a_off, const float *zero, const float *w, int64_t ws, float *c,
                                       int64_t ldc, const float *init, int flags) {
    const float *const *const at = a;
    const float *const w0 = w;
    for (int64_t q = 0; q < np; q++) {
        const int64_t nc = q + 1 < np ? 16 : nc_last;
        __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
        c00 = c10 = c20 = c30 = c40 = c50 = _mm256_loadu_ps(init + q * 16);
        c01 = c11 = c21 = c31 = c41 = c51 = _mm256_loadu_ps(init + q * 16 + 8);
        a = at, w = w0 + q * ws;
        IGEMM_REDUCE();
        IGEMM_RELU();
        float *cq = c + q * 16 * ldc;
        nconv__avx2_store_planes(cq, ldc, nc, c00, c10, c20, c30, c40, c50);
        if (nc > 8) nconv__avx2_store_planes(cq + 8 * ldc, ldc, nc - 8, c01, c11, c21, c31, c41, c51);
    }
}
