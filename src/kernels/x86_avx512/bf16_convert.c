/*
 * bf16 <-> f32 conversion, AVX-512F (contract in ../kernels.h): a bf16 is the
 * top half of an f32, so widening is a shift; narrowing rounds to nearest
 * even on the dropped half and keeps NaN quiet, as the scalar conversion,
 * sixteen lanes at a time (not VCVTNEPS2BF16, which treats subnormal inputs
 * as zero). The tail is one more vector through a small buffer (AVX-512F has
 * no masked 16-bit loads or stores).
 */
#include "../kernels.h"

#include <immintrin.h>
#include <string.h>

static inline __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m256i narrow(__m512 f) {
    const __m512i x = _mm512_castps_si512(f);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i half = _mm512_add_epi32(x, _mm512_set1_epi32(0x7fff));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(half, odd), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

void nconv_bf16_convert__avx512(int64_t n, const void *src, void *dst, int to_f32) {
    int64_t i = 0;
    if (to_f32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, widen(_mm256_loadu_si256((const __m256i *)(s + i))));
        if (i < n) {
            uint16_t t[16] = {0};
            memcpy(t, s + i, sizeof(uint16_t) * (size_t)(n - i));
            const __m512 v = widen(_mm256_loadu_si256((const __m256i *)t));
            _mm512_mask_storeu_ps(d + i, (__mmask16)((1u << (n - i)) - 1), v);
        }
    } else {
        const float *s = src;
        uint16_t *d = dst;
        for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(d + i), narrow(_mm512_loadu_ps(s + i)));
        if (i < n) {
            uint16_t t[16];
            const __m512 v = _mm512_maskz_loadu_ps((__mmask16)((1u << (n - i)) - 1), s + i);
            _mm256_storeu_si256((__m256i *)t, narrow(v));
            memcpy(d + i, t, sizeof(uint16_t) * (size_t)(n - i));
        }
    }
}
