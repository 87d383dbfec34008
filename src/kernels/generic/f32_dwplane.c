/* Depthwise plane micro-kernels, portable C (contracts in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_dwrow__generic(int64_t rows, int64_t n, int64_t ks, const float *const *src, int64_t src_pitch,
                              const float *w, float init, float *out, int64_t out_pitch, int relu) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            float acc = init;
            for (int64_t t = 0; t < ks; t++) acc += w[t] * src[t][r * src_pitch + j];
            out[r * out_pitch + j] = relu && acc < 0 ? 0.0f : acc;
        }
}

void nconv_f32_dwdot__generic(int64_t rows, int64_t n, int64_t ks, const float *a, int64_t a_pitch,
                              const float *const *src, int64_t src_pitch, float *acc) {
    for (int64_t t = 0; t < ks; t++) {
        float s = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) s += a[r * a_pitch + j] * src[t][r * src_pitch + j];
        acc[t] += s;
    }
}
