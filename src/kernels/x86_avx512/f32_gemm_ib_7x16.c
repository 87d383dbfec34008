/* GEMM with indirect B rows, 7 x 16 tiles, AVX-512 (contract in ../kernels.h; see f32_gemm_ib_tall.h). */
#include "f32_gemm_ib_tall.h"

void nconv_f32_gemm_ib_7x16_np__avx512(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                       int64_t lda, const float *const *b, int64_t boff, int64_t bs, float *c,
                                       int64_t ldc, const float *rinit, int flags) {
    gemm_ib_tall(7, mr, np, nc_last, kc, a, lda, b, boff, bs, c, ldc, rinit, flags);
}
