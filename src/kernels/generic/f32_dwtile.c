/* Depthwise on channel-blocked rows, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwtile__generic(int64_t cw, int64_t cs, int64_t step, int64_t n, int64_t nr, const float *const *rows,
                               const float *const *w, int64_t ws, int64_t nt, const int64_t *toff, const float *init, float *out,
                               int64_t os, int64_t nc, int flags) {
    (void)cw; /* the ISA kernels take a block as whole vectors; here each channel is a lane of its own */
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < nc; c++) {
            float acc = init[c];
            for (int64_t r = 0; r < nr; r++)
                for (int64_t t = 0; t < nt; t++) acc += rows[r][toff[t] + i * step * cs + c] * w[r][t * ws + c];
            out[i * os + c] = flags & NCONV_DW_RELU && acc < 0 ? 0.0f : acc; /* NCONV_DW_STREAM: a hint */
        }
}
