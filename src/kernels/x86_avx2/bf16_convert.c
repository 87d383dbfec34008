/*
 * bf16 <-> f32 conversion, AVX2 (contract in ../kernels.h): a bf16 is the
 * top half of an f32, so widening is a shift; narrowing rounds to nearest
 * even on the dropped half and keeps NaN quiet, as the scalar conversion,
 * sixteen lanes at a time, then eight; the tail goes through the portable kernel.
 */
#include "../kernels.h"
#include "avx2_util.h"

#include <immintrin.h>

void nconv_bf16_convert__avx2(int64_t n, const void *src, void *dst, int to_f32) {
    int64_t i = 0;
    if (to_f32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(d + i, nconv__avx2_widen16(_mm_loadu_si128((const __m128i *)(s + i)), 1));
        nconv_bf16_convert__generic(n - i, s + i, d + i, 1);
    } else {
        const float *s = src;
        uint16_t *d = dst;
        for (; i + 16 <= n; i += 16)
            _mm256_storeu_si256((__m256i *)(d + i),
                                nconv__avx2_to_bf16x2(_mm256_loadu_ps(s + i), _mm256_loadu_ps(s + i + 8)));
        for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(d + i), nconv__avx2_to_bf16(_mm256_loadu_ps(s + i)));
        nconv_bf16_convert__generic(n - i, s + i, d + i, 0);
    }
}
