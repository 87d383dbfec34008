/*
 * bf16 <-> f32 conversion, AVX-512F (contract in ../kernels.h): a bf16 is the
 * top half of an f32, so widening is a shift; narrowing rounds to nearest
 * even on the dropped half and keeps NaN quiet, as the scalar conversion,
 * sixteen lanes at a time (avx512_util.h). Each tail is one more vector
 * through a small buffer (AVX-512F has no masked 16-bit loads or stores). The
 * variant built with AVX512-BF16 (../x86_avx512_bf16/) widens here.
 */
#include "../kernels.h"
#include "avx512_util.h"

#include <immintrin.h>
#include <string.h>

void nconv_bf16_convert__avx512(int64_t n, const void *src, void *dst, int to_f32) {
    int64_t i = 0;
    if (to_f32) {
        const uint16_t *s = src;
        float *d = dst;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(d + i, nconv__avx512_widen16(_mm256_loadu_si256((const __m256i *)(s + i)), 1));
        if (i < n) {
            uint16_t t[16] = {0};
            memcpy(t, s + i, sizeof(uint16_t) * (size_t)(n - i));
            const __m512 v = nconv__avx512_widen16(_mm256_loadu_si256((const __m256i *)t), 1);
            _mm512_mask_storeu_ps(d + i, (__mmask16)((1u << (n - i)) - 1), v);
        }
    } else {
        nconv__avx512_narrow_bf16(n, src, dst);
    }
}
