/* Forward of small groups, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_gfwd__generic(int64_t n, int64_t q, int64_t ks, const float *const *src, int64_t ss, const float *w,
                             const float *init, float *dst, int64_t ds, int relu) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t l = 0; l < 8; l++) {
            float acc = init ? init[l] : 0.0f;
            for (int64_t t = 0; t < ks; t++)
                for (int64_t j = 0; j < q; j++) acc += w[(t * q + j) * 8 + l] * src[t][i * ss + (l / q) * q + j];
            dst[i * ds + l] = relu && acc < 0 ? 0.0f : acc;
        }
}
