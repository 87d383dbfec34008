/* Backward-weights of small groups, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_gbw__generic(int64_t n, int64_t q, int64_t o0, int64_t no, int64_t nt, const float *dy, int64_t dys,
                            const float *const *x, int64_t xs, float *acc, int64_t ats) {
    for (int64_t t = 0; t < nt; t++)
        for (int64_t o = 0; o < no; o++)
            for (int64_t l = 0; l < 8; l++) {
                const float *d = dy + (l / q) * q + o0 + o, *xt = x[t] + l;
                float s = acc[t * ats + o * 8 + l];
                for (int64_t i = 0; i < n; i++) s += d[i * dys] * xt[i * xs];
                acc[t * ats + o * 8 + l] = s;
            }
}
