/*
 * Indirect GEMM on bf16 operands, 6 rows x 16 columns per panel, AVX512-BF16 (contract in
 * ../kernels.h): per pair of k, one load of each panel's packed pairs, a broadcast of each
 * row's pair and two VDPBF16PS per row (two panels share the broadcast), into twelve f32
 * accumulators: twice the products of the f32 kernels' FMAs per instruction.
 */
#include "../kernels.h"
#include "../x86_avx512/avx512_util.h"

#include <string.h>

/* The pair (k, k + 1) of a bf16 row in every 32-bit lane. */
static inline __m512bh pair_of(const uint16_t *row, int64_t k) {
    int32_t v;
    memcpy(&v, row + k, sizeof v);
    return (__m512bh)_mm512_set1_epi32(v);
}

static inline __m512bh load_pairs(const uint16_t *w) { return (__m512bh)_mm512_loadu_si512(w); }

#define DOT_ROW(r)                                                                                        \
    do {                                                                                                  \
        const __m512bh v_ = pair_of(a##r, k);                                                             \
        e##r = _mm512_dpbf16_ps(e##r, v_, bq);                                                            \
        if (two) f##r = _mm512_dpbf16_ps(f##r, v_, br);                                                   \
    } while (0)

/* Row r of panel acc into c or c16 at column o, its first nc columns. */
#define STORE_ROW(acc, r, o, nc)                                                                          \
    do {                                                                                                  \
        if (mr > r) {                                                                                     \
            if (c16) nconv__avx512_store16(c16[r] + (o), nc, acc##r, 1);                                  \
            else _mm512_mask_storeu_ps(c[r] + (o), nconv__avx512_mask(nc), acc##r);                       \
        }                                                                                                 \
    } while (0)

/* Panels q and, when two, q + 1 (compile-time in each call below). */
static inline __attribute__((always_inline)) void panels(int64_t mr, int64_t q, int64_t nc_q, int64_t nc_r,
                                                         int64_t kc, int64_t ks, const uint16_t *const *a,
                                                         int64_t a_off, const uint16_t *zero, const uint16_t *w,
                                                         int64_t ws, float *const *c, uint16_t *const *c16,
                                                         const float *init, int flags, int two) {
    __m512 e0, e1, e2, e3, e4, e5, f0, f1, f2, f3, f4, f5;
    f0 = f1 = f2 = f3 = f4 = f5 = _mm512_setzero_ps();
    if (init) {
        e0 = e1 = e2 = e3 = e4 = e5 = _mm512_loadu_ps(init + q * 16);
        if (two) f0 = f1 = f2 = f3 = f4 = f5 = _mm512_loadu_ps(init + q * 16 + 16);
    } else { /* from C; masked loads of rows past mr read nothing */
        const __mmask16 mq = nconv__avx512_mask(nc_q), mrr = nconv__avx512_mask(nc_r);
#define LOAD_ROW(r)                                                                                       \
    e##r = _mm512_maskz_loadu_ps(mr > r ? mq : 0, c[mr > r ? r : 0] + q * 16);                             \
    if (two) f##r = _mm512_maskz_loadu_ps(mr > r ? mrr : 0, c[mr > r ? r : 0] + q * 16 + 16)
        LOAD_ROW(0);
        LOAD_ROW(1);
        LOAD_ROW(2);
        LOAD_ROW(3);
        LOAD_ROW(4);
        LOAD_ROW(5);
#undef LOAD_ROW
    }
    const uint16_t *wq = w + q * ws, *wr = wq + ws;
    for (int64_t t = 0; t < ks; t++, a += 6) {
        NCONV_IGEMM_ROWS_OF(uint16_t, a)
        for (int64_t k = 0; k < kc; k += 2, wq += 32, wr += 32) {
            const __m512bh bq = load_pairs(wq), br = two ? load_pairs(wr) : bq;
            DOT_ROW(0);
            DOT_ROW(1);
            DOT_ROW(2);
            DOT_ROW(3);
            DOT_ROW(4);
            DOT_ROW(5);
        }
    }
    if (flags & NCONV_IGEMM_RELU) { /* max(0, c) keeps NaN, as torch.relu */
        const __m512 z = _mm512_setzero_ps();
        e0 = _mm512_max_ps(z, e0), e1 = _mm512_max_ps(z, e1), e2 = _mm512_max_ps(z, e2);
        e3 = _mm512_max_ps(z, e3), e4 = _mm512_max_ps(z, e4), e5 = _mm512_max_ps(z, e5);
        f0 = _mm512_max_ps(z, f0), f1 = _mm512_max_ps(z, f1), f2 = _mm512_max_ps(z, f2);
        f3 = _mm512_max_ps(z, f3), f4 = _mm512_max_ps(z, f4), f5 = _mm512_max_ps(z, f5);
    }
    STORE_ROW(e, 0, q * 16, nc_q);
    STORE_ROW(e, 1, q * 16, nc_q);
    STORE_ROW(e, 2, q * 16, nc_q);
    STORE_ROW(e, 3, q * 16, nc_q);
    STORE_ROW(e, 4, q * 16, nc_q);
    STORE_ROW(e, 5, q * 16, nc_q);
    if (!two) return;
    STORE_ROW(f, 0, q * 16 + 16, nc_r);
    STORE_ROW(f, 1, q * 16 + 16, nc_r);
    STORE_ROW(f, 2, q * 16 + 16, nc_r);
    STORE_ROW(f, 3, q * 16 + 16, nc_r);
    STORE_ROW(f, 4, q * 16 + 16, nc_r);
    STORE_ROW(f, 5, q * 16 + 16, nc_r);
}

void nconv_bf16_igemm_6x16_np__avx512_bf16(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                           const uint16_t *const *a, int64_t a_off, const uint16_t *zero,
                                           const uint16_t *w, int64_t ws, float *const *c, uint16_t *const *c16,
                                           const float *init, int flags) {
    int64_t q = 0;
    for (; q + 1 < np; q += 2)
        panels(mr, q, 16, q + 2 < np ? 16 : nc_last, kc, ks, a, a_off, zero, w, ws, c, c16, init, flags, 1);
    if (q < np) panels(mr, q, nc_last, 0, kc, ks, a, a_off, zero, w, ws, c, c16, init, flags, 0);
}
