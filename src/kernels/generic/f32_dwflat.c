/* Depthwise on flattened planes, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwflat__generic(int64_t nch, int64_t n, int64_t nt, const int64_t *off, const uint16_t *mask,
                               const float *x, int64_t xs, const float *w, const float *init, float *y, int64_t ys,
                               int relu) {
    for (int64_t c = 0; c < nch; c++)
        for (int64_t f = 0; f < n; f++) {
            const uint16_t *m = mask + (f / 16) * nt;
            float acc = init ? init[c] : 0.0f;
            for (int64_t t = 0; t < nt; t++) {
                const float v = m[t] >> (f % 16) & 1 ? x[c * xs + f + off[t]] : 0.0f;
                acc += w[c * nt + t] * v;
            }
            y[c * ys + f] = relu && acc < 0 ? 0.0f : acc;
        }
}
