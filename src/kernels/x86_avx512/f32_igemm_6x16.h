/*
 * The bodies of the 6 x 16 indirect GEMM micro-kernels, AVX-512 (contract in
 * ../kernels.h), inlined into each kernel of f32_igemm_6x16.c and into the
 * bf16-narrowing variant built with AVX512-BF16 (../x86_avx512_bf16/). Per
 * pair of k: two loads of the packed weights and twelve FMAs with broadcast
 * operands, into the even and odd accumulators of avx512_util.h.
 */
#ifndef NCONV_AVX512_F32_IGEMM_6X16_H
#define NCONV_AVX512_F32_IGEMM_6X16_H

#include "../kernels.h"
#include "../x86_avx2/avx2_util.h"
#include "avx512_util.h"

/* The accumulators: e (even k) and o (odd k) of rows 0-5. */
#define ACC_DECL __m512 e0, e1, e2, e3, e4, e5, o0, o1, o2, o3, o4, o5

#define FMA6(acc, b, k)                                                                                   \
    acc##0 = _mm512_fmadd_ps(_mm512_set1_ps(a0[k]), b, acc##0);                                           \
    acc##1 = _mm512_fmadd_ps(_mm512_set1_ps(a1[k]), b, acc##1);                                           \
    acc##2 = _mm512_fmadd_ps(_mm512_set1_ps(a2[k]), b, acc##2);                                           \
    acc##3 = _mm512_fmadd_ps(_mm512_set1_ps(a3[k]), b, acc##3);                                           \
    acc##4 = _mm512_fmadd_ps(_mm512_set1_ps(a4[k]), b, acc##4);                                           \
    acc##5 = _mm512_fmadd_ps(_mm512_set1_ps(a5[k]), b, acc##5)

/* kc steps of the reduction from the rows a0 .. a5 and the packed weights w. */
#define IGEMM_KLOOP()                                                                                     \
    do {                                                                                                  \
        int64_t k = 0;                                                                                    \
        _Pragma("GCC unroll 2") for (; k + 1 < kc; k += 2, w += 32) {                                     \
            const __m512 b0 = _mm512_loadu_ps(w), b1 = _mm512_loadu_ps(w + 16);                           \
            FMA6(e, b0, k);                                                                               \
            FMA6(o, b1, k + 1);                                                                           \
        }                                                                                                 \
        if (k < kc) {                                                                                     \
            const __m512 b0 = _mm512_loadu_ps(w);                                                         \
            FMA6(e, b0, k);                                                                               \
            w += 16;                                                                                      \
        }                                                                                                 \
    } while (0)

#define IGEMM_REDUCE()                         \
    for (int64_t t = 0; t < ks; t++, a += 6) { \
        NCONV_IGEMM_ROWS(a)                    \
        IGEMM_KLOOP();                         \
    }

/* Odd into even, then relu (max(0, c) keeps NaN, as torch.relu). */
#define IGEMM_FINISH()                                                                                    \
    do {                                                                                                  \
        e0 = _mm512_add_ps(e0, o0), e1 = _mm512_add_ps(e1, o1), e2 = _mm512_add_ps(e2, o2);              \
        e3 = _mm512_add_ps(e3, o3), e4 = _mm512_add_ps(e4, o4), e5 = _mm512_add_ps(e5, o5);              \
        if (flags & NCONV_IGEMM_RELU) {                                                                   \
            const __m512 z = _mm512_setzero_ps();                                                         \
            e0 = _mm512_max_ps(z, e0), e1 = _mm512_max_ps(z, e1), e2 = _mm512_max_ps(z, e2);              \
            e3 = _mm512_max_ps(z, e3), e4 = _mm512_max_ps(z, e4), e5 = _mm512_max_ps(z, e5);              \
        }                                                                                                 \
    } while (0)

/* Non-temporal stores in 32-byte halves: rows are only promised 32-byte alignment. */
static inline void stream_row(float *p, __m512 v) {
    _mm256_stream_ps(p, nconv__avx512_lo(v));
    _mm256_stream_ps(p + 8, nconv__avx512_hi(v));
}

