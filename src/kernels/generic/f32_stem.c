/* Direct convolution of few input channels, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_stem__generic(int64_t n, int64_t O, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                             const float *w, const int64_t *wo, const float *init, float *y, int64_t ys, int flags) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < O; o++) {
            float acc = init[o];
            for (int64_t t = 0; t < nt; t++) acc += x[xo[t] + i * xs] * w[wo[t] + o];
            y[i * ys + o] = flags & NCONV_STEM_RELU && acc < 0 ? 0.0f : acc;
        }
}
