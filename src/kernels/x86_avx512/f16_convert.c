/*
 * f16 <-> f32 conversion, AVX-512F (contract in ../kernels.h): sixteen lanes
 * per instruction, round to nearest even as the scalar conversion. The tail
 * is converted as one more vector through a small buffer (AVX-512F has no
 * masked 16-bit loads or stores), so short runs, such as the rows of a
 * reduction block, need no scalar loop.
 */
#include "../kernels.h"

#include <immintrin.h>
#include <string.h>

void nconv_f16_convert__avx512(int64_t n, const void *src, void *dst, int to_f32) {
    int64_t i = 0;
    if (to_f32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
        if (i < n) {
            uint16_t t[16] = {0};
            memcpy(t, s + i, sizeof(uint16_t) * (size_t)(n - i));
            const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
            _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)t)));
        }
    } else {
        const float *s = src;
        uint16_t *d = dst;
        for (; i + 16 <= n; i += 16)
            _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
        if (i < n) {
            uint16_t t[16];
            const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
            const __m512 v = _mm512_maskz_loadu_ps(m, s + i);
            _mm256_storeu_si256((__m256i *)t, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
            memcpy(d + i, t, sizeof(uint16_t) * (size_t)(n - i));
        }
    }
}
