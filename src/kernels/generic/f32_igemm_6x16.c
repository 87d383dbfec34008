/* Indirect GEMM micro-kernel, 6 x 16, portable C (contract in ../kernels.h). */
#include "../../internal.h"
#include "../kernels.h"

#include <stddef.h>

void nconv_f32_igemm_6x16__generic(int64_t mr, int64_t nc, int64_t kc, int64_t ks, const float *const *a,
                                   int64_t a_off, const float *zero, const float *w, float *const *c,
                                   const float *init, int flags) {
    const int relu = flags & NCONV_IGEMM_RELU; /* plain stores only: NCONV_IGEMM_STREAM is a hint */
    float acc[6][16];
    for (int64_t r = 0; r < 6; r++)
        for (int64_t j = 0; j < 16; j++) acc[r][j] = init ? init[j] : (r < mr && j < nc ? c[r][j] : 0.0f);
    for (int64_t t = 0; t < ks; t++, a += 6)
        for (int64_t k = 0; k < kc; k++, w += 16)
            for (int64_t r = 0; r < 6; r++) {
                const float v = a[r] == zero ? 0.0f : a[r][a_off + k];
                for (int64_t j = 0; j < 16; j++) acc[r][j] += v * w[j];
            }
    for (int64_t r = 0; r < mr; r++)
        for (int64_t j = 0; j < nc; j++) c[r][j] = relu && acc[r][j] < 0 ? 0.0f : acc[r][j]; /* NaN stays NaN */
}

void nconv_f32_igemm_6x16_planes__generic(int64_t np, int64_t nc_last, int64_t kc, int64_t ks, const float *const *a,
                                          int64_t a_off, const float *zero, const float *w, int64_t ws, float *c,
                                          int64_t ldc, const float *init, int flags) {
    for (int64_t q = 0; q < np; q++) {
        const int64_t nc = q + 1 < np ? 16 : nc_last;
        float tile[6][16];
        float *rows[6];
        for (int r = 0; r < 6; r++) rows[r] = tile[r];
        nconv_f32_igemm_6x16__generic(6, nc, kc, ks, a, a_off, zero, w + q * ws, rows, init + q * 16,
                                      flags & NCONV_IGEMM_RELU);
        for (int64_t j = 0; j < nc; j++)
            for (int r = 0; r < 6; r++) c[(q * 16 + j) * ldc + r] = tile[r][j];
    }
}

void nconv_f32_igemm_6x16_np__generic(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                      const float *const *a, int64_t a_off, const float *zero, const float *w,
                                      int64_t ws, float *const *c, const float *init, int flags) {
    for (int64_t q = 0; q < np; q++) {
        float *rows[6];
        for (int64_t r = 0; r < 6; r++) rows[r] = (r < mr ? c[r] : c[0]) + q * 16;
        nconv_f32_igemm_6x16__generic(mr, q + 1 < np ? 16 : nc_last, kc, ks, a, a_off, zero, w + q * ws, rows,
                                      init ? init + q * 16 : NULL, flags);
    }
}

void nconv_f32_igemm_6x16_rows__generic(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                        int64_t lda, const float *w, int64_t ws, float *c, int64_t ldc,
                                        const float *init, int flags) {
    NCONV_IGEMM_ROWS_EACH_TILE(
        float, nconv_f32_igemm_6x16_np__generic(mr_, np, nc_last, kc, 1, ar_, 0, NULL, w, ws, cr_, init, flags));
}

void nconv_f32_igemm_6x16_np16__generic(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                        const float *const *a, int64_t a_off, const float *zero, const float *w,
                                        int64_t ws, uint16_t *const *c, const float *init, int flags) {
    for (int64_t q = 0; q < np; q++) {
        const int64_t nc = q + 1 < np ? 16 : nc_last;
        float tile[6][16];
        float *rows[6];
        for (int r = 0; r < 6; r++) rows[r] = tile[r];
        nconv_f32_igemm_6x16__generic(mr, nc, kc, ks, a, a_off, zero, w + q * ws, rows, init + q * 16,
                                      flags & NCONV_IGEMM_RELU);
        for (int64_t r = 0; r < mr; r++)
            for (int64_t j = 0; j < nc; j++)
                c[r][q * 16 + j] =
                    flags & NCONV_IGEMM_BF16 ? nconv__f32_to_bf16(tile[r][j]) : nconv__f32_to_f16(tile[r][j]);
    }
}

void nconv_f32_igemm_6x16_rows16__generic(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                          int64_t lda, const float *w, int64_t ws, uint16_t *c, int64_t ldc,
                                          const float *init, int flags) {
    NCONV_IGEMM_ROWS_EACH_TILE(uint16_t, nconv_f32_igemm_6x16_np16__generic(mr_, np, nc_last, kc, 1, ar_, 0, NULL, w,
                                                                             ws, cr_, init, flags));
}
