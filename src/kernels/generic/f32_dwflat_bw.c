/* Depthwise weight gradient on flattened planes, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwflat_bw__generic(int64_t nch, int64_t nq, int64_t n, int64_t nt, const int64_t *off,
                                  const uint16_t *mask, const float *x, int64_t xs, int64_t xq, const float *dy,
                                  int64_t dys, int64_t dyq, float *acc, float *db) {
    for (int64_t c = 0; c < nch; c++) {
        for (int64_t t = 0; t < nt; t++) {
            float s = 0.0f;
            for (int64_t q = 0; q < nq; q++) {
                const float *xp = x + q * xq + c * xs, *d = dy + q * dyq + c * dys;
                for (int64_t f = 0; f < n; f++)
                    s += d[f] * (mask[(f / 16) * nt + t] >> (f % 16) & 1 ? xp[f + off[t]] : 0.0f);
            }
            acc[c * nt + t] += s;
        }
        if (!db) continue;
        float s = 0.0f;
        for (int64_t q = 0; q < nq; q++)
            for (int64_t f = 0; f < n; f++) s += dy[q * dyq + c * dys + f];
        db[c] += s;
    }
}
