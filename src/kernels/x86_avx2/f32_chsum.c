/*
 * Channel sums in double, four lanes by row mod 4, AVX2. Contract in
 * ../kernels.h. Eight channels at a time: their four lanes live in eight
 * registers over all rows, and each lane adds its rows in order, so the
 * sums are those of the portable kernel, bit for bit.
 */
#include "../kernels.h"
#include "avx2_util.h"

#define ADD_ROW(lo, hi, p)                                                            \
    do {                                                                              \
        const __m256 v_ = _mm256_loadu_ps(p);                                         \
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v_)));          \
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v_, 1)));        \
    } while (0)

void nconv_f32_chsum__avx2(int64_t rows, int64_t cols, const float *x, int64_t ld, double *lane, int64_t ls) {
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        double *l0 = lane + j, *l1 = l0 + ls, *l2 = l1 + ls, *l3 = l2 + ls;
        __m256d a0 = _mm256_loadu_pd(l0), b0 = _mm256_loadu_pd(l0 + 4), a1 = _mm256_loadu_pd(l1),
                b1 = _mm256_loadu_pd(l1 + 4), a2 = _mm256_loadu_pd(l2), b2 = _mm256_loadu_pd(l2 + 4),
                a3 = _mm256_loadu_pd(l3), b3 = _mm256_loadu_pd(l3 + 4);
        const float *p = x + j;
        int64_t i = 0;
        for (; i + 4 <= rows; i += 4, p += 4 * ld) {
            ADD_ROW(a0, b0, p);
            ADD_ROW(a1, b1, p + ld);
            ADD_ROW(a2, b2, p + 2 * ld);
            ADD_ROW(a3, b3, p + 3 * ld);
        }
        /* At most three rows left, in lanes 0, 1, 2. */
        if (i < rows) ADD_ROW(a0, b0, p);
        if (i + 1 < rows) ADD_ROW(a1, b1, p + ld);
        if (i + 2 < rows) ADD_ROW(a2, b2, p + 2 * ld);

        _mm256_storeu_pd(l0, a0), _mm256_storeu_pd(l0 + 4, b0), _mm256_storeu_pd(l1, a1), _mm256_storeu_pd(l1 + 4, b1);
        _mm256_storeu_pd(l2, a2), _mm256_storeu_pd(l2 + 4, b2), _mm256_storeu_pd(l3, a3), _mm256_storeu_pd(l3 + 4, b3);
    }
    if (j < cols) nconv_f32_chsum__generic(rows, cols - j, x + j, ld, lane + j, ls);
}
