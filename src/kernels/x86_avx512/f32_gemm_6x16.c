/*
 * Packed GEMM micro-kernel, 6 x 16, AVX-512 (contract in ../kernels.h):
 * both panels contiguous; per pair of k, two loads of B and twelve FMAs
 * with broadcast operands of A, into the even and odd accumulators of
 * avx512_util.h.
 */
#include "../kernels.h"
#include "avx512_util.h"

#define FMA6(acc, b, ak)                                                                                  \
    acc##0 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[0]), b, acc##0);                                         \
    acc##1 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[1]), b, acc##1);                                         \
    acc##2 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[2]), b, acc##2);                                         \
    acc##3 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[3]), b, acc##3);                                         \
    acc##4 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[4]), b, acc##4);                                         \
    acc##5 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[5]), b, acc##5)

void nconv_f32_gemm_6x16__avx512(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *b, float *c,
                                 int64_t ldc, const float *rinit, int flags) {
    const __mmask16 m = nconv__avx512_mask(nc);
    __m512 e0, e1, e2, e3, e4, e5, o0, o1, o2, o3, o4, o5;
    o0 = o1 = o2 = o3 = o4 = o5 = _mm512_setzero_ps();
    if (flags & NCONV_GEMM_ACCUMULATE) { /* masked loads of rows past mr read nothing */
        e0 = _mm512_maskz_loadu_ps(m, c);
        e1 = _mm512_maskz_loadu_ps(mr > 1 ? m : 0, c + (mr > 1 ? ldc : 0));
        e2 = _mm512_maskz_loadu_ps(mr > 2 ? m : 0, c + (mr > 2 ? 2 * ldc : 0));
        e3 = _mm512_maskz_loadu_ps(mr > 3 ? m : 0, c + (mr > 3 ? 3 * ldc : 0));
        e4 = _mm512_maskz_loadu_ps(mr > 4 ? m : 0, c + (mr > 4 ? 4 * ldc : 0));
        e5 = _mm512_maskz_loadu_ps(mr > 5 ? m : 0, c + (mr > 5 ? 5 * ldc : 0));
    } else if (rinit) {
        e0 = _mm512_set1_ps(rinit[0]);
        e1 = _mm512_set1_ps(rinit[mr > 1 ? 1 : 0]), e2 = _mm512_set1_ps(rinit[mr > 2 ? 2 : 0]);
        e3 = _mm512_set1_ps(rinit[mr > 3 ? 3 : 0]), e4 = _mm512_set1_ps(rinit[mr > 4 ? 4 : 0]);
        e5 = _mm512_set1_ps(rinit[mr > 5 ? 5 : 0]);
    } else {
        e0 = e1 = e2 = e3 = e4 = e5 = _mm512_setzero_ps();
    }
    int64_t k = 0;
#pragma GCC unroll 2
    for (; k + 1 < kc; k += 2, a += 12, b += 32) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        FMA6(e, b0, a);
        FMA6(o, b1, a + 6);
    }
    if (k < kc) {
        const __m512 b0 = _mm512_loadu_ps(b);
        FMA6(e, b0, a);
    }
    e0 = _mm512_add_ps(e0, o0), e1 = _mm512_add_ps(e1, o1), e2 = _mm512_add_ps(e2, o2);
    e3 = _mm512_add_ps(e3, o3), e4 = _mm512_add_ps(e4, o4), e5 = _mm512_add_ps(e5, o5);
    if (flags & NCONV_GEMM_RELU) { /* max(0, c) returns c when c is NaN: NaN propagates as in torch.relu */
        const __m512 z = _mm512_setzero_ps();
        e0 = _mm512_max_ps(z, e0), e1 = _mm512_max_ps(z, e1), e2 = _mm512_max_ps(z, e2);
        e3 = _mm512_max_ps(z, e3), e4 = _mm512_max_ps(z, e4), e5 = _mm512_max_ps(z, e5);
    }
    _mm512_mask_storeu_ps(c, m, e0);
    if (mr > 1) _mm512_mask_storeu_ps(c + ldc, m, e1);
    if (mr > 2) _mm512_mask_storeu_ps(c + 2 * ldc, m, e2);
    if (mr > 3) _mm512_mask_storeu_ps(c + 3 * ldc, m, e3);
    if (mr > 4) _mm512_mask_storeu_ps(c + 4 * ldc, m, e4);
    if (mr > 5) _mm512_mask_storeu_ps(c + 5 * ldc, m, e5);
}
