/* GEMM with indirect B rows, 6 x 16, portable C (contract in ../kernels.h). */
#include "../kernels.h"

static void ib(int64_t mr, int64_t nc, int64_t kc, const float *a, int64_t lda, const float *const *b, int64_t boff,
               float *c, int64_t ldc, const float *rinit, int accumulate) {
    float acc[6][16] = {{0}};
    for (int64_t k = 0; k < kc; k++, a += lda) {
        const float *bk = b[k] + boff;
        for (int64_t r = 0; r < 6; r++)
            for (int64_t j = 0; j < nc; j++) acc[r][j] += a[r] * bk[j];
    }
    for (int64_t r = 0; r < mr; r++)
        for (int64_t j = 0; j < nc; j++)
            c[r * ldc + j] = accumulate ? c[r * ldc + j] + acc[r][j] : rinit ? rinit[r] + acc[r][j] : acc[r][j];
}

void nconv_f32_gemm_ib_6x16__generic(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *const *b,
                                     int64_t boff, float *c, int64_t ldc, int accumulate) {
    ib(mr, nc, kc, a, 6, b, boff, c, ldc, NULL, accumulate);
}

void nconv_f32_gemm_ib_6x16_np__generic(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                        int64_t lda, const float *const *b, int64_t boff, int64_t bs, float *c,
                                        int64_t ldc, const float *rinit, int flags) {
    for (int64_t q = 0; q < np; q++)
        ib(mr, q + 1 < np ? 16 : nc_last, kc, a, lda, b, boff + q * bs, c + q * 16, ldc, rinit,
           flags & NCONV_GEMM_ACCUMULATE);
}
