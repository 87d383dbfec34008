/*
 * The driver shared by the streaming transposes of each ISA (contract in kernels.h): 16
 * destination rows at a time are transposed into a buffer in L1 by the ISA's plain transpose,
 * then each row is copied out by the ISA's stream_row, non-temporal stores on its whole cache
 * lines and ordinary ones on the partial lines at its ends. A destination row is so written in
 * one pass from start to end without reading its lines first: written tile by tile, as the plain
 * transpose does, each line waited for a read for ownership, and with many rows in flight (the
 * planes of a layer's channels) those reads bounded the copy.
 */
#ifndef NCONV_F32_TRANSPOSE_STREAM_H
#define NCONV_F32_TRANSPOSE_STREAM_H

#include "kernels.h"

enum { NCONV_STREAM_RUN = 256 }; /* destination floats per row and pass: a 16 KiB buffer */

static inline __attribute__((always_inline)) void nconv__transpose_stream(
    int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd, nconv_f32_transpose_fn transpose,
    void (*stream_row)(float *d, const float *s, int64_t n)) {
    _Alignas(64) float buf[16 * NCONV_STREAM_RUN];
    for (int64_t j = 0; j < cols; j += 16) {
        const int64_t nc = cols - j < 16 ? cols - j : 16;
        for (int64_t i0 = 0; i0 < rows; i0 += NCONV_STREAM_RUN) {
            const int64_t ni = rows - i0 < NCONV_STREAM_RUN ? rows - i0 : NCONV_STREAM_RUN;
            transpose(ni, nc, src + i0 * lds + j, lds, buf, NCONV_STREAM_RUN);
            for (int64_t q = 0; q < nc; q++) stream_row(dst + (j + q) * ldd + i0, buf + q * NCONV_STREAM_RUN, ni);
        }
    }
}

#endif
