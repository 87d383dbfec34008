/* Micro-kernel sweep: the generic f32 GEMM against a plain triple loop, with
 * M, N, K over 1, 2, primes and block edges, strided and transposed A,
 * accumulate on and off (off: C starts as NaN and must not be read). */
#include "test_util.h"

#include "../src/kernels/kernels.h"

int main(void) {
    const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 13, 255, 256, 257, 300};
    uint64_t rng = 5;
    for (size_t mi = 0; mi < 11; mi++)
        for (size_t ni = 0; ni < 11; ni += 2)
            for (size_t ki = 0; ki < 11; ki += 3)
                for (int trans = 0; trans < 2; trans++)
                    for (int acc = 0; acc < 2; acc++) {
                        const int64_t M = sizes[mi] > 64 ? sizes[mi] / 8 : sizes[mi], N = sizes[ni], K = sizes[ki];
                        const int64_t ldb = N + 3, ldc = N + 5;
                        float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * ldb));
                        float *C = malloc(sizeof(float) * (size_t)(M * ldc));
                        double *R = malloc(sizeof(double) * (size_t)(M * N));
                        for (int64_t i = 0; i < M * K; i++) A[i] = (float)test_uniform(&rng);
                        for (int64_t i = 0; i < K * ldb; i++) B[i] = (float)test_uniform(&rng);
                        const int64_t rsa = trans ? 1 : K, csa = trans ? M : 1;
                        for (int64_t i = 0; i < M; i++)
                            for (int64_t j = 0; j < N; j++) {
                                double init = acc ? 0.25 * (double)(i - j) : 0;
                                C[i * ldc + j] = acc ? (float)init : NAN;
                                double s = init;
                                for (int64_t p = 0; p < K; p++) s += (double)A[i * rsa + p * csa] * B[p * ldb + j];
                                R[i * N + j] = s;
                            }
                        nconv_f32_gemm__generic(M, N, K, A, rsa, csa, B, ldb, C, ldc, acc);
                        double worst = 0;
                        for (int64_t i = 0; i < M; i++)
                            for (int64_t j = 0; j < N; j++) {
                                double e = fabs(C[i * ldc + j] - R[i * N + j]) / (1 + fabs(R[i * N + j]));
                                if (!(e <= worst)) worst = e;
                            }
                        CHECK(worst <= 1e-5 * (double)(K > 16 ? K : 16) / 16, "M %lld N %lld K %lld trans %d acc %d: err %g",
                              (long long)M, (long long)N, (long long)K, trans, acc, worst);
                        free(A), free(B), free(C), free(R);
                    }
    return test_summary();
}
