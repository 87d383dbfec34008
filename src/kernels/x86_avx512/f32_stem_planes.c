/*
 * Direct convolution of few input channels on NCHW planes, AVX-512 (contract in ../kernels.h). A
 * block of 8 output channels by up to 3 vectors of 16 pixels stays in registers while every tap
 * is added: per tap, each pixel vector is one load from its source row (lanes outside the row
 * masked off, zeros) and each channel's weight is one broadcast. A tap position's masks serve
 * every source row. The
 * sums are named variables, not an array: with masked loads in the loop, GCC keeps an array in
 * memory and stores it back on every tap. Channel blocks past O read readable weights and are
 * not stored.
 */
#include "../kernels.h"

#include <immintrin.h>

#define EACH_CHANNEL(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* Lanes whose positions p lie in [0, len). */
static inline __mmask16 inside(__m512i p, __m512i len) {
    return _mm512_cmpge_epi32_mask(p, _mm512_setzero_si512()) & _mm512_cmplt_epi32_mask(p, len);
}

/* JV vectors of 16 pixels from pixel i0, channels o0 .. o0 + mo (of 8 computed). */
static inline __attribute__((always_inline)) void block(const int JV, int64_t n, int64_t i0, int64_t o0, int64_t mo,
                                                        int64_t nr, const float *const *rows, const float *w,
                                                        const int64_t *wo, int64_t nk, const int64_t *koff,
                                                        const int64_t *toff, const int64_t *tlen, int64_t ws,
                                                        const float *init, float *y, int64_t ys, int flags) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#define DECLARE(m) __m512 s##m##_0 = _mm512_set1_ps(init[o0 + m]), s##m##_1 = s##m##_0, s##m##_2 = s##m##_0;
    EACH_CHANNEL(DECLARE)
    for (int64_t k = 0; k < nk; k++) {
        /* the tap's masks: vector j reads positions x + 16 j + (0 .. 15) of its row */
        const int64_t x = toff[k] + i0;
        const __m512i len = _mm512_set1_epi32((int)tlen[k]);
#define MASK(j) \
    const __mmask16 m##j = JV > j ? inside(_mm512_add_epi32(_mm512_set1_epi32((int)(x + 16 * j)), lane), len) : 0;
        MASK(0) MASK(1) MASK(2)
        for (int64_t r = 0; r < nr; r++) {
            const float *p = rows[r] + koff[k] + x, *wr = w + wo[r] + o0 + k * ws;
            const __m512 v0 = _mm512_maskz_loadu_ps(m0, p), v1 = JV > 1 ? _mm512_maskz_loadu_ps(m1, p + 16) : v0,
                         v2 = JV > 2 ? _mm512_maskz_loadu_ps(m2, p + 32) : v0;
#define ADD(m)                                                                     \
    {                                                                              \
        const __m512 b = _mm512_set1_ps(wr[m]);                                    \
        s##m##_0 = _mm512_fmadd_ps(b, v0, s##m##_0);                               \
        if (JV > 1) s##m##_1 = _mm512_fmadd_ps(b, v1, s##m##_1);                   \
        if (JV > 2) s##m##_2 = _mm512_fmadd_ps(b, v2, s##m##_2);                   \
    }
            EACH_CHANNEL(ADD)
        }
    }
    const int relu = flags & NCONV_STEM_RELU, stream = flags & NCONV_STEM_STREAM;
    const __m512 zero = _mm512_setzero_ps();
#define STORE1(m, j)                                                                                             \
    {                                                                                                            \
        const __m512 r = relu ? _mm512_max_ps(zero, s##m##_##j) : s##m##_##j;                                    \
        float *d = y + (o0 + m) * ys + i0 + 16 * j;                                                              \
        const int64_t left = n - i0 - 16 * j;                                                                    \
        if (stream && left >= 16 && !((uintptr_t)d & 63)) _mm512_stream_ps(d, r);                                 \
        else _mm512_mask_storeu_ps(d, left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u), r);      \
    }
#define STORE(m)                      \
    if (m < mo) {                     \
        STORE1(m, 0)                  \
        if (JV > 1) STORE1(m, 1)      \
        if (JV > 2) STORE1(m, 2)      \
    }
    EACH_CHANNEL(STORE)
}

void nconv_f32_stem_planes__avx512(int64_t n, int64_t O, int64_t nr, const float *const *rows, const float *w,
                                   const int64_t *wo, int64_t nk, const int64_t *koff, const int64_t *toff,
                                   const int64_t *tlen, int64_t ws, const float *init, float *y, int64_t ys,
                                   int flags) {
    for (int64_t o0 = 0; o0 < O; o0 += 8) {
        const int64_t mo = O - o0 < 8 ? O - o0 : 8;
        /* blocks of 3 vectors, the last two of 2 where 4 are left (not 3 and a lone 1) */
        for (int64_t i0 = 0; i0 < n;) {
            const int64_t left = (n - i0 + 15) / 16, jv = left == 4 ? 2 : left < 3 ? left : 3;
            if (jv == 3) block(3, n, i0, o0, mo, nr, rows, w, wo, nk, koff, toff, tlen, ws, init, y, ys, flags);
            else if (jv == 2) block(2, n, i0, o0, mo, nr, rows, w, wo, nk, koff, toff, tlen, ws, init, y, ys, flags);
            else block(1, n, i0, o0, mo, nr, rows, w, wo, nk, koff, toff, tlen, ws, init, y, ys, flags);
            i0 += 16 * jv;
        }
    }
}
