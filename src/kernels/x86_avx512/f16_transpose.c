/* f16 <-> f32 transpose, AVX-512 (contract in ../kernels.h): transpose16.h with VCVTPH2PS / VCVTPS2PH. */
#include "transpose16.h"

void nconv_f16_transpose__avx512(int64_t rows, int64_t cols, const void *src, int64_t lds, void *dst, int64_t ldd,
                                 int to_f32) {
    transpose16(rows, cols, src, lds, dst, ldd, to_f32, 0);
}
