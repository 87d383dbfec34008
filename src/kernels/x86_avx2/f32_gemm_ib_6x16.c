/*
 * GEMM with indirect B rows, 6 x 16, AVX2 + FMA (contract in ../kernels.h):
 * backward-weights reads input rows in place through pointers, one per
 * pixel, while the packed A micro-panel holds grad_output transposed.
 */
#include "../kernels.h"
#include "avx2_util.h"

/* Row r of C gets lo, hi, added to what it holds when accumulating, else to *start where start
 * is not NULL. */
static inline void store_row(float *cr, __m256i m0, __m256i m1, __m256 lo, __m256 hi, int full, int accumulate,
                             const float *start) {
    if (!accumulate && start) {
        const __m256 s = _mm256_set1_ps(*start);
        lo = _mm256_add_ps(lo, s), hi = _mm256_add_ps(hi, s);
    }
    if (full) {
        if (accumulate) lo = _mm256_add_ps(lo, _mm256_loadu_ps(cr)), hi = _mm256_add_ps(hi, _mm256_loadu_ps(cr + 8));
        _mm256_storeu_ps(cr, lo), _mm256_storeu_ps(cr + 8, hi);
        return;
    }
    if (accumulate) {
        lo = _mm256_add_ps(lo, _mm256_maskload_ps(cr, m0));
        hi = _mm256_add_ps(hi, _mm256_maskload_ps(cr + 8, m1));
    }
    _mm256_maskstore_ps(cr, m0, lo);
    _mm256_maskstore_ps(cr + 8, m1, hi);
}

#define NCONV_IB_STEP(LOAD0, LOAD1)                                                       \
    do {                                                                                  \
        const float *bk = b[k] + boff;                                                    \
        if (FETCH) _mm_prefetch((const char *)(bk + bs), _MM_HINT_T0);                    \
        const __m256 b0 = LOAD0, b1 = LOAD1;                                              \
        __m256 v = _mm256_broadcast_ss(a);                                                \
        c00 = _mm256_fmadd_ps(v, b0, c00), c01 = _mm256_fmadd_ps(v, b1, c01);            \
        v = _mm256_broadcast_ss(a + 1);                                                   \
        c10 = _mm256_fmadd_ps(v, b0, c10), c11 = _mm256_fmadd_ps(v, b1, c11);            \
        v = _mm256_broadcast_ss(a + 2);                                                   \
        c20 = _mm256_fmadd_ps(v, b0, c20), c21 = _mm256_fmadd_ps(v, b1, c21);            \
        v = _mm256_broadcast_ss(a + 3);                                                   \
        c30 = _mm256_fmadd_ps(v, b0, c30), c31 = _mm256_fmadd_ps(v, b1, c31);            \
        v = _mm256_broadcast_ss(a + 4);                                                   \
        c40 = _mm256_fmadd_ps(v, b0, c40), c41 = _mm256_fmadd_ps(v, b1, c41);            \
        v = _mm256_broadcast_ss(a + 5);                                                   \
        c50 = _mm256_fmadd_ps(v, b0, c50), c51 = _mm256_fmadd_ps(v, b1, c51);            \
    } while (0)

/* FETCH: the next panel's columns (bs floats on) of each B row are fetched as the row is read. */
static inline __attribute__((always_inline)) void ib_panel(int64_t mr, int64_t nc, int64_t kc, const float *a,
                                                           int64_t lda, const float *const *b, int64_t boff, int64_t bs,
                                                           float *c, int64_t ldc, const float *rinit, int accumulate,
                                                           const int FETCH) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const __m256i m0 = nconv__avx2_mask(nc), m1 = nconv__avx2_mask(nc - 8);
    if (nc == 16) {
#pragma GCC unroll 4
        for (int64_t k = 0; k < kc; k++, a += lda) NCONV_IB_STEP(_mm256_loadu_ps(bk), _mm256_loadu_ps(bk + 8));
    } else {
        for (int64_t k = 0; k < kc; k++, a += lda) NCONV_IB_STEP(_mm256_maskload_ps(bk, m0), _mm256_maskload_ps(bk + 8, m1));
    }
    const int full = nc == 16;
    store_row(c, m0, m1, c00, c01, full, accumulate, rinit);
    if (mr > 1) store_row(c + ldc, m0, m1, c10, c11, full, accumulate, rinit ? rinit + 1 : NULL);
    if (mr > 2) store_row(c + 2 * ldc, m0, m1, c20, c21, full, accumulate, rinit ? rinit + 2 : NULL);
    if (mr > 3) store_row(c + 3 * ldc, m0, m1, c30, c31, full, accumulate, rinit ? rinit + 3 : NULL);
    if (mr > 4) store_row(c + 4 * ldc, m0, m1, c40, c41, full, accumulate, rinit ? rinit + 4 : NULL);
    if (mr > 5) store_row(c + 5 * ldc, m0, m1, c50, c51, full, accumulate, rinit ? rinit + 5 : NULL);
}

void nconv_f32_gemm_ib_6x16__avx2(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *const *b,
                                  int64_t boff, float *c, int64_t ldc, int accumulate) {
    ib_panel(mr, nc, kc, a, 6, b, boff, 0, c, ldc, NULL, accumulate, 0);
}

void nconv_f32_gemm_ib_6x16_np__avx2(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                     int64_t lda, const float *const *b, int64_t boff, int64_t bs, float *c,
                                     int64_t ldc, const float *rinit, int flags) {
    const int accumulate = flags & NCONV_GEMM_ACCUMULATE;
    for (int64_t q = 0; q < np; q++) {
        const int64_t nc = q + 1 < np ? 16 : nc_last;
        if (flags & NCONV_GEMM_FETCH_B)
            ib_panel(mr, nc, kc, a, lda, b, boff + q * bs, bs, c + q * 16, ldc, rinit, accumulate, 1);
        else
            ib_panel(mr, nc, kc, a, lda, b, boff + q * bs, bs, c + q * 16, ldc, rinit, accumulate, 0);
    }
}
