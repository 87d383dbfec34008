/*
 * Portable f32 GEMM: four rows of C at a time, the column loop innermost so
 * the compiler vectorises it for whatever ISA the build targets. Columns are
 * processed in blocks that keep four C rows and one B row in L1.
 */
#include "../kernels.h"

#include <string.h>

enum { NB = 256 };

void nconv_f32_gemm__generic(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                             const float *B, int64_t ldb, float *C, int64_t ldc, int accumulate) {
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
        const int64_t nb = N - j0 < NB ? N - j0 : NB;
        int64_t i = 0;
        for (; i + 4 <= M; i += 4) {
            float *restrict c0 = C + i * ldc + j0, *restrict c1 = c0 + ldc, *restrict c2 = c1 + ldc,
                            *restrict c3 = c2 + ldc;
            if (!accumulate) {
                memset(c0, 0, sizeof(float) * (size_t)nb);
                memset(c1, 0, sizeof(float) * (size_t)nb);
                memset(c2, 0, sizeof(float) * (size_t)nb);
                memset(c3, 0, sizeof(float) * (size_t)nb);
            }
            const float *a = A + i * rsa;
            for (int64_t p = 0; p < K; p++) {
                const float a0 = a[p * csa], a1 = a[rsa + p * csa], a2 = a[2 * rsa + p * csa],
                            a3 = a[3 * rsa + p * csa];
                const float *restrict b = B + p * ldb + j0;
                for (int64_t j = 0; j < nb; j++) {
                    const float bj = b[j];
                    c0[j] += a0 * bj;
                    c1[j] += a1 * bj;
                    c2[j] += a2 * bj;
                    c3[j] += a3 * bj;
                }
            }
        }
        for (; i < M; i++) {
            float *restrict c0 = C + i * ldc + j0;
            if (!accumulate) memset(c0, 0, sizeof(float) * (size_t)nb);
            for (int64_t p = 0; p < K; p++) {
                const float a0 = A[i * rsa + p * csa];
                const float *restrict b = B + p * ldb + j0;
                for (int64_t j = 0; j < nb; j++) c0[j] += a0 * b[j];
            }
        }
    }
}
