/*
 * GEMM with indirect B rows, 7 x 16 tiles, AVX-512 (contract in ../kernels.h):
 * backward-weights of thin W-folded inputs, whose tile rows are (kw, c) runs
 * of 7 x 3 (the 7 x 7 RGB stem) that 6-row tiles fill to 21 of 24. Two panels
 * give fourteen accumulators, enough FMA chains without the 6 x 16 kernels'
 * even / odd split, so the sums run in k order.
 */
#include "../kernels.h"
#include "avx512_util.h"

#define FMA7(acc, b, ak)                                                                                  \
    NCONV_AVX512_FMA6(acc, b, ak);                                                                        \
    NCONV_AVX512_ROW1(acc, 6, b, ak)

#define FMA14(e, f, bq, br, ak)                                                                           \
    do {                                                                                                  \
        NCONV_AVX512_FMA12(e, f, bq, br, ak);                                                             \
        NCONV_AVX512_ROW2(e, f, 6, bq, br, ak);                                                           \
    } while (0)

#define STORE7(acc, cp, m)                                                                                \
    do {                                                                                                  \
        NCONV_AVX512_STORE6(acc, cp, ldc, m, mr, accumulate);                                             \
        if (mr > 6) nconv__avx512_store_row(cp + 6 * ldc, m, acc##6, accumulate);                         \
    } while (0)

void nconv_f32_gemm_ib_7x16_np__avx512(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                       int64_t lda, const float *const *b, int64_t boff, int64_t bs, float *c,
                                       int64_t ldc, int accumulate) {
    int64_t q = 0;
    for (; q + 1 < np; q += 2) {
        const int64_t off = boff + q * bs;
        const __mmask16 m = nconv__avx512_mask(q + 2 < np ? 16 : nc_last);
        __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0, e6 = e0;
        __m512 f0 = e0, f1 = e0, f2 = e0, f3 = e0, f4 = e0, f5 = e0, f6 = e0;
        const float *ak = a;
        int64_t k = 0;
        if (m == 0xffff)
            for (; k + 1 < kc; k += 2, ak += 2 * lda) {
                const float *b0 = b[k] + off, *b1 = b[k + 1] + off;
                const __m512 bq0 = _mm512_loadu_ps(b0), br0 = _mm512_loadu_ps(b0 + bs);
                const __m512 bq1 = _mm512_loadu_ps(b1), br1 = _mm512_loadu_ps(b1 + bs);
                FMA14(e, f, bq0, br0, ak);
                FMA14(e, f, bq1, br1, ak + lda);
            }
        for (; k < kc; k++, ak += lda) {
            const float *bk = b[k] + off;
            const __m512 bq = _mm512_loadu_ps(bk), br = _mm512_maskz_loadu_ps(m, bk + bs);
            FMA14(e, f, bq, br, ak);
        }
        float *cq = c + q * 16;
        STORE7(e, cq, 0xffff);
        STORE7(f, cq + 16, m);
    }
    if (q < np) {
        const int64_t off = boff + q * bs;
        const __mmask16 m = nconv__avx512_mask(nc_last);
        __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0, e6 = e0;
        const float *ak = a;
        for (int64_t k = 0; k < kc; k++, ak += lda) {
            const __m512 bq = _mm512_maskz_loadu_ps(m, b[k] + off);
            FMA7(e, bq, ak);
        }
        float *cq = c + q * 16;
        STORE7(e, cq, m);
    }
}
