/*
 * bf16 <-> f32 conversion built with AVX512-BF16 (contract in ../kernels.h): narrowing by
 * VCVTNEPS2BF16 (../x86_avx512/avx512_util.h), widening as the AVX-512F kernel.
 */
#include "../kernels.h"
#include "../x86_avx512/avx512_util.h"

void nconv_bf16_convert__avx512_bf16(int64_t n, const void *src, void *dst, int to_f32) {
    if (to_f32) nconv_bf16_convert__avx512(n, src, dst, 1);
    else nconv__avx512_narrow_bf16(n, src, dst);
}
