/*
 * GEMM with indirect B rows, 6 x 16, AVX-512 (contract in ../kernels.h):
 * backward-weights reads input rows in place through pointers, one per
 * pixel, while the packed A micro-panel holds grad_output transposed. Even
 * and odd k go to separate accumulators (avx512_util.h).
 */
#include "../kernels.h"
#include "avx512_util.h"

/* The reduction with B rows read by LOAD(p) (full or masked). */
#define IB_KLOOP(LOAD)                                                                                    \
    do {                                                                                                  \
        int64_t k = 0;                                                                                    \
        _Pragma("GCC unroll 2") for (; k + 1 < kc; k += 2, a += 2 * lda) {                                \
            const __m512 b0 = LOAD(b[k] + boff), b1 = LOAD(b[k + 1] + boff);                              \
            NCONV_AVX512_FMA6(e, b0, a);                                                              \
            NCONV_AVX512_FMA6(o, b1, a + lda);                                                        \
        }                                                                                                 \
        if (k < kc) {                                                                                     \
            const __m512 b0 = LOAD(b[k] + boff);                                                          \
            NCONV_AVX512_FMA6(e, b0, a);                                                              \
        }                                                                                                 \
    } while (0)

static void ib(int64_t mr, int64_t nc, int64_t kc, const float *a, int64_t lda, const float *const *b, int64_t boff,
               float *c, int64_t ldc, const float *rinit, int accumulate) {
    __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
    __m512 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
    const __mmask16 m = nconv__avx512_mask(nc);
    if (accumulate) /* as in the all-panels kernel below */
        for (int64_t r = 0; r < mr; r++) __builtin_prefetch(c + r * ldc, 1, 3);
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
    NCONV_AVX512_STORE6(e, c, ldc, m, mr, accumulate, rinit);
}

void nconv_f32_gemm_ib_6x16__avx512(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *const *b,
                                    int64_t boff, float *c, int64_t ldc, int accumulate) {
    ib(mr, nc, kc, a, 6, b, boff, c, ldc, NULL, accumulate);
}

/* Two panels at once, each broadcast of A feeding both (as igemm_np); the
 * same sums per panel as the kernel above, bit for bit. The pair's
 * reduction, the second panel's B read by LOAD2(p) (full or masked), the
 * next pair's columns of each B row fetched by FETCH(row). */
#define IB_KLOOP2(LOAD2, FETCH)                                                                           \
    do {                                                                                                  \
        const float *ak = a;                                                                              \
        int64_t k = 0;                                                                                    \
        for (; k + 1 < kc; k += 2, ak += 2 * lda) {                                                       \
            const float *b0 = b[k] + off, *b1 = b[k + 1] + off;                                           \
            FETCH(b0), FETCH(b1);                                                                         \
            const __m512 bq0 = _mm512_loadu_ps(b0), br0 = LOAD2(b0 + bs);                                 \
            const __m512 bq1 = _mm512_loadu_ps(b1), br1 = LOAD2(b1 + bs);                                 \
            NCONV_AVX512_FMA12(e, f, bq0, br0, ak);                                                   \
            NCONV_AVX512_FMA12(o, p, bq1, br1, ak + lda);                                             \
        }                                                                                                 \
        if (k < kc) {                                                                                     \
            const float *b0 = b[k] + off;                                                                 \
            const __m512 bq0 = _mm512_loadu_ps(b0), br0 = LOAD2(b0 + bs);                                 \
            NCONV_AVX512_FMA12(e, f, bq0, br0, ak);                                                   \
        }                                                                                                 \
    } while (0)

void nconv_f32_gemm_ib_6x16_np__avx512(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                       int64_t lda, const float *const *b, int64_t boff, int64_t bs, float *c,
                                       int64_t ldc, const float *rinit, int flags) {
    const int accumulate = flags & NCONV_GEMM_ACCUMULATE;
    int64_t q = 0;
    for (; q + 1 < np; q += 2) {
        const int64_t off = boff + q * bs;
        /* C is a running sum too large for the caches (backward-weights of wide
         * layers): its lines are fetched ahead instead of missed at the end. */
        if (accumulate)
            for (int64_t r = 0; r < mr; r++) {
                __builtin_prefetch(c + r * ldc + q * 16, 1, 3);
                __builtin_prefetch(c + r * ldc + q * 16 + 16, 1, 3);
            }
        const __mmask16 m = nconv__avx512_mask(q + 2 < np ? 16 : nc_last);
        __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
        __m512 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
        __m512 f0 = e0, f1 = e0, f2 = e0, f3 = e0, f4 = e0, f5 = e0;
        __m512 p0 = e0, p1 = e0, p2 = e0, p3 = e0, p4 = e0, p5 = e0;
#define LOAD_FULL(p) _mm512_loadu_ps(p)
#define LOAD_MASKED(p) _mm512_maskz_loadu_ps(m, p)
#define FETCH_NONE(row) (void)(row)
#define FETCH_NEXT(row)                                                                                   \
    _mm_prefetch((const char *)((row) + 2 * bs), _MM_HINT_T0), _mm_prefetch((const char *)((row) + 3 * bs), _MM_HINT_T0)
        if (m != 0xffff)
            IB_KLOOP2(LOAD_MASKED, FETCH_NONE);
        else if (flags & NCONV_GEMM_FETCH_B)
            IB_KLOOP2(LOAD_FULL, FETCH_NEXT);
        else
            IB_KLOOP2(LOAD_FULL, FETCH_NONE);
#undef LOAD_FULL
#undef LOAD_MASKED
#undef FETCH_NONE
#undef FETCH_NEXT
        float *cq = c + q * 16;
        e0 = _mm512_add_ps(e0, o0), e1 = _mm512_add_ps(e1, o1), e2 = _mm512_add_ps(e2, o2);
        e3 = _mm512_add_ps(e3, o3), e4 = _mm512_add_ps(e4, o4), e5 = _mm512_add_ps(e5, o5);
        f0 = _mm512_add_ps(f0, p0), f1 = _mm512_add_ps(f1, p1), f2 = _mm512_add_ps(f2, p2);
        f3 = _mm512_add_ps(f3, p3), f4 = _mm512_add_ps(f4, p4), f5 = _mm512_add_ps(f5, p5);
        NCONV_AVX512_STORE6(e, cq, ldc, 0xffff, mr, accumulate, rinit);
        NCONV_AVX512_STORE6(f, cq + 16, ldc, m, mr, accumulate, rinit);
    }
    if (q < np) ib(mr, nc_last, kc, a, lda, b, boff + q * bs, c + q * 16, ldc, rinit, accumulate);
}
