/*
 * f16 <-> f32 conversion, F16C (contract in ../kernels.h): eight lanes per
 * instruction, round to nearest even as the scalar conversion; the tail goes
 * through the portable kernel.
 */
#include "../kernels.h"

#include <immintrin.h>

void nconv_f16_convert__avx2(int64_t n, const void *src, void *dst, int to_f32) {
    int64_t i = 0;
    if (to_f32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        nconv_f16_convert__generic(n - i, s + i, d + i, 1);
    } else {
        const float *s = src;
        uint16_t *d = dst;
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
        nconv_f16_convert__generic(n - i, s + i, d + i, 0);
    }
}
