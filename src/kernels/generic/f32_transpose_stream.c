/* f32 matrix transpose into memory the caller will not read soon, portable C: portable C has no
 * non-temporal stores, so this is the plain transpose. */
#include "../kernels.h"

void nconv_f32_transpose_stream__generic(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                                         int64_t ldd) {
    nconv_f32_transpose__generic(rows, cols, src, lds, dst, ldd);
}
