/* f16 <-> f32 transpose, portable C (contract in ../kernels.h): the library's scalar conversions. */
#include "../../internal.h"
#include "../kernels.h"

void nconv_f16_transpose__generic(int64_t rows, int64_t cols, const void *src, int64_t lds, void *dst, int64_t ldd,
                                  int to_f32) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            if (to_f32) ((float *)dst)[j * ldd + i] = nconv__f16_to_f32(((const uint16_t *)src)[i * lds + j]);
            else ((uint16_t *)dst)[j * ldd + i] = nconv__f32_to_f16(((const float *)src)[i * lds + j]);
        }
}
