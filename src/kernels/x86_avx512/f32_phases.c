/*
 * Column phases of a strided row, AVX-512 (contract in ../kernels.h): at steps 2 and 4, 16
 * elements of a phase at a time from 32 or 64 consecutive ones by two-source permutes; other
 * steps element by element.
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
    } else if (s == 4) {
        /* phase q of 64 elements: lanes q, q + 4, .. of each pair of vectors, then the halves joined */
        const __m512i lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
        const __m512i join = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        for (; 4 * i + 64 <= n; i += 16) {
            const __m512 a = _mm512_loadu_ps(src + 4 * i), b = _mm512_loadu_ps(src + 4 * i + 16);
            const __m512 c = _mm512_loadu_ps(src + 4 * i + 32), d = _mm512_loadu_ps(src + 4 * i + 48);
            for (int q = 0; q < 4; q++) {
                const __m512i idx = _mm512_add_epi32(lo, _mm512_set1_epi32(q));
                const __m512 h0 = _mm512_permutex2var_ps(a, idx, b), h1 = _mm512_permutex2var_ps(c, idx, d);
                _mm512_storeu_ps(dst + q * ld + i, _mm512_permutex2var_ps(h0, join, h1));
            }
        }
    }
    for (int64_t q = 0; q < s; q++)
        for (int64_t k = i, j = i * s + q; j < n; k++, j += s) dst[q * ld + k] = src[j];
}