/* Rows r < mr, columns o + j (j < nc) of the tile into the c rows. */
static inline void store_tile(float *const *c, int64_t o, int64_t mr, int64_t nc, int flags, __m512 e0, __m512 e1,
                              __m512 e2, __m512 e3, __m512 e4, __m512 e5) {
    if (nc == 16 && (flags & NCONV_IGEMM_STREAM)) { /* outputs of megabytes: no read for ownership */
        stream_row(c[0] + o, e0);
        if (mr > 1) stream_row(c[1] + o, e1);
        if (mr > 2) stream_row(c[2] + o, e2);
        if (mr > 3) stream_row(c[3] + o, e3);
        if (mr > 4) stream_row(c[4] + o, e4);
        if (mr > 5) stream_row(c[5] + o, e5);
        return;
    }
    const __mmask16 m = nconv__avx512_mask(nc);
    _mm512_mask_storeu_ps(c[0] + o, m, e0);
    if (mr > 1) _mm512_mask_storeu_ps(c[1] + o, m, e1);
    if (mr > 2) _mm512_mask_storeu_ps(c[2] + o, m, e2);
    if (mr > 3) _mm512_mask_storeu_ps(c[3] + o, m, e3);
    if (mr > 4) _mm512_mask_storeu_ps(c[4] + o, m, e4);
    if (mr > 5) _mm512_mask_storeu_ps(c[5] + o, m, e5);
}

/* store_tile into 16-bit rows (np16). */
static inline void store_tile16(uint16_t *const *c, int64_t o, int64_t mr, int64_t nc, int flags, __m512 e0,
                                __m512 e1, __m512 e2, __m512 e3, __m512 e4, __m512 e5) {
    nconv__avx512_store16(c[0] + o, nc, e0, flags & NCONV_IGEMM_BF16);
    if (mr > 1) nconv__avx512_store16(c[1] + o, nc, e1, flags & NCONV_IGEMM_BF16);
    if (mr > 2) nconv__avx512_store16(c[2] + o, nc, e2, flags & NCONV_IGEMM_BF16);
    if (mr > 3) nconv__avx512_store16(c[3] + o, nc, e3, flags & NCONV_IGEMM_BF16);
    if (mr > 4) nconv__avx512_store16(c[4] + o, nc, e4, flags & NCONV_IGEMM_BF16);
    if (mr > 5) nconv__avx512_store16(c[5] + o, nc, e5, flags & NCONV_IGEMM_BF16);
}

/* One panel into f32 rows c or, when to16, 16-bit rows c16 (then init is set). Inlined
 * into each kernel, where to16 is known, so each keeps one store path. */
static inline __attribute__((always_inline)) void one_panel(int64_t mr, int64_t nc, int64_t kc, int64_t ks,
                                                            const float *const *a, int64_t a_off, const float *zero,
                                                            const float *w, float *const *c, uint16_t *const *c16,
                                                            int to16, const float *init, int flags) {
    ACC_DECL;
    o0 = o1 = o2 = o3 = o4 = o5 = _mm512_setzero_ps();
    if (to16 || init) { /* np16 always starts from init */
        e0 = e1 = e2 = e3 = e4 = e5 = _mm512_loadu_ps(init);
    } else { /* accumulate onto C; masked loads of rows past mr read nothing */
        const __mmask16 m = nconv__avx512_mask(nc);
        e0 = _mm512_maskz_loadu_ps(m, c[0]);
        e1 = _mm512_maskz_loadu_ps(mr > 1 ? m : 0, c[mr > 1 ? 1 : 0]);
        e2 = _mm512_maskz_loadu_ps(mr > 2 ? m : 0, c[mr > 2 ? 2 : 0]);
        e3 = _mm512_maskz_loadu_ps(mr > 3 ? m : 0, c[mr > 3 ? 3 : 0]);
        e4 = _mm512_maskz_loadu_ps(mr > 4 ? m : 0, c[mr > 4 ? 4 : 0]);
        e5 = _mm512_maskz_loadu_ps(mr > 5 ? m : 0, c[mr > 5 ? 5 : 0]);
    }
    IGEMM_REDUCE();
    IGEMM_FINISH();
    if (to16) store_tile16(c16, 0, mr, nc, flags, e0, e1, e2, e3, e4, e5);
    else store_tile(c, 0, mr, nc, flags, e0, e1, e2, e3, e4, e5);
}


