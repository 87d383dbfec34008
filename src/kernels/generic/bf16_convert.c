/* bf16 <-> f32 conversion, portable C (contract in ../kernels.h): the library's scalar conversions. */
#include "../../internal.h"
#include "../kernels.h"

void nconv_bf16_convert__generic(int64_t n, const void *src, void *dst, int to_f32) {
    if (to_f32)
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = nconv__bf16_to_f32(((const uint16_t *)src)[i]);
    else
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = nconv__f32_to_bf16(((const float *)src)[i]);
}
