/* Backward-weights of few input channels, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_stem_bw__generic(int64_t n, int64_t op, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                                const float *dy, int64_t ds, float *acc, const int64_t *ao,
                                float *db, const nconv_lines *ahead) {
    (void)ahead; /* portable C: no prefetch */
    for (int64_t t = 0; t < nt; t++)
        for (int64_t o = 0; o < op; o++) {
            float s = 0.0f;
            for (int64_t i = 0; i < n; i++) s += x[xo[t] + i * xs] * dy[i * ds + o];
            acc[ao[t] + o] += s;
        }
    for (int64_t o = 0; o < op && db; o++) {
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t i = 0; i < n; i++) s[i % 4] += dy[i * ds + o];
        db[o] += (s[0] + s[1]) + (s[2] + s[3]);
    }
}
