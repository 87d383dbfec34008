/*
 * Channel sums in double, four lanes by row mod 4, AVX-512. Contract in
 * ../kernels.h. As the AVX2 kernel with sixteen channels a step (a masked
 * step for the last cols % 16): each lane adds its rows in order, so the
 * sums are the portable kernel's bit for bit. The float to double
 * conversions bound the AVX2 kernel (a tenth of a 1x1 backward-weights).
 */
#include "../kernels.h"
#include "avx512_util.h"

#define ADD_ROW(lo, hi, p)                                                                \
    do {                                                                                  \
        const __m512 v_ = _mm512_maskz_loadu_ps(m, p);                                    \
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v_)));             \
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(nconv__avx512_hi(v_)));                   \
    } while (0)

/* Rows r0 .. r0 + n (n a multiple of 4 unless the last) of channels [0, cols). */
static void chsum_rows(int64_t n, int64_t cols, const float *x, int64_t ld, double *lane, int64_t ls) {
    for (int64_t j = 0; j < cols; j += 16) {
        const __mmask16 m = nconv__avx512_mask(cols - j);
        const __mmask8 ml = (__mmask8)(m & 0xff), mh = (__mmask8)(m >> 8);
        double *l0 = lane + j, *l1 = l0 + ls, *l2 = l1 + ls, *l3 = l2 + ls;
        __m512d a0 = _mm512_maskz_loadu_pd(ml, l0), b0 = _mm512_maskz_loadu_pd(mh, l0 + 8);
        __m512d a1 = _mm512_maskz_loadu_pd(ml, l1), b1 = _mm512_maskz_loadu_pd(mh, l1 + 8);
        __m512d a2 = _mm512_maskz_loadu_pd(ml, l2), b2 = _mm512_maskz_loadu_pd(mh, l2 + 8);
        __m512d a3 = _mm512_maskz_loadu_pd(ml, l3), b3 = _mm512_maskz_loadu_pd(mh, l3 + 8);
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
        _mm512_mask_storeu_pd(l0, ml, a0), _mm512_mask_storeu_pd(l0 + 8, mh, b0);
        _mm512_mask_storeu_pd(l1, ml, a1), _mm512_mask_storeu_pd(l1 + 8, mh, b1);
        _mm512_mask_storeu_pd(l2, ml, a2), _mm512_mask_storeu_pd(l2 + 8, mh, b2);
        _mm512_mask_storeu_pd(l3, ml, a3), _mm512_mask_storeu_pd(l3 + 8, mh, b3);
    }
}

/* Blocks of rows (128 KiB, a multiple of 4 rows), as the AVX2 kernel: wide rows are read from memory once. */
void nconv_f32_chsum__avx512(int64_t rows, int64_t cols, const float *x, int64_t ld, double *lane, int64_t ls) {
    int64_t rb = (128 << 10) / (int64_t)sizeof(float) / (ld > 0 ? ld : 1);
    rb = rb < 4 ? 4 : rb - rb % 4;
    for (int64_t r0 = 0; r0 < rows; r0 += rb)
        chsum_rows(rows - r0 < rb ? rows - r0 : rb, cols, x + r0 * ld, ld, lane, ls);
}
