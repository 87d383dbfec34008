/*
 * The bodies of the packed 6 x 16 GEMM micro-kernels, AVX-512 (contract in
 * ../kernels.h), inlined into each kernel of f32_gemm_6x16.c and into the
 * bf16-narrowing variant built with AVX512-BF16 (../x86_avx512_bf16/): both
 * panels contiguous; per pair of k, two loads of B and twelve FMAs with
 * broadcast operands of A, into the even and odd accumulators of
 * avx512_util.h.
 */
#ifndef NCONV_AVX512_F32_GEMM_6X16_H
#define NCONV_AVX512_F32_GEMM_6X16_H

#include "../kernels.h"
#include "avx512_util.h"

/* A read as a[k * lda + r]; into f32 C, or when to16 16-bit C c16 (from rinit). Inlined into each
 * kernel, where to16 is known, so each keeps one store path. */
static inline __attribute__((always_inline)) void gemm_lda(int64_t mr, int64_t nc, int64_t kc, const float *a,
                                                           int64_t lda, const float *b, float *c, uint16_t *c16,
                                                           int to16, int64_t ldc, const float *rinit, int flags) {
    const __mmask16 m = nconv__avx512_mask(nc);
    __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
    __m512 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
    /* C, when accumulated, is a running sum larger than the caches (Winograd's
     * backward-weights): its lines are requested now and added after the
     * reduction (init + (even + odd), the order of every AVX-512 GEMM kernel). */
    const int acc = !to16 && (flags & NCONV_GEMM_ACCUMULATE);
    if (acc)
        for (int64_t r = 0; r < mr; r++) __builtin_prefetch(c + r * ldc, 1, 3);
    int64_t k = 0;
#pragma GCC unroll 2
    for (; k + 1 < kc; k += 2, a += 2 * lda, b += 32) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        NCONV_AVX512_FMA6(e, b0, a);
        NCONV_AVX512_FMA6(o, b1, a + lda);
    }
    if (k < kc) {
        const __m512 b0 = _mm512_loadu_ps(b);
        NCONV_AVX512_FMA6(e, b0, a);
    }
    e0 = _mm512_add_ps(e0, o0), e1 = _mm512_add_ps(e1, o1), e2 = _mm512_add_ps(e2, o2);
    e3 = _mm512_add_ps(e3, o3), e4 = _mm512_add_ps(e4, o4), e5 = _mm512_add_ps(e5, o5);
    if (acc) { /* masked loads of rows past mr read nothing */
#define ADD_ROW(r) e##r = _mm512_add_ps(e##r, _mm512_maskz_loadu_ps(mr > r ? m : 0, c + (mr > r ? r * ldc : 0)))
        ADD_ROW(0);
        ADD_ROW(1);
        ADD_ROW(2);
        ADD_ROW(3);
        ADD_ROW(4);
        ADD_ROW(5);
#undef ADD_ROW
    } else if (rinit) {
#define ADD_ROW(r) e##r = _mm512_add_ps(e##r, _mm512_set1_ps(rinit[mr > r ? r : 0]))
        ADD_ROW(0);
        ADD_ROW(1);
        ADD_ROW(2);
        ADD_ROW(3);
        ADD_ROW(4);
        ADD_ROW(5);
#undef ADD_ROW
    }
    if (flags & NCONV_GEMM_RELU) { /* max(0, c) returns c when c is NaN: NaN propagates as in torch.relu */
        const __m512 z = _mm512_setzero_ps();
        e0 = _mm512_max_ps(z, e0), e1 = _mm512_max_ps(z, e1), e2 = _mm512_max_ps(z, e2);
        e3 = _mm512_max_ps(z, e3), e4 = _mm512_max_ps(z, e4), e5 = _mm512_max_ps(z, e5);
    }
    if (to16) {
        const int bf16 = flags & NCONV_GEMM_BF16;
        nconv__avx512_store16(c16, nc, e0, bf16);
        if (mr > 1) nconv__avx512_store16(c16 + ldc, nc, e1, bf16);
        if (mr > 2) nconv__avx512_store16(c16 + 2 * ldc, nc, e2, bf16);
        if (mr > 3) nconv__avx512_store16(c16 + 3 * ldc, nc, e3, bf16);
        if (mr > 4) nconv__avx512_store16(c16 + 4 * ldc, nc, e4, bf16);
        if (mr > 5) nconv__avx512_store16(c16 + 5 * ldc, nc, e5, bf16);
        return;
    }
    if (nc == 16 && (flags & NCONV_GEMM_STREAM) && ((uintptr_t)c | (uintptr_t)ldc * sizeof(float)) % 64 == 0) {
        _mm512_stream_ps(c, e0); /* outputs larger than the caches: no read for ownership */
        if (mr > 1) _mm512_stream_ps(c + ldc, e1);
        if (mr > 2) _mm512_stream_ps(c + 2 * ldc, e2);
        if (mr > 3) _mm512_stream_ps(c + 3 * ldc, e3);
        if (mr > 4) _mm512_stream_ps(c + 4 * ldc, e4);
        if (mr > 5) _mm512_stream_ps(c + 5 * ldc, e5);
        return;
    }
    _mm512_mask_storeu_ps(c, m, e0);
    if (mr > 1) _mm512_mask_storeu_ps(c + ldc, m, e1);
    if (mr > 2) _mm512_mask_storeu_ps(c + 2 * ldc, m, e2);
    if (mr > 3) _mm512_mask_storeu_ps(c + 3 * ldc, m, e3);
    if (mr > 4) _mm512_mask_storeu_ps(c + 4 * ldc, m, e4);
    if (mr > 5) _mm512_mask_storeu_ps(c + 5 * ldc, m, e5);
}

