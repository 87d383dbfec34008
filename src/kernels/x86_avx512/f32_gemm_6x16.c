/*
 * Packed GEMM micro-kernels, 6 x 16, AVX-512 (contract in ../kernels.h): the
 * one-panel tile and its np and np16 variants, on the bodies of
 * f32_gemm_6x16.h.
 */
#include "f32_gemm_6x16.h"

void nconv_f32_gemm_6x16__avx512(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *b, float *c,
                                 int64_t ldc, const float *rinit, int flags) {
    gemm_lda(mr, nc, kc, a, 6, b, c, NULL, 0, ldc, rinit, flags);
}

void nconv_f32_gemm_6x16_np__avx512(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                    int64_t lda, const float *b, int64_t bs, float *c, int64_t ldc, const float *rinit,
                                    int flags) {
    all_panels(mr, np, nc_last, kc, a, lda, b, bs, c, NULL, 0, ldc, rinit, flags);
}

void nconv_f32_gemm_6x16_np16__avx512(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                      int64_t lda, const float *b, int64_t bs, uint16_t *c, int64_t ldc,
                                      const float *rinit, int flags) {
    all_panels(mr, np, nc_last, kc, a, lda, b, bs, NULL, c, 1, ldc, rinit, flags);
}
