/*
 * GEMM with indirect B rows, 6 x 16, AVX-512 (contract in ../kernels.h):
 * backward-weights reads input rows in place through pointers, one per
 * pixel, while the packed A micro-panel holds grad_output transposed. Even
 * and odd k go to separate accumulators (avx512_util.h).
 */
#include "../kernels.h"
#include "avx512_util.h"

#define FMA6(acc, bv, ak)                                                                                 \
    acc##0 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[0]), bv, acc##0);                                        \
    acc##1 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[1]), bv, acc##1);                                        \
    acc##2 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[2]), bv, acc##2);                                        \
    acc##3 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[3]), bv, acc##3);                                        \
    acc##4 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[4]), bv, acc##4);                                        \
    acc##5 = _mm512_fmadd_ps(_mm512_set1_ps((ak)[5]), bv, acc##5)

/* The reduction with B rows read by LOAD(p) (full or masked). */
#define IB_KLOOP(LOAD)                                                                                    \
    do {                                                                                                  \
        int64_t k = 0;                                                                                    \
        _Pragma("GCC unroll 2") for (; k + 1 < kc; k += 2, a += 12) {                                     \
            const __m512 b0 = LOAD(b[k] + boff), b1 = LOAD(b[k + 1] + boff);                              \
            FMA6(e, b0, a);                                                                               \
            FMA6(o, b1, a + 6);                                                                           \
        }                                                                                                 \
        if (k < kc) {                                                                                     \
            const __m512 b0 = LOAD(b[k] + boff);                                                          \
            FMA6(e, b0, a);                                                                               \
        }                                                                                                 \
    } while (0)

static inline void store_row(float *cr, __mmask16 m, __m512 v, int accumulate) {
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cr));
    _mm512_mask_storeu_ps(cr, m, v);
}

void nconv_f32_gemm_ib_6x16__avx512(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *const *b,
                                    int64_t boff, float *c, int64_t ldc, int accumulate) {
    __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
    __m512 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
    const __mmask16 m = nconv__avx512_mask(nc);
#define LOAD_FULL(p) _mm512_loadu_ps(p)
#define LOAD_MASKED(p) _mm512_maskz_loadu_ps(m, p)
    if (nc == 16)
        IB_KLOOP(LOAD_FULL);
    else
        IB_KLOOP(LOAD_MASKED);
#undef LOAD_FULL
#undef LOAD_MASKED
    e0 = _mm512_add_ps(e0, o0), e1 = _mm512_add_ps(e1, o1), e2 = _mm512_add_ps(e2, o2);
    e3 = _mm512_add_ps(e3, o3), e4 = _mm512_add_ps(e4, o4), e5 = _mm512_add_ps(e5, o5);
    store_row(c, m, e0, accumulate);
    if (mr > 1) store_row(c + ldc, m, e1, accumulate);
    if (mr > 2) store_row(c + 2 * ldc, m, e2, accumulate);
    if (mr > 3) store_row(c + 3 * ldc, m, e3, accumulate);
    if (mr > 4) store_row(c + 4 * ldc, m, e4, accumulate);
    if (mr > 5) store_row(c + 5 * ldc, m, e5, accumulate);
}
