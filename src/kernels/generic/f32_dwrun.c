/* Depthwise on a run of output pixels, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwrun__generic(int64_t channels, int64_t cs, int64_t n, int64_t kr, int64_t kt, const float *const *rows,
                              const nconv_dw_run *g, const float *w, const float *init, float *out, int relu) {
    for (int64_t p = 0; p < n; p++)
        for (int64_t c = 0; c < channels; c++) {
            float acc = init ? init[c] : 0.0f;
            for (int64_t r = 0; r < kr; r++)
                for (int64_t t = 0; t < kt; t++) {
                    const int64_t col = g->first + p * g->step + t * g->tap;
                    const float x = col >= 0 && col < g->width ? rows[r][col * cs + c] : 0.0f;
                    acc += x * w[(r * kt + t) * cs + c];
                }
            out[p * g->out_step * cs + c] = relu && acc < 0 ? 0.0f : acc;
        }
}
