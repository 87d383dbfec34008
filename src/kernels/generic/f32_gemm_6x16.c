/* Packed GEMM, 6 x 16, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_gemm_6x16__generic(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *b, float *c,
                                  int64_t ldc, const float *rinit, int flags) {
    float acc[6][16];
    for (int64_t r = 0; r < 6; r++)
        for (int64_t j = 0; j < 16; j++)
            acc[r][j] = (flags & NCONV_GEMM_ACCUMULATE) ? (r < mr && j < nc ? c[r * ldc + j] : 0.0f)
                        : rinit && r < mr                ? rinit[r]
                                                         : 0.0f;
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16)
        for (int64_t r = 0; r < 6; r++)
            for (int64_t j = 0; j < 16; j++) acc[r][j] += a[r] * b[j];
    for (int64_t r = 0; r < mr; r++)
        for (int64_t j = 0; j < nc; j++) {
            const float v = acc[r][j];
            c[r * ldc + j] = (flags & NCONV_GEMM_RELU) && v < 0 ? 0.0f : v; /* NaN stays NaN */
        }
}