/* Two column panels at once: each broadcast of A feeds both, so loads per FMA
 * drop from 7/6 to 2/3 (one panel is bound by loads).
 * The same sums per panel as the one-panel kernel, bit for bit. */
#define FMA12(e, f, bq, br, k)                                                                            \
    do {                                                                                                  \
        __m512 v = _mm512_set1_ps(a0[k]);                                                                 \
        e##0 = _mm512_fmadd_ps(v, bq, e##0), f##0 = _mm512_fmadd_ps(v, br, f##0);                         \
        v = _mm512_set1_ps(a1[k]);                                                                        \
        e##1 = _mm512_fmadd_ps(v, bq, e##1), f##1 = _mm512_fmadd_ps(v, br, f##1);                         \
        v = _mm512_set1_ps(a2[k]);                                                                        \
        e##2 = _mm512_fmadd_ps(v, bq, e##2), f##2 = _mm512_fmadd_ps(v, br, f##2);                         \
        v = _mm512_set1_ps(a3[k]);                                                                        \
        e##3 = _mm512_fmadd_ps(v, bq, e##3), f##3 = _mm512_fmadd_ps(v, br, f##3);                         \
        v = _mm512_set1_ps(a4[k]);                                                                        \
        e##4 = _mm512_fmadd_ps(v, bq, e##4), f##4 = _mm512_fmadd_ps(v, br, f##4);                         \
        v = _mm512_set1_ps(a5[k]);                                                                        \
        e##5 = _mm512_fmadd_ps(v, bq, e##5), f##5 = _mm512_fmadd_ps(v, br, f##5);                         \
    } while (0)

/* Steps k and k + 1 into panels q (weights w) and q + 1 (weights w + ws). */
#define IGEMM_STEP2(k)                                                                                    \
    do {                                                                                                  \
        const __m512 bq0 = _mm512_loadu_ps(w), bq1 = _mm512_loadu_ps(w + 16);                            \
        const __m512 br0 = _mm512_loadu_ps(w + ws), br1 = _mm512_loadu_ps(w + ws + 16);                  \
        FMA12(e, f, bq0, br0, k);                                                                         \
        FMA12(o, p, bq1, br1, (k) + 1);                                                                   \
    } while (0)

/* kc steps into panels q and q + 1, from k on. */
#define IGEMM_KLOOP2_FROM(k)                                                                              \
    do {                                                                                                  \
        for (; k + 1 < kc; k += 2, w += 32) IGEMM_STEP2(k);                                               \
        if (k < kc) {                                                                                     \
            const __m512 bq0 = _mm512_loadu_ps(w), br0 = _mm512_loadu_ps(w + ws);                         \
            FMA12(e, f, bq0, br0, k);                                                                     \
            w += 16;                                                                                      \
        }                                                                                                 \
    } while (0)

#define IGEMM_KLOOP2()                                                                                    \
    do {                                                                                                  \
        int64_t k = 0;                                                                                    \
        IGEMM_KLOOP2_FROM(k);                                                                             \
    } while (0)

/* IGEMM_KLOOP2 fetching the next tile's rows n[0 .. 5] (NCONV_IGEMM_NEXT_A), a line of each
 * per 16 steps. */
#define IGEMM_KLOOP2_NEXT(n)                                                                              \
    do {                                                                                                  \
        int64_t k = 0;                                                                                    \
        for (; k < kc; k += 16) {                                                                         \
            for (int r_ = 0; r_ < 6; r_++) __builtin_prefetch((n)[r_] + a_off + k);                      \
            if (k + 15 >= kc) break;                                                                      \
            _Pragma("GCC unroll 8") for (int j_ = 0; j_ < 16; j_ += 2, w += 32) IGEMM_STEP2(k + j_);      \
        }                                                                                                 \
        IGEMM_KLOOP2_FROM(k);                                                                             \
    } while (0)

#define IGEMM_REDUCE2()                        \
    for (int64_t t = 0; t < ks; t++, a += 6) { \
        NCONV_IGEMM_ROWS(a)                    \
        IGEMM_KLOOP2();                        \
    }

/* All column panels of a tile in one call (the per-call set-up of a short
 * reduction), two at a time; into f32 rows c or 16-bit rows c16, as one_panel. */
