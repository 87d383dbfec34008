/*
 * Packed f64 GEMM, 6 x 16 tile, AVX-512F (contract in ../kernels.h): per k
 * two loads of B and six broadcasts of A feed twelve FMAs into twelve
 * accumulators, enough independent chains to cover FMA latency on two pipes.
 */
#include "../kernels.h"

#include <immintrin.h>

void nconv_f64_gemm__avx512(int64_t kc, const double *a, const double *b, double *c, int64_t ldc, int accumulate) {
    __m512d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (accumulate) {
        c00 = _mm512_loadu_pd(c), c01 = _mm512_loadu_pd(c + 8);
        c10 = _mm512_loadu_pd(c + ldc), c11 = _mm512_loadu_pd(c + ldc + 8);
        c20 = _mm512_loadu_pd(c + 2 * ldc), c21 = _mm512_loadu_pd(c + 2 * ldc + 8);
        c30 = _mm512_loadu_pd(c + 3 * ldc), c31 = _mm512_loadu_pd(c + 3 * ldc + 8);
        c40 = _mm512_loadu_pd(c + 4 * ldc), c41 = _mm512_loadu_pd(c + 4 * ldc + 8);
        c50 = _mm512_loadu_pd(c + 5 * ldc), c51 = _mm512_loadu_pd(c + 5 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm512_setzero_pd();
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++, a += NCONV_F64_MR, b += 16) {
        const __m512d b0 = _mm512_load_pd(b), b1 = _mm512_load_pd(b + 8);
        __m512d v = _mm512_set1_pd(a[0]);
        c00 = _mm512_fmadd_pd(v, b0, c00), c01 = _mm512_fmadd_pd(v, b1, c01);
        v = _mm512_set1_pd(a[1]);
        c10 = _mm512_fmadd_pd(v, b0, c10), c11 = _mm512_fmadd_pd(v, b1, c11);
        v = _mm512_set1_pd(a[2]);
        c20 = _mm512_fmadd_pd(v, b0, c20), c21 = _mm512_fmadd_pd(v, b1, c21);
        v = _mm512_set1_pd(a[3]);
        c30 = _mm512_fmadd_pd(v, b0, c30), c31 = _mm512_fmadd_pd(v, b1, c31);
        v = _mm512_set1_pd(a[4]);
        c40 = _mm512_fmadd_pd(v, b0, c40), c41 = _mm512_fmadd_pd(v, b1, c41);
        v = _mm512_set1_pd(a[5]);
        c50 = _mm512_fmadd_pd(v, b0, c50), c51 = _mm512_fmadd_pd(v, b1, c51);
    }
    _mm512_storeu_pd(c, c00), _mm512_storeu_pd(c + 8, c01);
    _mm512_storeu_pd(c + ldc, c10), _mm512_storeu_pd(c + ldc + 8, c11);
    _mm512_storeu_pd(c + 2 * ldc, c20), _mm512_storeu_pd(c + 2 * ldc + 8, c21);
    _mm512_storeu_pd(c + 3 * ldc, c30), _mm512_storeu_pd(c + 3 * ldc + 8, c31);
    _mm512_storeu_pd(c + 4 * ldc, c40), _mm512_storeu_pd(c + 4 * ldc + 8, c41);
    _mm512_storeu_pd(c + 5 * ldc, c50), _mm512_storeu_pd(c + 5 * ldc + 8, c51);
}
