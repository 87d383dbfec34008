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

/* Rows r0 .. r0 + n (n a multiple of 4 unless the last) of channels [0, cols). */
static void chsum_rows(int64_t n, int64_t cols, const float *x, int64_t ld, double *lane, int64_t ls) {
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        double *l0 = lane + j, *l1 = l0 + ls, *l2 = l1 + ls, *l3 = l2 + ls;
        __m256d a0 = _mm256_loadu_pd(l0), b0 = _mm256_loadu_pd(l0 + 4), a1 = _mm256_loadu_pd(l1),
                b1 = _mm256_loadu_pd(l1 + 4), a2 = _mm256_loadu_pd(l2), b2 = _mm256_loadu_pd(l2 + 4),
                a3 = _mm256_loadu_pd(l3), b3 = _mm256_loadu_pd(l3 + 4);
        const float *p = x + j;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4, p += 4 * ld) {
            ADD_ROW(a0, b0, p);
            ADD_ROW(a1, b1, p + ld);
            ADD_ROW(a2, b2, p + 2 * ld);
            ADD_ROW(a3, b3, p + 3 * ld);
        }
        /* At most three rows left, in lanes 0, 1, 2. */
        if (i < n) ADD_ROW(a0, b0, p);
        if (i + 1 < n) ADD_ROW(a1, b1, p + ld);
        if (i + 2 < n) ADD_ROW(a2, b2, p + 2 * ld);

        _mm256_storeu_pd(l0, a0), _mm256_storeu_pd(l0 + 4, b0), _mm256_storeu_pd(l1, a1), _mm256_storeu_pd(l1 + 4, b1);
        _mm256_storeu_pd(l2, a2), _mm256_storeu_pd(l2 + 4, b2), _mm256_storeu_pd(l3, a3), _mm256_storeu_pd(l3 + 4, b3);
    }
    if (j < cols) nconv_f32_chsum__generic(n, cols - j, x + j, ld, lane + j, ls);
}

/* Blocks of rows (128 KiB, a multiple of 4 rows: each keeps its lane) go
 * through all channels before the next: eight channels are half a cache
 * line, and walking all rows per eight channels would read wide rows (256
 * channels and more) from memory twice. */
void nconv_f32_chsum__avx2(int64_t rows, int64_t cols, const float *x, int64_t ld, double *lane, int64_t ls) {
    int64_t rb = (128 << 10) / (int64_t)sizeof(float) / (ld > 0 ? ld : 1);
    rb = rb < 4 ? 4 : rb - rb % 4;
    for (int64_t r0 = 0; r0 < rows; r0 += rb)
        chsum_rows(rows - r0 < rb ? rows - r0 : rb, cols, x + r0 * ld, ld, lane, ls);
}
