/*
 * gemm_np16 of ../x86_avx512/f32_gemm_6x16.c built with AVX512-BF16 (contract in ../kernels.h):
 * the same sums, narrowed to bf16 by VCVTNEPS2BF16 (../x86_avx512/avx512_util.h).
 */
#include "../x86_avx512/f32_gemm_6x16.h"

void nconv_f32_gemm_6x16_np16__avx512_bf16(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                           int64_t lda, const float *b, int64_t bs, uint16_t *c, int64_t ldc,
                                           const float *rinit, int flags) {
    all_panels(mr, np, nc_last, kc, a, lda, b, bs, NULL, c, 1, ldc, rinit, flags);
}
