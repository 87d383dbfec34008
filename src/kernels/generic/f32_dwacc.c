/* Depthwise backward-weights on a run of pixels, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwacc__generic(int64_t channels, int64_t cs, int64_t n, int64_t kr, int64_t kt, const float *dy,
                              const float *const *rows, const nconv_dw_run *g, float *acc) {
    for (int64_t r = 0; r < kr; r++)
        for (int64_t t = 0; t < kt; t++)
            for (int64_t c = 0; c < channels; c++) {
                float s = 0.0f;
                for (int64_t p = 0; p < n; p++) {
                    const int64_t col = g->first + p * g->step + t * g->tap;
                    s += dy[p * cs + c] * (col >= 0 && col < g->width ? rows[r][col * cs + c] : 0.0f);
                }
                acc[(r * kt + t) * cs + c] += s;
            }
}
