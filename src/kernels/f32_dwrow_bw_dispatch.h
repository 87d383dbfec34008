/*
 * The dwrow_bw kernels' arguments and dispatch, shared by the ISAs. Each ISA defines
 *   by_source(NA, NB, STEP, RS, a0, g, acc): tap rows a0 .. a0 + NA, all NB taps, output rows RS
 *     source rows apart, the loop over the source rows;
 *   by_output(NB, STEP, a, b0, g, acc): tap row a, taps b0 .. b0 + NB, the loop over the output
 *     rows (any shape);
 *   dy_sum(g): the sum of every dy;
 * then NCONV_DWROW_BW_BODY(NA3, NA5, NA7) in its kernel: output rows 1 or 2 source rows apart,
 * tap rows one apart, with 3, 5 or 7 taps a row, go by the source rows, NA3, NA5 or NA7 tap rows
 * at a time (as many as its registers hold); other shapes go by the output rows.
 */
#ifndef NCONV_F32_DWROW_BW_DISPATCH_H
#define NCONV_F32_DWROW_BW_DISPATCH_H

#include <stdint.h>

typedef struct bw_args {
    int64_t nq, m, n, nr, rs, rd, xq, nk, len, dys, dyq;
    const float *const *rows;
    const int64_t *toff;
    const float *dy;
} bw_args;

/* Every tap row, NA at a time and the rest one at a time. */
#define NCONV_DWROW_BW_SOURCE(NA, NB, STEP, RS)                                     \
    do {                                                                            \
        int64_t a0 = 0;                                                             \
        for (; a0 + NA <= nr; a0 += NA) by_source(NA, NB, STEP, RS, a0, &g, acc);   \
        for (; a0 < nr; a0++) by_source(1, NB, STEP, RS, a0, &g, acc);              \
    } while (0)
#define NCONV_DWROW_BW_SOURCE_RS(NA, NB, STEP)                 \
    do {                                                       \
        if (rs == 1) NCONV_DWROW_BW_SOURCE(NA, NB, STEP, 1);   \
        else NCONV_DWROW_BW_SOURCE(NA, NB, STEP, 2);           \
    } while (0)
/* Any tap row: a row at a time, 4 taps at a time and the rest one at a time. */
#define NCONV_DWROW_BW_OUTPUT(STEP)                                          \
    for (int64_t a = 0; a < nr; a++) {                                       \
        int64_t b0 = 0;                                                      \
        for (; b0 + 4 <= nk; b0 += 4) by_output(4, STEP, a, b0, &g, acc);   \
        for (; b0 < nk; b0++) by_output(1, STEP, a, b0, &g, acc);            \
    }

#define NCONV_DWROW_BW_BODY(NA3, NA5, NA7)                                                       \
    const bw_args g = {nq, m, n, nr, rs, rd, xq, nk, len, dys, dyq, rows, toff, dy};             \
    const int shared = rd == 1 && (rs == 1 || rs == 2);                                          \
    if (shared && nk == 3 && step == 1) NCONV_DWROW_BW_SOURCE_RS(NA3, 3, 1);                     \
    else if (shared && nk == 3) NCONV_DWROW_BW_SOURCE_RS(NA3, 3, 2);                             \
    else if (shared && nk == 5 && step == 1) NCONV_DWROW_BW_SOURCE_RS(NA5, 5, 1);                \
    else if (shared && nk == 5) NCONV_DWROW_BW_SOURCE_RS(NA5, 5, 2);                             \
    else if (shared && nk == 7 && step == 1) NCONV_DWROW_BW_SOURCE_RS(NA7, 7, 1);                \
    else if (shared && nk == 7) NCONV_DWROW_BW_SOURCE_RS(NA7, 7, 2);                             \
    else if (step == 1) {                                                                        \
        NCONV_DWROW_BW_OUTPUT(1)                                                                 \
    } else {                                                                                     \
        NCONV_DWROW_BW_OUTPUT(2)                                                                 \
    }                                                                                            \
    if (db) *db += dy_sum(&g);

#endif
