/*
 * Column phases of a strided row, AVX-512 (contract in ../kernels.h): at step 2 (stem_planes'
 * only one), 16 elements of each phase at a time from 32 consecutive ones by two-source
 * permutes; other steps element by element.
 */
#include "../kernels.h"

#include <immintrin.h>

void nconv_f32_phases__avx512(int64_t n, int64_t s, const float *src, float *dst, int64_t ld) {
    int64_t i = 0; /* elements of each phase done */
    if (s == 2) {
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        for (; 2 * i + 32 <= n; i += 16) {
            const __m512 a = _mm512_loadu_ps(src + 2 * i), b = _mm512_loadu_ps(src + 2 * i + 16);
            _mm512_storeu_ps(dst + i, _mm512_permutex2var_ps(a, even, b));
            _mm512_storeu_ps(dst + ld + i, _mm512_permutex2var_ps(a, odd, b));
        }
    }
    for (int64_t q = 0; q < s; q++)
        for (int64_t k = i, j = i * s + q; j < n; k++, j += s) dst[q * ld + k] = src[j];
}
