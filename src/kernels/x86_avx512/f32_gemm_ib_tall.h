/*
 * The body of the AVX-512 GEMM kernels with indirect B rows and tiles taller
 * than 6 rows (contract in ../kernels.h), inlined into each with its height:
 * the backward-weights of thin W-folded inputs, whose tile rows are (kw, c)
 * runs that 6-row tiles fill badly (7 x 3 for the 7 x 7 RGB stem: 21 of 24;
 * 3 x 3 for 3 x 3 ones: 9 of 12, each panel of B loaded twice). Two panels
 * give 14 or 18 accumulators, enough FMA chains without the 6 x 16 kernels'
 * even / odd split, so the sums run in k order. The accumulator arrays, indexed
 * by constants once the row loops unroll, stay in registers.
 */
#ifndef NCONV_AVX512_F32_GEMM_IB_TALL_H
#define NCONV_AVX512_F32_GEMM_IB_TALL_H

#include "../kernels.h"
#include "avx512_util.h"

enum { IB_TALL_MAX = 9 };

/* acc[r] += ak[r] * b for rows r < rows. */
static inline __attribute__((always_inline)) void ib_tall_fma(int rows, __m512 *acc, __m512 b, const float *ak) {
#pragma GCC unroll 9
    for (int r = 0; r < rows; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(ak[r]), b, acc[r]);
}

/* Rows r < mr of acc into C rows ldc floats apart, columns of mask m. */
static inline __attribute__((always_inline)) void ib_tall_store(int rows, const __m512 *acc, float *cp, int64_t ldc,
                                                                __mmask16 m, int64_t mr, int accumulate,
                                                                const float *rinit) {
#pragma GCC unroll 9
    for (int r = 0; r < rows; r++)
        if (r < mr) nconv__avx512_store_row(cp + r * ldc, m, acc[r], accumulate, rinit ? rinit + r : NULL);
}

static inline __attribute__((always_inline)) void gemm_ib_tall(int rows, int64_t mr, int64_t np, int64_t nc_last,
                                                               int64_t kc, const float *a, int64_t lda,
                                                               const float *const *b, int64_t boff, int64_t bs,
                                                               float *c, int64_t ldc, const float *rinit,
                                                               int flags) {
    const int accumulate = flags & NCONV_GEMM_ACCUMULATE;
    int64_t q = 0;
    for (; q + 1 < np; q += 2) { /* two panels: each broadcast of A feeds both */
        const int64_t off = boff + q * bs;
        const __mmask16 m = nconv__avx512_mask(q + 2 < np ? 16 : nc_last);
        __m512 e[IB_TALL_MAX], f[IB_TALL_MAX];
#pragma GCC unroll 9
        for (int r = 0; r < rows; r++) e[r] = f[r] = _mm512_setzero_ps();
        const float *ak = a;
        int64_t k = 0;
        if (m == 0xffff)
            for (; k + 1 < kc; k += 2, ak += 2 * lda) {
                const float *b0 = b[k] + off, *b1 = b[k + 1] + off;
                const __m512 bq0 = _mm512_loadu_ps(b0), br0 = _mm512_loadu_ps(b0 + bs);
                const __m512 bq1 = _mm512_loadu_ps(b1), br1 = _mm512_loadu_ps(b1 + bs);
                ib_tall_fma(rows, e, bq0, ak), ib_tall_fma(rows, f, br0, ak);
                ib_tall_fma(rows, e, bq1, ak + lda), ib_tall_fma(rows, f, br1, ak + lda);
            }
        for (; k < kc; k++, ak += lda) {
            const float *bk = b[k] + off;
            ib_tall_fma(rows, e, _mm512_loadu_ps(bk), ak), ib_tall_fma(rows, f, _mm512_maskz_loadu_ps(m, bk + bs), ak);
        }
        ib_tall_store(rows, e, c + q * 16, ldc, 0xffff, mr, accumulate, rinit);
        ib_tall_store(rows, f, c + q * 16 + 16, ldc, m, mr, accumulate, rinit);
    }
    if (q < np) {
        const int64_t off = boff + q * bs;
        const __mmask16 m = nconv__avx512_mask(nc_last);
        __m512 e[IB_TALL_MAX];
#pragma GCC unroll 9
        for (int r = 0; r < rows; r++) e[r] = _mm512_setzero_ps();
        const float *ak = a;
        for (int64_t k = 0; k < kc; k++, ak += lda) ib_tall_fma(rows, e, _mm512_maskz_loadu_ps(m, b[k] + off), ak);
        ib_tall_store(rows, e, c + q * 16, ldc, m, mr, accumulate, rinit);
    }
}

#endif
