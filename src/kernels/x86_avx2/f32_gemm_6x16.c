/*
 * Packed GEMM micro-kernel, 6 x 16, AVX2 + FMA (contract in ../kernels.h):
 * both panels contiguous, so per k two aligned loads of B and six
 * broadcasts of A feed twelve FMAs with no address arithmetic besides two
 * pointer bumps. Rows carry their own initial value (a bias per output
 * channel when rows are channels); relu is applied on the way out.
 */
#include "../kernels.h"
#include "avx2_util.h"

/* A read as a[k * lda + r]; into f32 C, or when to16 16-bit C c16 (from rinit). Inlined into each
 * kernel, where to16 is known, so each keeps one store path. */
static inline __attribute__((always_inline)) void gemm_lda(int64_t mr, int64_t nc, int64_t kc, const float *a,
                                                           int64_t lda, const float *b, float *c, uint16_t *c16,
                                                           int to16, int64_t ldc, const float *rinit, int flags) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    const __m256i m0 = nconv__avx2_mask(nc), m1 = nconv__avx2_mask(nc - 8);
    if (!to16 && (flags & NCONV_GEMM_ACCUMULATE)) {
        /* Rows past mr repeat row 0 so the loads stay inside C. */
        float *const r1 = mr > 1 ? c + ldc : c, *const r2 = mr > 2 ? c + 2 * ldc : c;
        float *const r3 = mr > 3 ? c + 3 * ldc : c, *const r4 = mr > 4 ? c + 4 * ldc : c;
        float *const r5 = mr > 5 ? c + 5 * ldc : c;
        c00 = _mm256_maskload_ps(c, m0), c01 = _mm256_maskload_ps(c + 8, m1);
        c10 = _mm256_maskload_ps(r1, m0), c11 = _mm256_maskload_ps(r1 + 8, m1);
        c20 = _mm256_maskload_ps(r2, m0), c21 = _mm256_maskload_ps(r2 + 8, m1);
        c30 = _mm256_maskload_ps(r3, m0), c31 = _mm256_maskload_ps(r3 + 8, m1);
        c40 = _mm256_maskload_ps(r4, m0), c41 = _mm256_maskload_ps(r4 + 8, m1);
        c50 = _mm256_maskload_ps(r5, m0), c51 = _mm256_maskload_ps(r5 + 8, m1);
    } else if (rinit) {
        const float *const i1 = mr > 1 ? rinit + 1 : rinit, *const i2 = mr > 2 ? rinit + 2 : rinit;
        const float *const i3 = mr > 3 ? rinit + 3 : rinit, *const i4 = mr > 4 ? rinit + 4 : rinit;
        const float *const i5 = mr > 5 ? rinit + 5 : rinit;
        c00 = c01 = _mm256_broadcast_ss(rinit), c10 = c11 = _mm256_broadcast_ss(i1);
        c20 = c21 = _mm256_broadcast_ss(i2), c30 = c31 = _mm256_broadcast_ss(i3);
        c40 = c41 = _mm256_broadcast_ss(i4), c50 = c51 = _mm256_broadcast_ss(i5);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++, a += lda, b += 16) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        __m256 v = _mm256_broadcast_ss(a);
        c00 = _mm256_fmadd_ps(v, b0, c00), c01 = _mm256_fmadd_ps(v, b1, c01);
        v = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(v, b0, c10), c11 = _mm256_fmadd_ps(v, b1, c11);
        v = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(v, b0, c20), c21 = _mm256_fmadd_ps(v, b1, c21);
        v = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(v, b0, c30), c31 = _mm256_fmadd_ps(v, b1, c31);
        v = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(v, b0, c40), c41 = _mm256_fmadd_ps(v, b1, c41);
        v = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(v, b0, c50), c51 = _mm256_fmadd_ps(v, b1, c51);
    }
    if (flags & NCONV_GEMM_RELU) { /* max(0, c) returns c when c is NaN: NaN propagates as in torch.relu */
        const __m256 z = _mm256_setzero_ps();
        c00 = _mm256_max_ps(z, c00), c01 = _mm256_max_ps(z, c01), c10 = _mm256_max_ps(z, c10);
        c11 = _mm256_max_ps(z, c11), c20 = _mm256_max_ps(z, c20), c21 = _mm256_max_ps(z, c21);
        c30 = _mm256_max_ps(z, c30), c31 = _mm256_max_ps(z, c31), c40 = _mm256_max_ps(z, c40);
        c41 = _mm256_max_ps(z, c41), c50 = _mm256_max_ps(z, c50), c51 = _mm256_max_ps(z, c51);
    }
    if (to16) {
        const int bf16 = flags & NCONV_GEMM_BF16;
        nconv__avx2_store16(c16, nc, c00, c01, bf16);
        if (mr > 1) nconv__avx2_store16(c16 + ldc, nc, c10, c11, bf16);
        if (mr > 2) nconv__avx2_store16(c16 + 2 * ldc, nc, c20, c21, bf16);
        if (mr > 3) nconv__avx2_store16(c16 + 3 * ldc, nc, c30, c31, bf16);
        if (mr > 4) nconv__avx2_store16(c16 + 4 * ldc, nc, c40, c41, bf16);
        if (mr > 5) nconv__avx2_store16(c16 + 5 * ldc, nc, c50, c51, bf16);
    } else if (nc == 16) {
        _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
        if (mr > 1) _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
        if (mr > 2) _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
        if (mr > 3) _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
        if (mr > 4) _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
        if (mr > 5) _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
    } else {
        _mm256_maskstore_ps(c, m0, c00), _mm256_maskstore_ps(c + 8, m1, c01);
        if (mr > 1) _mm256_maskstore_ps(c + ldc, m0, c10), _mm256_maskstore_ps(c + ldc + 8, m1, c11);
        if (mr > 2) _mm256_maskstore_ps(c + 2 * ldc, m0, c20), _mm256_maskstore_ps(c + 2 * ldc + 8, m1, c21);
        if (mr > 3) _mm256_maskstore_ps(c + 3 * ldc, m0, c30), _mm256_maskstore_ps(c + 3 * ldc + 8, m1, c31);
        if (mr > 4) _mm256_maskstore_ps(c + 4 * ldc, m0, c40), _mm256_maskstore_ps(c + 4 * ldc + 8, m1, c41);
        if (mr > 5) _mm256_maskstore_ps(c + 5 * ldc, m0, c50), _mm256_maskstore_ps(c + 5 * ldc + 8, m1, c51);
    }
}

void nconv_f32_gemm_6x16__avx2(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *b, float *c,
                               int64_t ldc, const float *rinit, int flags) {
    gemm_lda(mr, nc, kc, a, 6, b, c, NULL, 0, ldc, rinit, flags);
}

void nconv_f32_gemm_6x16_np__avx2(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a, int64_t lda,
                                  const float *b, int64_t bs, float *c, int64_t ldc, const float *rinit, int flags) {
    for (int64_t q = 0; q < np; q++)
        gemm_lda(mr, q + 1 < np ? 16 : nc_last, kc, a, lda, b + q * bs, c + q * 16, NULL, 0, ldc, rinit, flags);
}

void nconv_f32_gemm_6x16_np16__avx2(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                    int64_t lda, const float *b, int64_t bs, uint16_t *c, int64_t ldc,
                                    const float *rinit, int flags) {
    for (int64_t q = 0; q < np; q++)
        gemm_lda(mr, q + 1 < np ? 16 : nc_last, kc, a, lda, b + q * bs, NULL, c + q * 16, 1, ldc, rinit, flags);
}
