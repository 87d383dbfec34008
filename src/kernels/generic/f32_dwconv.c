/* Depthwise micro-kernels, portable C (contracts in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwconv__generic(int64_t channels, int64_t ks, const float *const *rows, const float *w,
                               const float *init, float *out, int relu) {
    for (int64_t c = 0; c < channels; c++) {
        float acc = init ? init[c] : 0.0f;
        for (int64_t t = 0; t < ks; t++) acc += rows[t][c] * w[t * channels + c];
        out[c] = relu && acc < 0 ? 0.0f : acc;
    }
}

void nconv_f32_vmacc__generic(int64_t n, const float *a, const float *b, float *acc) {
    for (int64_t i = 0; i < n; i++) acc[i] += a[i] * b[i];
}
