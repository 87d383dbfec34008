/*
 * The dwrow kernels' dispatch, shared by the ISAs (each defines SHARED_CASE(RS, NR, STEP) and
 * ROWS_CASE(M) first): 7 or 8 rows over 1, 2, 3, 5 or 7 tap rows at row stride 1, or 3, 5 or 7
 * at row stride 2 (pixel step the same), no dilation, at most 8 W taps, have code of their own;
 * other calls go by their row count.
 */
#ifndef NCONV_F32_DWROW_SHAPES_H
#define NCONV_F32_DWROW_SHAPES_H

#define NCONV_DWROW_DISPATCH                       \
    if ((m == 8 || m == 7) && rd == 1 && nk <= 8) { \
        SHARED_CASE(1, 1, 1)                       \
        SHARED_CASE(1, 2, 1)                       \
        SHARED_CASE(1, 3, 1)                       \
        SHARED_CASE(1, 5, 1)                       \
        SHARED_CASE(1, 7, 1)                       \
        SHARED_CASE(2, 3, 2)                       \
        SHARED_CASE(2, 5, 2)                       \
        SHARED_CASE(2, 7, 2)                       \
    }                                              \
    switch (m) {                                   \
        ROWS_CASE(8)                               \
        ROWS_CASE(7)                               \
        ROWS_CASE(6)                               \
        ROWS_CASE(5)                               \
        ROWS_CASE(4)                               \
        ROWS_CASE(3)                               \
        ROWS_CASE(2)                               \
        ROWS_CASE(1)                               \
    default: break;                                \
    }

#endif
