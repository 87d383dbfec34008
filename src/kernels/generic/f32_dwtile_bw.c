/* Depthwise backward-weights on channel-blocked rows, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwtile_bw__generic(int64_t cw, int64_t cs, int64_t step, int64_t n, int64_t nr, const float *const *rows,
                                  int64_t nt, const int64_t *toff, const float *dy, float *acc, float *db) {
    for (int64_t c = 0; c < cw && db; c++) {
        float s = 0.0f;
        for (int64_t i = 0; i < n; i++) s += dy[i * cw + c];
        db[c] += s;
    }
    for (int64_t r = 0; r < nr; r++)
        for (int64_t t = 0; t < nt; t++)
            for (int64_t c = 0; c < cw; c++) {
                float s = 0.0f;
                for (int64_t i = 0; i < n; i++) s += dy[i * cw + c] * rows[r][toff[t] + i * step * cs + c];
                acc[(r * nt + t) * cw + c] += s;
            }
}
