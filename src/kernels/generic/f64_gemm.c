/* Packed f64 GEMM, 6 x 8 tile, portable C (contract in ../kernels.h). */
#include "../kernels.h"

enum { NR = 8 };

void nconv_f64_gemm__generic(int64_t kc, const double *a, const double *b, double *c, int64_t ldc, int accumulate) {
    double acc[NCONV_F64_MR][NR];
    for (int r = 0; r < NCONV_F64_MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = accumulate ? c[r * ldc + j] : 0.0;
    for (int64_t k = 0; k < kc; k++, a += NCONV_F64_MR, b += NR)
        for (int r = 0; r < NCONV_F64_MR; r++)
            for (int j = 0; j < NR; j++) acc[r][j] += a[r] * b[j];
    for (int r = 0; r < NCONV_F64_MR; r++)
        for (int j = 0; j < NR; j++) c[r * ldc + j] = acc[r][j];
}
