/*
 * bf16 <-> f32 conversion, AVX2 (contract in ../kernels.h): a bf16 is the
 * top half of an f32, so widening is a shift; narrowing rounds to nearest
 * even on the dropped half and keeps NaN quiet, as the scalar conversion,
 * eight lanes at a time; the tail goes through the portable kernel.
 */
#include "../kernels.h"

#include <immintrin.h>

void nconv_bf16_convert__avx2(int64_t n, const void *src, void *dst, int to_f32) {
    int64_t i = 0;
    if (to_f32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 8 <= n; i += 8) {
            const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
            _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        nconv_bf16_convert__generic(n - i, s + i, d + i, 1);
    } else {
        const float *s = src;
        uint16_t *d = dst;
        const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
        const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
        const __m256i quiet = _mm256_set1_epi32(0x40);
        for (; i + 8 <= n; i += 8) {
            const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(s + i));
            const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
            const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, half), odd), 16);
            const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
            const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet), nan);
            /* 32 -> 16 bits: pack within each 128-bit half, then put the halves in order */
            const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
            _mm_storeu_si128((__m128i *)(d + i), _mm256_castsi256_si128(packed));
        }
        nconv_bf16_convert__generic(n - i, s + i, d + i, 0);
    }
}