/* Two panels at once, each broadcast of A feeding both (as igemm_np); the
 * same sums per panel as the kernel above, bit for bit. Into f32 C, or 16-bit C as gemm_lda. */
static inline __attribute__((always_inline)) void all_panels(int64_t mr, int64_t np, int64_t nc_last, int64_t kc,
                                                             const float *a, int64_t lda, const float *b, int64_t bs,
                                                             float *c, uint16_t *c16, int to16, int64_t ldc,
                                                             const float *rinit, int flags) {
    const int acc = !to16 && (flags & NCONV_GEMM_ACCUMULATE);
    int64_t q = 0;
    for (; q + 1 < np; q += 2) {
        const float *bq = b + q * bs, *br = bq + bs, *ak = a;
        float *cq = to16 ? NULL : c + q * 16;
        const __mmask16 m = nconv__avx512_mask(q + 2 < np ? 16 : nc_last);
        __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
        __m512 f0 = e0, f1 = e0, f2 = e0, f3 = e0, f4 = e0, f5 = e0;
        __m512 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
        __m512 p0 = e0, p1 = e0, p2 = e0, p3 = e0, p4 = e0, p5 = e0;
        if (acc) /* see the kernel above */
            for (int64_t r = 0; r < mr; r++) {
                __builtin_prefetch(cq + r * ldc, 1, 3);
                __builtin_prefetch(cq + r * ldc + 16, 1, 3);
            }
        int64_t k = 0;
        for (; k + 1 < kc; k += 2, ak += 2 * lda, bq += 32, br += 32) {
            const __m512 bq0 = _mm512_loadu_ps(bq), br0 = _mm512_loadu_ps(br);
            const __m512 bq1 = _mm512_loadu_ps(bq + 16), br1 = _mm512_loadu_ps(br + 16);
            /* A comes from L2 (each row tile's weights are read once per call, B stays in L1):
             * its lines are fetched 16 steps ahead */
            _mm_prefetch((const char *)(ak + 16 * lda), _MM_HINT_T0);
            NCONV_AVX512_FMA12(e, f, bq0, br0, ak);
            NCONV_AVX512_FMA12(o, p, bq1, br1, ak + lda);
        }
        if (k < kc) {
            const __m512 bq0 = _mm512_loadu_ps(bq), br0 = _mm512_loadu_ps(br);
            NCONV_AVX512_FMA12(e, f, bq0, br0, ak);
        }
        e0 = _mm512_add_ps(e0, o0), e1 = _mm512_add_ps(e1, o1), e2 = _mm512_add_ps(e2, o2);
        e3 = _mm512_add_ps(e3, o3), e4 = _mm512_add_ps(e4, o4), e5 = _mm512_add_ps(e5, o5);
        f0 = _mm512_add_ps(f0, p0), f1 = _mm512_add_ps(f1, p1), f2 = _mm512_add_ps(f2, p2);
        f3 = _mm512_add_ps(f3, p3), f4 = _mm512_add_ps(f4, p4), f5 = _mm512_add_ps(f5, p5);
        if (acc) { /* masked loads of rows past mr read nothing */
#define ADD_ROW(r)                                                                                         \
    e##r = _mm512_add_ps(e##r, _mm512_maskz_loadu_ps(mr > r ? 0xffff : 0, cq + (mr > r ? r * ldc : 0)));      \
    f##r = _mm512_add_ps(f##r, _mm512_maskz_loadu_ps(mr > r ? m : 0, cq + (mr > r ? r * ldc : 0) + 16))
            ADD_ROW(0);
            ADD_ROW(1);
            ADD_ROW(2);
            ADD_ROW(3);
            ADD_ROW(4);
            ADD_ROW(5);
#undef ADD_ROW
        } else if (rinit) {
#define ADD_ROW(r)                                                     \
    do {                                                               \
        const __m512 i = _mm512_set1_ps(rinit[mr > r ? r : 0]);        \
        e##r = _mm512_add_ps(e##r, i), f##r = _mm512_add_ps(f##r, i); \
    } while (0)
            ADD_ROW(0);
            ADD_ROW(1);
            ADD_ROW(2);
            ADD_ROW(3);
            ADD_ROW(4);
            ADD_ROW(5);
#undef ADD_ROW
        }
        if (flags & NCONV_GEMM_RELU) {
            const __m512 z = _mm512_setzero_ps();
            e0 = _mm512_max_ps(z, e0), e1 = _mm512_max_ps(z, e1), e2 = _mm512_max_ps(z, e2);
            e3 = _mm512_max_ps(z, e3), e4 = _mm512_max_ps(z, e4), e5 = _mm512_max_ps(z, e5);
            f0 = _mm512_max_ps(z, f0), f1 = _mm512_max_ps(z, f1), f2 = _mm512_max_ps(z, f2);
            f3 = _mm512_max_ps(z, f3), f4 = _mm512_max_ps(z, f4), f5 = _mm512_max_ps(z, f5);
        }
        if (to16) {
            const int bf16 = flags & NCONV_GEMM_BF16;
            const int64_t nc = q + 2 < np ? 16 : nc_last;
            uint16_t *hq = c16 + q * 16;
#define STORE16(r)                                                                                        \
    nconv__avx512_store16(hq + r * ldc, 16, e##r, bf16), nconv__avx512_store16(hq + r * ldc + 16, nc, f##r, bf16)
            STORE16(0);
            if (mr > 1) STORE16(1);
            if (mr > 2) STORE16(2);
            if (mr > 3) STORE16(3);
            if (mr > 4) STORE16(4);
            if (mr > 5) STORE16(5);
#undef STORE16
            continue;
        }
        if (m == 0xffff && (flags & NCONV_GEMM_STREAM) && ((uintptr_t)cq | (uintptr_t)ldc * sizeof(float)) % 64 == 0) {
#define STREAM_ROW(r) _mm512_stream_ps(cq + r * ldc, e##r), _mm512_stream_ps(cq + r * ldc + 16, f##r)
            STREAM_ROW(0); /* see gemm_lda */
            if (mr > 1) STREAM_ROW(1);
            if (mr > 2) STREAM_ROW(2);
            if (mr > 3) STREAM_ROW(3);
            if (mr > 4) STREAM_ROW(4);
            if (mr > 5) STREAM_ROW(5);
#undef STREAM_ROW
            continue;
        }
        _mm512_storeu_ps(cq, e0), _mm512_mask_storeu_ps(cq + 16, m, f0);
        if (mr > 1) _mm512_storeu_ps(cq + ldc, e1), _mm512_mask_storeu_ps(cq + ldc + 16, m, f1);
        if (mr > 2) _mm512_storeu_ps(cq + 2 * ldc, e2), _mm512_mask_storeu_ps(cq + 2 * ldc + 16, m, f2);
        if (mr > 3) _mm512_storeu_ps(cq + 3 * ldc, e3), _mm512_mask_storeu_ps(cq + 3 * ldc + 16, m, f3);
        if (mr > 4) _mm512_storeu_ps(cq + 4 * ldc, e4), _mm512_mask_storeu_ps(cq + 4 * ldc + 16, m, f4);
        if (mr > 5) _mm512_storeu_ps(cq + 5 * ldc, e5), _mm512_mask_storeu_ps(cq + 5 * ldc + 16, m, f5);
    }
    if (q < np && to16) gemm_lda(mr, nc_last, kc, a, lda, b + q * bs, NULL, c16 + q * 16, 1, ldc, rinit, flags);
    else if (q < np) gemm_lda(mr, nc_last, kc, a, lda, b + q * bs, c + q * 16, NULL, 0, ldc, rinit, flags);
}

#endif
