/* Packed GEMM, 6 x 16, portable C (contract in ../kernels.h). */
#include "../../internal.h"
#include "../kernels.h"

/* A read as a[k * lda + r]. */
static void gemm_lda(int64_t mr, int64_t nc, int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                     int64_t ldc, const float *rinit, int flags) {
    /* Products first (the loop the compiler vectorizes), then the start values. */
    float acc[6][16] = {{0}};
    for (int64_t k = 0; k < kc; k++, a += lda) {
        const float *bk = b + k * 16;
        for (int64_t r = 0; r < 6; r++)
            for (int64_t j = 0; j < nc; j++) acc[r][j] += a[r] * bk[j];
    }
    for (int64_t r = 0; r < mr; r++)
        for (int64_t j = 0; j < nc; j++) {
            const float start = (flags & NCONV_GEMM_ACCUMULATE) ? c[r * ldc + j] : rinit ? rinit[r] : 0.0f;
            const float v = start + acc[r][j];
            c[r * ldc + j] = (flags & NCONV_GEMM_RELU) && v < 0 ? 0.0f : v; /* NaN stays NaN */
        }
}

void nconv_f32_gemm_6x16__generic(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *b, float *c,
                                  int64_t ldc, const float *rinit, int flags) {
    gemm_lda(mr, nc, kc, a, 6, b, c, ldc, rinit, flags);
}

void nconv_f32_gemm_6x16_np__generic(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a, int64_t lda,
                                     const float *b, int64_t bs, float *c, int64_t ldc, const float *rinit, int flags) {
    for (int64_t q = 0; q < np; q++)
        gemm_lda(mr, q + 1 < np ? 16 : nc_last, kc, a, lda, b + q * bs, c + q * 16, ldc, rinit, flags);
}

void nconv_f32_gemm_6x16_np16__generic(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                       int64_t lda, const float *b, int64_t bs, uint16_t *c, int64_t ldc,
                                       const float *rinit, int flags) {
    for (int64_t q = 0; q < np; q++) {
        const int64_t nc = q + 1 < np ? 16 : nc_last;
        float tile[6][16];
        gemm_lda(mr, nc, kc, a, lda, b + q * bs, tile[0], 16, rinit, flags & NCONV_GEMM_RELU);
        for (int64_t r = 0; r < mr; r++)
            for (int64_t j = 0; j < nc; j++)
                c[r * ldc + q * 16 + j] =
                    flags & NCONV_GEMM_BF16 ? nconv__f32_to_bf16(tile[r][j]) : nconv__f32_to_f16(tile[r][j]);
    }
}
