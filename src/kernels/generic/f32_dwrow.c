/* Depthwise rows on planes, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwrow__generic(int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs, int64_t rd,
                              int64_t nk, const int64_t *toff, int64_t step, int64_t len, const float *w, float init,
                              float *y, int64_t ys, int relu, int64_t ahead) {
    (void)ahead; /* a hint */
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < n; i++) {
            float acc = init;
            for (int64_t a = 0; a < nr; a++)
                for (int64_t b = 0; b < nk; b++) {
                    const int64_t x = toff[b] + i * step;
                    if (x >= 0 && x < len) acc += w[a * nk + b] * rows[r * rs + a * rd][x];
                }
            y[r * ys + i] = relu && acc < 0 ? 0.0f : acc;
        }
}
