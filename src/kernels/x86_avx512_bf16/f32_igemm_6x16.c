/*
 * igemm_np16 and igemm_rows16 of ../x86_avx512/f32_igemm_6x16.c built with AVX512-BF16 (contract in
 * ../kernels.h): the same sums, narrowed to bf16 by VCVTNEPS2BF16 (../x86_avx512/avx512_util.h).
 */
#include "../x86_avx512/f32_igemm_6x16.h"

void nconv_f32_igemm_6x16_np16__avx512_bf16(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                            const float *const *a, int64_t a_off, const float *zero,
                                            const float *w, int64_t ws, uint16_t *const *c, const float *init,
                                            int flags) {
    all_panels(mr, np, nc_last, kc, ks, a, a_off, zero, w, ws, NULL, c, 1, init, flags);
}

void nconv_f32_igemm_6x16_rows16__avx512_bf16(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                     int64_t lda, const float *w, int64_t ws, uint16_t *c, int64_t ldc,
                                     const float *init, int flags) {
    NCONV_IGEMM_ROWS_EACH_TILE(uint16_t, all_panels(mr_, np, nc_last, kc, 1, ar_, 0, NULL, w, ws, NULL, cr_, 1, init,
                                                    flags));
}
