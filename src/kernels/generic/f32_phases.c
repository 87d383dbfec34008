/* Column phases of a strided row, portable C (contract in ../kernels.h). */
#include "../kernels.h"

void nconv_f32_phases__generic(int64_t n, int64_t s, const float *src, float *dst, int64_t ld) {
    for (int64_t q = 0; q < s; q++)
        for (int64_t i = 0, j = q; j < n; i++, j += s) dst[q * ld + i] = src[j];
}
