/*
 * The body of the portable GEMM kernels with indirect B rows and tiles of
 * more than 6 rows (7 x 16, 9 x 16): every one of `rows` A rows summed in k
 * order, as the AVX-512 kernels of those heights do.
 */
#ifndef NCONV_GENERIC_GEMM_IB_TALL_H
#define NCONV_GENERIC_GEMM_IB_TALL_H

#include "../kernels.h"

enum { GEMM_IB_TALL_MAX = 9 };

static inline void gemm_ib_tall(int64_t rows, int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                int64_t lda, const float *const *b, int64_t boff, int64_t bs, float *c, int64_t ldc,
                                const float *rinit, int flags) {
    const int accumulate = flags & NCONV_GEMM_ACCUMULATE;
    for (int64_t q = 0; q < np; q++) {
        const int64_t nc = q + 1 < np ? 16 : nc_last;
        float acc[GEMM_IB_TALL_MAX][16] = {{0}};
        const float *ak = a;
        for (int64_t k = 0; k < kc; k++, ak += lda) {
            const float *bk = b[k] + boff + q * bs;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < nc; j++) acc[r][j] += ak[r] * bk[j];
        }
        float *cq = c + q * 16;
        for (int64_t r = 0; r < mr; r++)
            for (int64_t j = 0; j < nc; j++)
                cq[r * ldc + j] = accumulate ? cq[r * ldc + j] + acc[r][j] : rinit ? rinit[r] + acc[r][j] : acc[r][j];
    }
}

#endif
