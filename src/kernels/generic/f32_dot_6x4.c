/* Dot products of pixel rows, portable C (contract in ../kernels.h): pixel i
 * goes to lane i % 16. */
#include "../kernels.h"

void nconv_f32_dot_6x4__generic(int64_t nimg, int64_t len, const float *dy, int64_t dyc, int64_t dyn, int64_t no,
                                const float *x, int64_t xc, int64_t xn, int64_t nc, float *part, float *db) {
    for (int64_t j = 0; j < nimg; j++)
        for (int64_t o = 0; o < no; o++) {
            const float *d = dy + j * dyn + o * dyc;
            for (int64_t c = 0; c < nc; c++) {
                const float *xr = x + j * xn + c * xc;
                float *p = part + (o * NCONV_DOT_NC + c) * NCONV_DOT_LANES;
                for (int64_t i = 0; i < len; i++)
                    p[i % NCONV_DOT_LANES] += d[i] * xr[i];
            }
            if (db)
                for (int64_t i = 0; i < len; i++)
                    db[o * NCONV_DOT_LANES + i % NCONV_DOT_LANES] += d[i];
        }
}
