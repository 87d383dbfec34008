/*
 * Column phases of a strided row, AVX2 (contract in ../kernels.h): at step 2 (stem_planes' only
 * one), 8 elements of each phase at a time from 16 consecutive ones by in-lane shuffles and a
 * lane permute; other steps element by element.
 */
#include "../kernels.h"
#include "avx2_util.h"

void nconv_f32_phases__avx2(int64_t n, int64_t s, const float *src, float *dst, int64_t ld) {
    int64_t i = 0; /* elements of each phase done */
    if (s == 2)
        for (; 2 * i + 16 <= n; i += 8) {
            const __m256 a = _mm256_loadu_ps(src + 2 * i), b = _mm256_loadu_ps(src + 2 * i + 8);
            /* per 128-bit lane: a0 a2 b0 b2 | a4 a6 b4 b6, then the 64-bit quarters reordered */
            const __m256 ev = _mm256_shuffle_ps(a, b, 0x88), od = _mm256_shuffle_ps(a, b, 0xdd);
            _mm256_storeu_ps(dst + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8)));
            _mm256_storeu_ps(dst + ld + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xd8)));
        }
    for (int64_t q = 0; q < s; q++)
        for (int64_t k = i, j = i * s + q; j < n; k++, j += s) dst[q * ld + k] = src[j];
}
