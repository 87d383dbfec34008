/* f32 matrix transpose, portable C: dst[j][i] = src[i][j], in cache tiles. */
#include "../kernels.h"

void nconv_f32_transpose__generic(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                                  int64_t ldd) {
    enum { T = 16 };
    for (int64_t i0 = 0; i0 < rows; i0 += T)
        for (int64_t j0 = 0; j0 < cols; j0 += T)
            for (int64_t i = i0; i < i0 + T && i < rows; i++)
                for (int64_t j = j0; j < j0 + T && j < cols; j++) dst[j * ldd + i] = src[i * lds + j];
}
