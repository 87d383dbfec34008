/*
 * Direct convolution of few input channels, AVX2 + FMA (contract in ../kernels.h). A block of J
 * pixels by V vectors of 8 output channels (2 by 6, or 1 by 8) stays in registers while every
 * tap is added: per tap, V weight vectors are loaded once and each pixel's input is one
 * broadcast, so the taps' inputs are read where they lie (any layout, any stride) with no copy
 * of them. Runs end with a block moved back to end at the last pixel: pixels it computes twice
 * get the same sums. The sums are named variables, not an array: GCC otherwise keeps the array
 * in memory and stores it back on every tap.
 */
#include "../kernels.h"
#include "avx2_util.h"

#define EACH_PIXEL(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

static inline __attribute__((always_inline)) void block(const int V, const int J, int64_t nt, const float *x,
                                                        const int64_t *xo, int64_t xs, const float *w,
                                                        const int64_t *wo, int64_t o0, __m256i last, int full,
                                                        const float *init, float *y, int64_t ys, int flags) {
    const __m256 b0 = _mm256_loadu_ps(init + o0), b1 = _mm256_loadu_ps(init + o0 + 8);
#define DECLARE(j) __m256 a##j##_0 = b0, a##j##_1 = b1;
    EACH_PIXEL(DECLARE)
    for (int64_t t = 0; t < nt; t++) {
        const float *p = x + xo[t];
        const __m256 w0 = _mm256_load_ps(w + wo[t] + o0), w1 = V > 1 ? _mm256_load_ps(w + wo[t] + o0 + 8) : w0;
#define ADD(j)                                                              \
    if (J > j) {                                                            \
        const __m256 b = _mm256_broadcast_ss(p + j * xs);                   \
        a##j##_0 = _mm256_fmadd_ps(b, w0, a##j##_0);                        \
        if (V > 1) a##j##_1 = _mm256_fmadd_ps(b, w1, a##j##_1);             \
    }
        EACH_PIXEL(ADD)
    }
    const __m256i all = _mm256_set1_epi32(-1);
    const int relu = flags & NCONV_STEM_RELU, stream = flags & NCONV_STEM_STREAM;
#define STORE1(j, v)                                                                                          \
    {                                                                                                         \
        const __m256 r = relu ? _mm256_max_ps(_mm256_setzero_ps(), a##j##_##v) : a##j##_##v;                  \
        float *d = y + j * ys + o0 + 8 * v;                                                                   \
        if (stream && (v < V - 1 || full) && !((uintptr_t)d & 31)) _mm256_stream_ps(d, r);                     \
        else _mm256_maskstore_ps(d, v == V - 1 ? last : all, r);                                              \
    }
#define STORE(j)                     \
    if (J > j) {                     \
        STORE1(j, 0)                 \
        if (V > 1) STORE1(j, 1)      \
    }
    EACH_PIXEL(STORE)
}

/* The n pixels in blocks of J (runs shorter than J: a pixel at a time), V vectors from o0. */
#define RUN(V, J)                                                                                            \
    do {                                                                                                     \
        if (n < J) {                                                                                         \
            for (int64_t i = 0; i < n; i++)                                                                  \
                block(V, 1, nt, x + i * xs, xo, xs, w, wo, o0, last, full, init, y + i * ys, ys, flags);     \
            break;                                                                                           \
        }                                                                                                    \
        for (int64_t i = 0; i < n; i += J) {                                                                 \
            if (i > n - J) i = n - J;                                                                        \
            block(V, J, nt, x + i * xs, xo, xs, w, wo, o0, last, full, init, y + i * ys, ys, flags);         \
        }                                                                                                    \
    } while (0)

void nconv_f32_stem__avx2(int64_t n, int64_t O, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                          const float *w, const int64_t *wo, const float *init, float *y, int64_t ys, int flags) {
    const int64_t nv = (O + 7) / 8;
    for (int64_t v0 = 0; v0 < nv;) {
        /* pairs of vectors by 6 pixels: 12 sums hide the FMA latency in 16 registers */
        const int64_t V = nv - v0 >= 2 ? 2 : 1;
        const int64_t o0 = v0 * 8, lanes = O - (o0 + (V - 1) * 8);
        const int full = lanes >= 8;
        const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(lanes < 8 ? lanes : 8)),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        if (V == 2) RUN(2, 6);
        else RUN(1, 8);
        v0 += V;
    }
}
