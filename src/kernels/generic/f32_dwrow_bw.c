/* Depthwise rows' weight gradient on planes, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwrow_bw__generic(int64_t nq, int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs,
                                 int64_t rd, int64_t xq, int64_t nk, const int64_t *toff, int64_t step, int64_t len,
                                 const float *dy, int64_t dys, int64_t dyq, float *acc, float *db) {
    for (int64_t a = 0; a < nr; a++)
        for (int64_t b = 0; b < nk; b++) {
            float sum = 0.0f;
            for (int64_t q = 0; q < nq; q++)
                for (int64_t r = 0; r < m; r++) {
                    const float *x = rows[r * rs + a * rd], *d = dy + q * dyq + r * dys;
                    for (int64_t i = 0; i < n; i++) {
                        const int64_t p = toff[b] + i * step;
                        sum += d[i] * (x && p >= 0 && p < len ? x[q * xq + p] : 0.0f);
                    }
                }
            acc[a * nk + b] += sum;
        }
    if (!db) return;
    float sum = 0.0f;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t i = 0; i < n; i++) sum += dy[q * dyq + r * dys + i];
    *db += sum;
}
