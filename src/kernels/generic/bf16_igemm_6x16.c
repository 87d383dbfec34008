/*
 * Indirect GEMM on bf16 operands, portable C (contract in ../kernels.h): each pair's products
 * added as VDPBF16PS adds them, the odd k first, one rounding each (a product of two bf16 values
 * is exact in f32, so a multiply and an add round once, as a fused multiply-add does).
 */
#include "../../internal.h"
#include "../kernels.h"

#include <string.h>

static float widen(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void nconv_bf16_igemm_6x16_np__generic(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                       const uint16_t *const *a, int64_t a_off, const uint16_t *zero,
                                       const uint16_t *w, int64_t ws, float *const *c, uint16_t *const *c16,
                                       const float *init, int flags) {
    for (int64_t q = 0; q < np; q++) {
        const int64_t nc = q + 1 < np ? NCONV_NR : nc_last;
        float acc[NCONV_MR][NCONV_NR];
        for (int64_t r = 0; r < NCONV_MR; r++)
            for (int64_t j = 0; j < NCONV_NR; j++)
                acc[r][j] = init ? init[q * NCONV_NR + j] : r < mr && j < nc ? c[r][q * NCONV_NR + j] : 0.0f;
        const uint16_t *b = w + q * ws;
        for (int64_t t = 0; t < ks; t++) {
            const uint16_t *row[NCONV_MR];
            for (int64_t r = 0; r < NCONV_MR; r++)
                row[r] = a[t * NCONV_MR + r] == zero ? zero : a[t * NCONV_MR + r] + a_off;
            for (int64_t k = 0; k < kc; k += 2, b += 2 * NCONV_NR) {
                float bw[2][NCONV_NR]; /* the pair's rows of B, k and k + 1 */
                for (int64_t j = 0; j < NCONV_NR; j++) bw[0][j] = widen(b[2 * j]), bw[1][j] = widen(b[2 * j + 1]);
                for (int64_t r = 0; r < NCONV_MR; r++) {
                    const float lo = widen(row[r][k]), hi = widen(row[r][k + 1]);
                    for (int64_t j = 0; j < NCONV_NR; j++) acc[r][j] = acc[r][j] + hi * bw[1][j] + lo * bw[0][j];
                }
            }
        }
        for (int64_t r = 0; r < mr; r++)
            for (int64_t j = 0; j < nc; j++) {
                const float v = (flags & NCONV_IGEMM_RELU) && acc[r][j] < 0 ? 0.0f : acc[r][j]; /* NaN stays */
                if (c16) c16[r][q * NCONV_NR + j] = nconv__f32_to_bf16(v);
                else c[r][q * NCONV_NR + j] = v;
            }
    }
}
