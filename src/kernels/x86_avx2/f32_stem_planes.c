/*
 * Direct convolution of few input channels on NCHW planes, AVX2 + FMA (contract in ../kernels.h). A
 * block of 4 output channels by up to 2 vectors of 8 pixels stays in registers while every tap is
 * added: per tap, each pixel vector is one load from its source row (lanes outside the row masked
 * off, zeros) and each channel's weight is one broadcast. A tap position's masks serve every
 * source row. The sums are named variables, not an array (see the AVX-512 kernel). Channel blocks
 * past O read readable weights and are not stored.
 */
#include "../kernels.h"
#include "avx2_util.h"

#define EACH_CHANNEL(X) X(0) X(1) X(2) X(3)

/* Lanes whose positions p lie in [0, len), as a load mask. */
static inline __m256i inside(__m256i p, __m256i len) {
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), p), _mm256_cmpgt_epi32(len, p));
}

/* JV vectors of 8 pixels from pixel i0, channels o0 .. o0 + mo (of 4 computed). */
static inline __attribute__((always_inline)) void block(const int JV, int64_t n, int64_t i0, int64_t o0, int64_t mo,
                                                        int64_t nr, const float *const *rows, const float *w,
                                                        const int64_t *wo, int64_t nk, const int64_t *koff,
                                                        const int64_t *toff, const int64_t *tlen, int64_t ws,
                                                        const float *init, float *y, int64_t ys, int flags) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#define DECLARE(m) __m256 s##m##_0 = _mm256_set1_ps(init[o0 + m]), s##m##_1 = s##m##_0;
    EACH_CHANNEL(DECLARE)
    for (int64_t k = 0; k < nk; k++) {
        /* the tap's masks: vector j reads positions x + 8 j + (0 .. 7) of its row */
        const int64_t x = toff[k] + i0;
        const __m256i len = _mm256_set1_epi32((int)tlen[k]), at = _mm256_add_epi32(_mm256_set1_epi32((int)x), lane);
        const __m256i m0 = inside(at, len);
        const __m256i m1 = JV > 1 ? inside(_mm256_add_epi32(at, _mm256_set1_epi32(8)), len) : m0;
        for (int64_t r = 0; r < nr; r++) {
            const float *p = rows[r] + koff[k] + x, *wr = w + wo[r] + o0 + k * ws;
            const __m256 v0 = _mm256_maskload_ps(p, m0), v1 = JV > 1 ? _mm256_maskload_ps(p + 8, m1) : v0;
#define ADD(m)                                                                     \
    {                                                                              \
        const __m256 b = _mm256_broadcast_ss(wr + m);                              \
        s##m##_0 = _mm256_fmadd_ps(b, v0, s##m##_0);                               \
        if (JV > 1) s##m##_1 = _mm256_fmadd_ps(b, v1, s##m##_1);                   \
    }
            EACH_CHANNEL(ADD)
        }
    }
    const int relu = flags & NCONV_STEM_RELU, stream = flags & NCONV_STEM_STREAM;
#define STORE1(m, j)                                                                                             \
    {                                                                                                            \
        const __m256 r = relu ? _mm256_max_ps(_mm256_setzero_ps(), s##m##_##j) : s##m##_##j;                     \
        float *d = y + (o0 + m) * ys + i0 + 8 * j;                                                               \
        const int64_t left = n - i0 - 8 * j;                                                                     \
        if (stream && left >= 8 && !((uintptr_t)d & 31)) _mm256_stream_ps(d, r);                                  \
        else _mm256_maskstore_ps(d, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? left : 8)), lane), r); \
    }
#define STORE(m)                      \
    if (m < mo) {                     \
        STORE1(m, 0)                  \
        if (JV > 1) STORE1(m, 1)      \
    }
    EACH_CHANNEL(STORE)
}

void nconv_f32_stem_planes__avx2(int64_t n, int64_t O, int64_t nr, const float *const *rows, const float *w,
                                 const int64_t *wo, int64_t nk, const int64_t *koff, const int64_t *toff,
                                 const int64_t *tlen, int64_t ws, const float *init, float *y, int64_t ys,
                                 int flags) {
    for (int64_t o0 = 0; o0 < O; o0 += 4) {
        const int64_t mo = O - o0 < 4 ? O - o0 : 4;
        for (int64_t i0 = 0; i0 < n; i0 += 16) {
            if (n - i0 > 8) block(2, n, i0, o0, mo, nr, rows, w, wo, nk, koff, toff, tlen, ws, init, y, ys, flags);
            else block(1, n, i0, o0, mo, nr, rows, w, wo, nk, koff, toff, tlen, ws, init, y, ys, flags);
        }
    }
}
