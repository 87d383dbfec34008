/* Direct convolution of few input channels on NCHW planes, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_stem_planes__generic(int64_t n, int64_t O, int64_t nr, const float *const *rows, const float *w,
                                    const int64_t *wo, int64_t nk, const int64_t *koff, const int64_t *toff,
                                    const int64_t *tlen, int64_t ws, const float *init, float *y, int64_t ys,
                                    int flags) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < n; i++) {
            float acc = init[o];
            for (int64_t k = 0; k < nk; k++) {
                const int64_t x = toff[k] + i;
                if (x < 0 || x >= tlen[k]) continue;
                for (int64_t r = 0; r < nr; r++) acc += w[wo[r] + k * ws + o] * rows[r][koff[k] + x];
            }
            y[o * ys + i] = flags & NCONV_STEM_RELU && acc < 0 ? 0.0f : acc;
        }
}
