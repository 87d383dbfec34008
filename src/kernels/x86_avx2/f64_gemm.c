/*
 * Packed f64 GEMM, 6 x 8 tile, AVX2 + FMA (contract in ../kernels.h): per k
 * two loads of B and six broadcasts of A feed twelve FMAs into twelve
 * accumulators, enough independent chains to cover FMA latency on two pipes.
 */
#include "../kernels.h"

#include <immintrin.h>

void nconv_f64_gemm__avx2(int64_t kc, const double *a, const double *b, double *c, int64_t ldc, int accumulate) {
    __m256d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (accumulate) {
        c00 = _mm256_loadu_pd(c), c01 = _mm256_loadu_pd(c + 4);
        c10 = _mm256_loadu_pd(c + ldc), c11 = _mm256_loadu_pd(c + ldc + 4);
        c20 = _mm256_loadu_pd(c + 2 * ldc), c21 = _mm256_loadu_pd(c + 2 * ldc + 4);
        c30 = _mm256_loadu_pd(c + 3 * ldc), c31 = _mm256_loadu_pd(c + 3 * ldc + 4);
        c40 = _mm256_loadu_pd(c + 4 * ldc), c41 = _mm256_loadu_pd(c + 4 * ldc + 4);
        c50 = _mm256_loadu_pd(c + 5 * ldc), c51 = _mm256_loadu_pd(c + 5 * ldc + 4);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_pd();
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++, a += NCONV_F64_MR, b += 8) {
        const __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + 4);
        __m256d v = _mm256_broadcast_sd(a);
        c00 = _mm256_fmadd_pd(v, b0, c00), c01 = _mm256_fmadd_pd(v, b1, c01);
        v = _mm256_broadcast_sd(a + 1);
        c10 = _mm256_fmadd_pd(v, b0, c10), c11 = _mm256_fmadd_pd(v, b1, c11);
        v = _mm256_broadcast_sd(a + 2);
        c20 = _mm256_fmadd_pd(v, b0, c20), c21 = _mm256_fmadd_pd(v, b1, c21);
        v = _mm256_broadcast_sd(a + 3);
        c30 = _mm256_fmadd_pd(v, b0, c30), c31 = _mm256_fmadd_pd(v, b1, c31);
        v = _mm256_broadcast_sd(a + 4);
        c40 = _mm256_fmadd_pd(v, b0, c40), c41 = _mm256_fmadd_pd(v, b1, c41);
        v = _mm256_broadcast_sd(a + 5);
        c50 = _mm256_fmadd_pd(v, b0, c50), c51 = _mm256_fmadd_pd(v, b1, c51);
    }
    _mm256_storeu_pd(c, c00), _mm256_storeu_pd(c + 4, c01);
    _mm256_storeu_pd(c + ldc, c10), _mm256_storeu_pd(c + ldc + 4, c11);
    _mm256_storeu_pd(c + 2 * ldc, c20), _mm256_storeu_pd(c + 2 * ldc + 4, c21);
    _mm256_storeu_pd(c + 3 * ldc, c30), _mm256_storeu_pd(c + 3 * ldc + 4, c31);
    _mm256_storeu_pd(c + 4 * ldc, c40), _mm256_storeu_pd(c + 4 * ldc + 4, c41);
    _mm256_storeu_pd(c + 5 * ldc, c50), _mm256_storeu_pd(c + 5 * ldc + 4, c51);
}
