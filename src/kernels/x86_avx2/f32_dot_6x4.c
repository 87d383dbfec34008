/*
 * Dot products of pixel rows, AVX2 + FMA (contract in ../kernels.h). Sixteen
 * registers hold 6 x 2 sums (or 6 of db and 6 of one column) with their x
 * vectors and a row of dy, so the 6 x 4 tile runs as two passes over the call's
 * pixels, each reading its rows again (from L1 when the caller's block fits
 * it). Per pass and 8 pixels: 8 loads for 12 FMAs. Pixel i of a row goes to
 * lane i % 8 (lanes 8-15 of the partials stay untouched).
 */
#include "../kernels.h"
#include "avx2_util.h"

enum { MR = NCONV_DOT_MR, NC = NCONV_DOT_NC, VL = NCONV_DOT_LANES };

/* One vector of pixels at i: full, or the lanes of mask m. */
static inline __attribute__((always_inline)) void step(const float *d, int64_t dyc, const float *xr, int64_t xc,
                                                       int64_t i, __m256i m, int masked, __m256 acc[MR][2],
                                                       __m256 s[MR], const int no, const int nc, const int with_db) {
    __m256 xv[2];
#pragma GCC unroll 2
    for (int c = 0; c < nc; c++)
        xv[c] = masked ? _mm256_maskload_ps(xr + c * xc + i, m) : _mm256_loadu_ps(xr + c * xc + i);
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
        __m256 dv = masked ? _mm256_maskload_ps(d + o * dyc + i, m) : _mm256_loadu_ps(d + o * dyc + i);
        NCONV_IN_REGISTER(dv);
#pragma GCC unroll 2
        for (int c = 0; c < nc; c++)
            acc[o][c] = _mm256_fmadd_ps(dv, xv[c], acc[o][c]);
        if (with_db)
            s[o] = _mm256_add_ps(s[o], dv);
    }
}

/* Columns c0 .. c0 + nc (nc <= 2; with db, 1) of the tile over the call's
 * pixels. */
static inline __attribute__((always_inline)) void pass(int64_t nimg, int64_t len, const float *dy, int64_t dyc,
                                                       int64_t dyn, const float *x, int64_t xc, int64_t xn, float *part,
                                                       float *db, const int no, const int c0, const int nc,
                                                       const int with_db) {
    __m256 acc[MR][2], s[MR];
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
#pragma GCC unroll 2
        for (int c = 0; c < nc; c++)
            acc[o][c] = _mm256_loadu_ps(part + (o * NC + c0 + c) * VL);
        if (with_db)
            s[o] = _mm256_loadu_ps(db + o * VL);
    }
    const int64_t full = len - len % 8;
    const __m256i tail = nconv__avx2_mask(len - full);
    x += c0 * xc;
    for (int64_t j = 0; j < nimg; j++) {
        const float *d = dy + j * dyn, *xr = x + j * xn;
        for (int64_t i = 0; i < full; i += 8)
            step(d, dyc, xr, xc, i, tail, 0, acc, s, no, nc, with_db);
        if (full < len)
            step(d, dyc, xr, xc, full, tail, 1, acc, s, no, nc, with_db);
    }
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
#pragma GCC unroll 2
        for (int c = 0; c < nc; c++)
            _mm256_storeu_ps(part + (o * NC + c0 + c) * VL, acc[o][c]);
        if (with_db)
            _mm256_storeu_ps(db + o * VL, s[o]);
    }
}

/* The passes of a tile: with db, db with column 0, then columns 1-2; else
 * columns 0-1, then 2-3. */
static inline __attribute__((always_inline)) void tile(int64_t nimg, int64_t len, const float *dy, int64_t dyc,
                                                       int64_t dyn, const float *x, int64_t xc, int64_t xn, float *part,
                                                       float *db, const int no, const int nc, const int with_db) {
    if (with_db) {
        pass(nimg, len, dy, dyc, dyn, x, xc, xn, part, db, no, 0, 1, 1);
        if (nc > 1)
            pass(nimg, len, dy, dyc, dyn, x, xc, xn, part, NULL, no, 1, nc - 1, 0);
        return;
    }
    pass(nimg, len, dy, dyc, dyn, x, xc, xn, part, NULL, no, 0, nc < 2 ? nc : 2, 0);
    if (nc > 2)
        pass(nimg, len, dy, dyc, dyn, x, xc, xn, part, NULL, no, 2, nc - 2, 0);
}

#include "../f32_dot_variants.h"

NCONV_DOT_KERNEL(nconv_f32_dot_6x4__avx2)
