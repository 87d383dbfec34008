/*
 * Direct convolution of few input channels, AVX-512 (contract in ../kernels.h). A block of J
 * pixels by V vectors of 16 output channels stays in registers while every tap is added: per
 * tap, V weight vectors are loaded once and each pixel's input is one broadcast, so the taps'
 * inputs are read where they lie (any layout, any stride) with no copy of them. Runs end with a
 * block moved back to end at the last pixel: pixels it computes twice get the same sums.
 */
#include "../kernels.h"

#include <immintrin.h>

static inline __attribute__((always_inline)) void block(const int V, const int J, int64_t nt, const float *x,
                                                        const int64_t *xo, int64_t xs, const float *w,
                                                        const int64_t *wo, int64_t o0, __mmask16 last,
                                                        const float *init, float *y, int64_t ys, int flags) {
    __m512 acc[4][8];
    for (int v = 0; v < V; v++) {
        const __m512 b = _mm512_maskz_loadu_ps(v == V - 1 ? last : 0xffff, init + o0 + 16 * v);
        for (int j = 0; j < J; j++) acc[v][j] = b;
    }
    for (int64_t t = 0; t < nt; t++) {
        const float *p = x + xo[t];
        __m512 wv[4];
        for (int v = 0; v < V; v++) {
            wv[v] = _mm512_load_ps(w + wo[t] + o0 + 16 * v);
            if (V > 1) NCONV_IN_REGISTER(wv[v]);
        }
        for (int j = 0; j < J; j++) {
            const __m512 b = _mm512_set1_ps(p[j * xs]);
            for (int v = 0; v < V; v++) acc[v][j] = _mm512_fmadd_ps(b, wv[v], acc[v][j]);
        }
    }
    for (int j = 0; j < J; j++)
        for (int v = 0; v < V; v++) {
            const __m512 r = flags & NCONV_STEM_RELU ? _mm512_max_ps(_mm512_setzero_ps(), acc[v][j]) : acc[v][j];
            float *d = y + j * ys + o0 + 16 * v;
            const __mmask16 k = v == V - 1 ? last : 0xffff;
            if (flags & NCONV_STEM_STREAM && k == 0xffff && !((uintptr_t)d & 63)) _mm512_stream_ps(d, r);
            else _mm512_mask_storeu_ps(d, k, r);
        }
}

/* The n pixels in blocks of J (runs shorter than J: a pixel at a time), V vectors from o0. */
#define RUN(V, J)                                                                                           \
    do {                                                                                                    \
        if (n < J) {                                                                                        \
            for (int64_t i = 0; i < n; i++)                                                                 \
                block(V, 1, nt, x + i * xs, xo, xs, w, wo, o0, last, init, y + i * ys, ys, flags);              \
            break;                                                                                          \
        }                                                                                                   \
        for (int64_t i = 0; i < n; i += J) {                                                                \
            if (i > n - J) i = n - J;                                                                       \
            block(V, J, nt, x + i * xs, xo, xs, w, wo, o0, last, init, y + i * ys, ys, flags);                  \
        }                                                                                                   \
    } while (0)

void nconv_f32_stem__avx512(int64_t n, int64_t O, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                            const float *w, const int64_t *wo, const float *init, float *y, int64_t ys, int flags) {
    const int64_t nv = (O + 15) / 16;
    for (int64_t v0 = 0; v0 < nv;) {
        /* blocks of 4 vectors, 3 where the rest is 3 or 6, the last 1 or 2 as they come */
        const int64_t left = nv - v0, V = left == 3 || left == 6 ? 3 : left >= 4 ? 4 : left;
        const int64_t o0 = v0 * 16, lanes = O - (o0 + (V - 1) * 16);
        const __mmask16 last = lanes >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << lanes) - 1u);
        if (V == 4) RUN(4, 6);
        else if (V == 3) RUN(3, 8);
        else if (V == 2) RUN(2, 8);
        else RUN(1, 8);
        v0 += V;
    }
}