static inline __attribute__((always_inline)) void all_panels(int64_t mr, int64_t np, int64_t nc_last, int64_t kc,
                                                             int64_t ks, const float *const *a, int64_t a_off,
                                                             const float *zero, const float *w, int64_t ws,
                                                             float *const *c, uint16_t *const *c16, int to16,
                                                             const float *init, int flags) {
    const float *const *const at = a;
    const float *const w0 = w;
    const int64_t next_tile = !to16 && (flags & NCONV_IGEMM_PREFETCH) ? 6 * (c[1] - c[0]) : 0;
    int64_t q = 0;
    for (; q + 1 < np; q += 2) {
        ACC_DECL;
        __m512 f0, f1, f2, f3, f4, f5, p0, p1, p2, p3, p4, p5;
        o0 = o1 = o2 = o3 = o4 = o5 = p0 = p1 = p2 = p3 = p4 = p5 = _mm512_setzero_ps();
        if (to16 || init) {
            e0 = e1 = e2 = e3 = e4 = e5 = _mm512_loadu_ps(init + q * 16);
            f0 = f1 = f2 = f3 = f4 = f5 = _mm512_loadu_ps(init + q * 16 + 16);
        } else { /* accumulate onto C; masked loads of rows past mr read nothing */
            const __mmask16 m = nconv__avx512_mask(q + 2 < np ? 16 : nc_last);
#define LOAD_ROW(r)                                                                  \
    e##r = _mm512_maskz_loadu_ps(mr > r ? 0xffff : 0, c[mr > r ? r : 0] + q * 16); \
    f##r = _mm512_maskz_loadu_ps(mr > r ? m : 0, c[mr > r ? r : 0] + q * 16 + 16)
            LOAD_ROW(0);
            LOAD_ROW(1);
            LOAD_ROW(2);
            LOAD_ROW(3);
            LOAD_ROW(4);
            LOAD_ROW(5);
#undef LOAD_ROW
        }
        a = at, w = w0 + q * ws;
        if (ks == 1 && q == 0 && (flags & NCONV_IGEMM_NEXT_A)) {
            NCONV_IGEMM_ROWS(a)
            IGEMM_KLOOP2_NEXT(at + 6);
        } else if (ks == 1) {
            NCONV_IGEMM_ROWS(a)
            IGEMM_KLOOP2();
        } else {
            IGEMM_REDUCE2();
        }
        IGEMM_FINISH();
        if (to16) store_tile16(c16, q * 16, mr, 16, flags, e0, e1, e2, e3, e4, e5);
        else store_tile(c, q * 16, mr, 16, flags, e0, e1, e2, e3, e4, e5);
        e0 = f0, e1 = f1, e2 = f2, e3 = f3, e4 = f4, e5 = f5;
        o0 = p0, o1 = p1, o2 = p2, o3 = p3, o4 = p4, o5 = p5;
        IGEMM_FINISH();
        if (to16) store_tile16(c16, q * 16 + 16, mr, q + 2 < np ? 16 : nc_last, flags, e0, e1, e2, e3, e4, e5);
        else store_tile(c, q * 16 + 16, mr, q + 2 < np ? 16 : nc_last, flags, e0, e1, e2, e3, e4, e5);
        if (next_tile)
            for (int r = 0; r < 6; r++) {
                __builtin_prefetch(c[r] + q * 16 + next_tile, 1, 3);
                __builtin_prefetch(c[r] + q * 16 + 16 + next_tile, 1, 3);
            }
    }
    if (q < np && to16) {
        uint16_t *cq[6];
        for (int r = 0; r < 6; r++) cq[r] = c16[r] + q * 16;
        one_panel(mr, nc_last, kc, ks, at, a_off, zero, w0 + q * ws, NULL, cq, 1, init + q * 16, flags);
    } else if (q < np) {
        float *cq[6];
        for (int r = 0; r < 6; r++) cq[r] = c[r] + q * 16;
        one_panel(mr, nc_last, kc, ks, at, a_off, zero, w0 + q * ws, cq, NULL, 0, init ? init + q * 16 : NULL,
                  flags & ~NCONV_IGEMM_PREFETCH);
        if (next_tile)
            for (int r = 0; r < 6; r++) __builtin_prefetch(c[r] + q * 16 + next_tile, 1, 3);
    }
}

#endif
