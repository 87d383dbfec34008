/* Micro-kernel declarations (the framework in src/algo/ calls these). */
#ifndef NCONV_KERNELS_H
#define NCONV_KERNELS_H

#include <stdint.h>

/* C[M x N] = A[M x K] * B[K x N] (+ C when accumulate). A is read through
 * element strides (rsa, csa), so a transposed A costs nothing; B and C are
 * row-major with leading dimensions ldb and ldc. With accumulate == 0, C is
 * never read (it may hold NaN). */
void nconv_f32_gemm__generic(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                             const float *B, int64_t ldb, float *C, int64_t ldc, int accumulate);

#endif
