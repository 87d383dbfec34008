/*
 * Dot products of pixel rows, AVX-512 (contract in ../kernels.h). Per 16
 * pixels: the nc vectors of x in registers, then each of the no rows of dy
 * loaded once for its nc FMAs (and its add to db): 6 x 4 sums from 10 loads.
 * The sums (24 vectors, or 18 and db's 6) stay in registers over every image of
 * the call; pixel i of a row goes to lane i % 16. Each (no, nc, db) has code of
 * its own (../f32_dot_variants.h).
 */
#include "../kernels.h"
#include "avx512_util.h"

enum { MR = NCONV_DOT_MR, NC = NCONV_DOT_NC, VL = NCONV_DOT_LANES };

/* One vector of pixels at i: full, or the lanes of mask m. */
static inline __attribute__((always_inline)) void step(const float *d, int64_t dyc, const float *xr, int64_t xc,
                                                       int64_t i, __mmask16 m, int masked, __m512 acc[MR][NC],
                                                       __m512 s[MR], const int no, const int nc, const int with_db) {
    __m512 xv[NC];
#pragma GCC unroll 4
    for (int c = 0; c < nc; c++)
        xv[c] = masked ? _mm512_maskz_loadu_ps(m, xr + c * xc + i) : _mm512_loadu_ps(xr + c * xc + i);
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
        __m512 dv = masked ? _mm512_maskz_loadu_ps(m, d + o * dyc + i) : _mm512_loadu_ps(d + o * dyc + i);
        NCONV_IN_REGISTER(dv);
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++)
            acc[o][c] = _mm512_fmadd_ps(dv, xv[c], acc[o][c]);
        if (with_db)
            s[o] = _mm512_add_ps(s[o], dv);
    }
}

static inline __attribute__((always_inline)) void tile(int64_t nimg, int64_t len, const float *dy, int64_t dyc,
                                                       int64_t dyn, const float *x, int64_t xc, int64_t xn, float *part,
                                                       float *db, const int no, const int nc, const int with_db) {
    __m512 acc[MR][NC], s[MR];
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++)
            acc[o][c] = _mm512_loadu_ps(part + (o * NC + c) * VL);
        if (with_db)
            s[o] = _mm512_loadu_ps(db + o * VL);
    }
    const int64_t full = len - len % VL;
    const __mmask16 tail = nconv__avx512_mask(len - full);
    for (int64_t j = 0; j < nimg; j++) {
        const float *d = dy + j * dyn, *xr = x + j * xn;
        for (int64_t i = 0; i < full; i += VL)
            step(d, dyc, xr, xc, i, 0, 0, acc, s, no, nc, with_db);
        if (tail)
            step(d, dyc, xr, xc, full, tail, 1, acc, s, no, nc, with_db);
    }
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++)
            _mm512_storeu_ps(part + (o * NC + c) * VL, acc[o][c]);
        if (with_db)
            _mm512_storeu_ps(db + o * VL, s[o]);
    }
}

#include "../f32_dot_variants.h"

NCONV_DOT_KERNEL(nconv_f32_dot_6x4__avx512)
