/*
 * Micro-kernel contracts (the framework in src/algo/ calls these) and the
 * per-ISA kernel table chosen at run time.
 */
#ifndef NCONV_KERNELS_H
#define NCONV_KERNELS_H

#include <stdint.h>

#include "nconv.h" /* nconv_dtype */

/* C[M x N] = A[M x K] * B[K x N] (+ C when accumulate). A is read through
 * element strides (rsa, csa), so a transposed A costs nothing; B and C are
 * row-major with leading dimensions ldb and ldc. With accumulate == 0, C is
 * never read (it may hold NaN). Used by the im2col algorithm. */
void nconv_f32_gemm__generic(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                             const float *B, int64_t ldb, float *C, int64_t ldc, int accumulate);

/*
 * Indirect GEMM, up to 6 rows x 16 columns (mr <= 6, nc <= 16):
 *   C[r][j] = init[j] (or C[r][j] when init is NULL)
 *             + sum_{t < ks, k < kc} A(t, r)[k] * w[(t * kc + k) * 16 + j]
 * then max(., 0) with NCONV_IGEMM_RELU, where A(t, r) = a[t * 6 + r] + a_off,
 * except that a pointer equal to `zero` (kc zeros) is not offset. Rows >= mr
 * must still point at readable memory; w is packed, 32-byte aligned, with
 * columns >= nc zero; c holds mr row pointers, columns < nc are written.
 * NCONV_IGEMM_STREAM: rows of 16 columns may be written with non-temporal
 * stores (rows 32-byte aligned; the caller fences before the data is read
 * on another thread).
 * NCONV_IGEMM_PREFETCH: a hint that C's rows are evenly spaced and that the
 * next tile's rows follow them (6 x that spacing on); the np kernel may
 * prefetch them for writing. It never changes a result.
 * NCONV_IGEMM_NEXT_A (np kernel, ks == 1): a[6 .. 11] are the next tile's rows; the kernel may
 * fetch their [a_off, a_off + kc) a line of each row at a time while its first panels compute
 * (the lines fetched all at once, before the call, stalled it for want of miss buffers). It
 * never changes a result.
 */
enum {
    NCONV_IGEMM_RELU = 1,
    NCONV_IGEMM_STREAM = 2,
    NCONV_IGEMM_PREFETCH = 4,
    NCONV_IGEMM_BF16 = 8,
    NCONV_IGEMM_NEXT_A = 16
};
/* For the kernels: the six rows of tap row set a (of element type T: float, or uint16_t for bf16
 * pairs) as a0 .. a5, each a_off elements in (a reduction block), the zero row left as it is. */
#define NCONV_IGEMM_ROWS_OF(T, a)                                                                        \
    const T *a0 = (a)[0] == zero ? zero : (a)[0] + a_off, *a1 = (a)[1] == zero ? zero : (a)[1] + a_off;  \
    const T *a2 = (a)[2] == zero ? zero : (a)[2] + a_off, *a3 = (a)[3] == zero ? zero : (a)[3] + a_off;  \
    const T *a4 = (a)[4] == zero ? zero : (a)[4] + a_off, *a5 = (a)[5] == zero ? zero : (a)[5] + a_off;
#define NCONV_IGEMM_ROWS(a) NCONV_IGEMM_ROWS_OF(float, a)
typedef void nconv_f32_igemm_t(int64_t mr, int64_t nc, int64_t kc, int64_t ks, const float *const *a,
                                   int64_t a_off, const float *zero, const float *w, float *const *c,
                                   const float *init, int flags);
typedef nconv_f32_igemm_t *nconv_f32_igemm_fn;

/*
 * np column panels of one tile in one call, as np calls of the kernel above
 * (the same sums, bit for bit): panel q reads w + q * ws, starts from
 * init + q * 16 (from C when init is NULL) and writes columns q * 16 + j of
 * the c rows, j < 16, or j < nc_last in the last panel.
 */
typedef void nconv_f32_igemm_np_t(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                      const float *const *a, int64_t a_off, const float *zero, const float *w,
                                      int64_t ws, float *const *c, const float *init, int flags);
typedef nconv_f32_igemm_np_t *nconv_f32_igemm_np_fn;

/*
 * igemm_np over m rows spaced evenly (pointwise layers: A row i at a + i * lda, C row i at
 * c + i * ldc), six after six, with no row pointers to set up: the sums and stores of igemm_np
 * (one tap, a_off 0, no zero row) on each tile, bit for bit; the last tile has m % 6 rows. With
 * NCONV_IGEMM_NEXT_A each tile's call fetches the next tile's rows.
 */
typedef void nconv_f32_igemm_rows_t(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a, int64_t lda,
                                    const float *w, int64_t ws, float *c, int64_t ldc, const float *init, int flags);
typedef nconv_f32_igemm_rows_t *nconv_f32_igemm_rows_fn;
/* igemm_rows into 16-bit rows c: igemm_np16's sums and narrowing on each tile, bit for bit (init
 * required). */
typedef void nconv_f32_igemm_rows16_t(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                      int64_t lda, const float *w, int64_t ws, uint16_t *c, int64_t ldc,
                                      const float *init, int flags);
typedef nconv_f32_igemm_rows16_t *nconv_f32_igemm_rows16_fn;
/* igemm_rows' body: tile after tile of rows (m, a, lda, c, ldc in scope; C's elements of type T),
 * TILE (igemm_np's call) on its mr_ rows ar_ and cr_ (rows past the last repeat the first: read,
 * never written). */
#define NCONV_IGEMM_ROWS_EACH_TILE(T, TILE)                                                               \
    for (int64_t i_ = 0; i_ < m; i_ += 6) {                                                               \
        const int64_t mr_ = m - i_ < 6 ? m - i_ : 6;                                                      \
        const float *ar_[12]; /* and the next tile's rows, for NCONV_IGEMM_NEXT_A */                     \
        T *cr_[6];                                                                                        \
        for (int64_t r_ = 0; r_ < 6; r_++) {                                                              \
            ar_[r_] = a + (i_ + (r_ < mr_ ? r_ : 0)) * lda, cr_[r_] = c + (i_ + (r_ < mr_ ? r_ : 0)) * ldc; \
            ar_[6 + r_] = a + (i_ + 6 + r_ < m ? i_ + 6 + r_ : i_) * lda;                                 \
        }                                                                                                 \
        TILE;                                                                                             \
    }

/*
 * igemm_np on bf16 A rows and weights, two products of bf16 pairs per step (VDPBF16PS where
 * the CPU has AVX512-BF16), f32 sums: panel q of the c rows gets
 *   init + q * 16 (C when init is NULL) + sum_{t < ks, k < kc} A(t, r)[k] * B_q(t, k)
 * then relu with NCONV_IGEMM_RELU (other flags are ignored). A(t, r) = a[t * 6 + r] + a_off as
 * igemm's (the zero row, kc zeros, not offset), kc even; B_q is packed in pairs of k at
 * w + q * ws: [t][k / 2][16][2], the (k, k + 1) values of each column side by side. Each pair's
 * products are added to the running sum as the instruction does: the sums differ from
 * igemm_np's in rounding (and subnormal bf16 inputs or f32 results may be flushed to zero), well
 * within bf16's precision. Into f32 rows c (c16 NULL), or with c16 narrowed to bf16 rows as
 * convert16 narrows (c NULL, init required).
 */
typedef void nconv_bf16_igemm_np_t(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                   const uint16_t *const *a, int64_t a_off, const uint16_t *zero, const uint16_t *w,
                                   int64_t ws, float *const *c, uint16_t *const *c16, const float *init, int flags);
typedef nconv_bf16_igemm_np_t *nconv_bf16_igemm_np_fn;

/*
 * igemm_np into 16-bit rows: the same sums, bit for bit, narrowed as they are stored (as
 * convert16 narrows: round to nearest even, NaN kept quiet) to bf16 with NCONV_IGEMM_BF16, else
 * to f16. init is required (the whole reduction in one call); NCONV_IGEMM_RELU applies, the
 * store hints (STREAM, PREFETCH) are not taken.
 */
typedef void nconv_f32_igemm_np16_t(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                        const float *const *a, int64_t a_off, const float *zero, const float *w,
                                        int64_t ws, uint16_t *const *c, const float *init, int flags);
typedef nconv_f32_igemm_np16_t *nconv_f32_igemm_np16_fn;

/*
 * The same reduction for a whole tile of 6 rows and np column panels (as
 * igemm_np: weights w + q * ws, init + q * 16), stored to planes: row r,
 * column j of panel q goes to c[(q * 16 + j) * ldc + r] (6 consecutive pixels
 * of a channel's plane: NCHW output without a layout change), j < 16, or
 * j < nc_last in the last panel. init is required (no accumulation);
 * NCONV_IGEMM_RELU applies. Each panel has the sums of a call for it alone.
 */
typedef void nconv_f32_igemm_planes_t(int64_t np, int64_t nc_last, int64_t kc, int64_t ks, const float *const *a,
                                          int64_t a_off, const float *zero, const float *w, int64_t ws, float *c,
                                          int64_t ldc, const float *init, int flags);
typedef nconv_f32_igemm_planes_t *nconv_f32_igemm_planes_fn;

/*
 * GEMM with indirect B rows, up to 6 x 16:
 *   C[r][j] (+)= sum_{k < kc} a[k * 6 + r] * b[k][boff + j]       (r < mr, j < nc)
 * Only columns < nc of each B row are read; with accumulate == 0, C is not read.
 */
typedef void nconv_f32_gemm_ib_t(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *const *b,
                                     int64_t boff, float *c, int64_t ldc, int accumulate);
typedef nconv_f32_gemm_ib_t *nconv_f32_gemm_ib_fn;
/* np column panels in one call, as np calls of the kernel above (the same
 * sums, bit for bit): panel q reads columns boff + q * bs + j of the B rows
 * and writes c + q * 16 + j, j < 16, or j < nc_last in the last panel. A is
 * read as a[k * lda + r] (lda 6: packed; otherwise rows of a matrix, which
 * may overlap: lda < 6 is allowed). flags: NCONV_GEMM_ACCUMULATE (C is read
 * and added to), else rinit[r] starts row r's sums where rinit is not NULL
 * (the same bits as C holding rinit[r] and accumulating); NCONV_GEMM_FETCH_B:
 * B rows read from memory once (activation planes) have the columns of the
 * panels after the current ones fetched while it is reduced (x86 kernels). */
typedef void nconv_f32_gemm_ib_np_t(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                        int64_t lda, const float *const *b, int64_t boff, int64_t bs, float *c, int64_t ldc,
                                        const float *rinit, int flags);
typedef nconv_f32_gemm_ib_np_t *nconv_f32_gemm_ib_np_fn;

/* The same with up to 7 rows (mr <= 7, A read as a[k * lda + r] for r < 7), for tile rows that
 * come in sevens (W-folded 7-tap thin inputs); NULL in tables without one. gemm_ib9_np: up to 9
 * rows (r < 9 read), for rows in nines (3 taps of 3 channels). */

/*
 * Packed GEMM, up to 6 x 16 (the BLIS micro-kernel):
 *   C[r][j] = init + sum_{k < kc} a[k * 6 + r] * b[k * 16 + j], then max(., 0) with NCONV_GEMM_RELU,
 * where init is C[r][j] with NCONV_GEMM_ACCUMULATE, else rinit[r] (0 when
 * rinit is NULL). b is 32-byte aligned; rows r < mr, columns j < nc are written.
 * NCONV_GEMM_STREAM: f32 rows of 16 columns may be written with non-temporal
 * stores where c and ldc keep the kernel's vectors aligned (the kernel checks);
 * the caller fences (_mm_sfence) before they are read.
 */
enum {
    NCONV_GEMM_ACCUMULATE = 1,
    NCONV_GEMM_RELU = 2,
    NCONV_GEMM_BF16 = 4,
    NCONV_GEMM_STREAM = 8,
    NCONV_GEMM_FETCH_B = 16 /* gemm_ib_np only */
};
typedef void nconv_f32_gemm_t(int64_t mr, int64_t nc, int64_t kc, const float *a, const float *b, float *c,
                                  int64_t ldc, const float *rinit, int flags);
typedef nconv_f32_gemm_t *nconv_f32_gemm_fn;
/* np column panels in one call, as np calls of the kernel above (the same
 * sums, bit for bit): panel q reads b + q * bs and writes c + q * 16 + j,
 * j < 16, or j < nc_last in the last panel. A is read as a[k * lda + r]
 * (lda 6: packed; larger: rows of a matrix whose k-th row holds the six). */
typedef void nconv_f32_gemm_np_t(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a, int64_t lda,
                                     const float *b, int64_t bs, float *c, int64_t ldc, const float *rinit, int flags);
typedef nconv_f32_gemm_np_t *nconv_f32_gemm_np_fn;
/* gemm_np into 16-bit C: the same sums, bit for bit, narrowed as they are stored (as convert16
 * narrows) to bf16 with NCONV_GEMM_BF16, else to f16; from rinit (no NCONV_GEMM_ACCUMULATE). */
typedef void nconv_f32_gemm_np16_t(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, const float *a, int64_t lda,
                                       const float *b, int64_t bs, uint16_t *c, int64_t ldc, const float *rinit,
                                       int flags);
typedef nconv_f32_gemm_np16_t *nconv_f32_gemm_np16_fn;

/*
 * Packed f64 GEMM, one full tile of NCONV_F64_MR rows x nr columns, nr the table's f64_nr
 * (8 or 16, the ISA's vector width twice):
 *   C[r][j] = init + sum_{k < kc} a[k * NCONV_F64_MR + r] * b[k * nr + j],  r < 6, j < nr,
 * in f64, k in order, where init is C[r][j] when accumulate, else 0 (C is then not read).
 * a and b are packed and 64-byte aligned. Partial tiles are the caller's (a scratch tile).
 */
enum { NCONV_F64_MR = 6 };
typedef void nconv_f64_gemm_t(int64_t kc, const double *a, const double *b, double *c, int64_t ldc, int accumulate);
typedef nconv_f64_gemm_t *nconv_f64_gemm_fn;

/*
 * Depthwise on channel-blocked rows (src/algo/depthwise.c). A block is cw channels (a whole number
 * of the table's dw_vl lanes); a row holds columns of them, cs floats apart (cs >= cw). Output
 * pixel i's tap t in row r reads the column at rows[r] + toff[t] + i * step * cs.
 * dwtile: for i < n, c < nc:
 *   out[i * os + c] = act(init[c] + sum_{r < nr, t < nt} rows[r][toff[t] + i * step * cs + c] * w[r][t * ws + c]),
 *   summed in the order r, t; act = max(., 0) with NCONV_DW_RELU in flags (NaN stays NaN). Lanes
 *   nc .. cw of out are not written; nr or nt 0 writes act(init). NCONV_DW_STREAM: where out and
 *   os keep each vector aligned to its size, whole vectors may be written with non-temporal
 *   stores, where the kernel writes whole lines of a pixel at once (the caller fences before the
 *   data is read on another thread).
 * dwtile_bw: for c < cw, r < nr, t < nt:
 *   acc[(r * nt + t) * cw + c] += sum_{i < n} dy[i * cw + c] * rows[r][toff[t] + i * step * cs + c],
 *   the pixels summed in an order of the kernel's own (the same for every call), then added to acc;
 *   and where db is not NULL (nr >= 1), the bias gradient's: db[c] += sum_{i < n} dy[i * cw + c].
 * Every lane of every column read is readable; lanes past the channels only feed lanes that are
 * not stored or not used.
 */
enum { NCONV_DW_RELU = 1, NCONV_DW_STREAM = 2 };
typedef void nconv_f32_dwtile_t(int64_t cw, int64_t cs, int64_t step, int64_t n, int64_t nr,
                                    const float *const *rows, const float *const *w, int64_t ws, int64_t nt,
                                    const int64_t *toff, const float *init, float *out, int64_t os, int64_t nc,
                                    int flags);
typedef nconv_f32_dwtile_t *nconv_f32_dwtile_fn;
typedef void nconv_f32_dwtile_bw_t(int64_t cw, int64_t cs, int64_t step, int64_t n, int64_t nr,
                                       const float *const *rows, int64_t nt, const int64_t *toff, const float *dy,
                                       float *acc, float *db);
typedef nconv_f32_dwtile_bw_t *nconv_f32_dwtile_bw_fn;
/*
 * Depthwise on planes (src/algo/depthwise_planes.c): m <= 8 output rows of one channel's plane,
 * the same weights for each, output row r's tap row a reading row rows[r * rs + a * rd] (rs, rd
 * >= 1: rows that several output rows share are listed once), pixel i of a tap at position
 * toff[b] + i * step of it (step 1 or 2): for r < m, i < n,
 *   y[r * ys + i] = act(init + sum_{a < nr, b < nk} w[a * nk + b] * R(r * rs + a * rd, toff[b] + i * step)),
 * where R(j, x) = rows[j][x] for 0 <= x < len and 0 elsewhere (not read there; toff may be
 * negative), summed in an order of the kernel's own for each m; act = max(., 0) when relu (NaN
 * stays NaN). Within [0, len), a row is readable at toff[b] + i for i < (n rounded up to a
 * multiple of 16) * step; y is written for i < n only. rows[u .. u + ahead), u = (m - 1) rs +
 * (nr - 1) rd + 1, are rows of a later call that the kernel may fetch as it goes, a line of each
 * per vector of pixels (fetched all at once before the call, they stalled it for want of miss
 * buffers): a hint.
 */
typedef void nconv_f32_dwrow_t(int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs, int64_t rd,
                                   int64_t nk, const int64_t *toff, int64_t step, int64_t len, const float *w,
                                   float init, float *y, int64_t ys, int relu, int64_t ahead);
typedef nconv_f32_dwrow_t *nconv_f32_dwrow_fn;
/*
 * dwrow_bw, dwrow's weight gradient over nq images of one channel: image q's m rows of dy at
 * dy + q * dyq (row r at + r * dys, pixels i < n) and its source rows at rows[j] + q * xq (rows[j]
 * NULL: a row of zeros, nothing read); output row r's tap row a reads source row j = r * rs + a * rd,
 * pixel i of tap b at toff[b] + i * step of it (step 1 or 2): for a < nr, b < nk,
 *   acc[a * nk + b] += sum_{q < nq, r < m, i < n} dy_q[r * dys + i] * R_q(r * rs + a * rd, toff[b] + i * step),
 * R as in dwrow (0 outside [0, len), nothing read there), the products summed in an order of the
 * kernel's own (the same for every call) and then added to acc; db not NULL: *db += the sum of
 * those dy. Every product of the sum is taken, those with R's zeros too (an infinite dy times the
 * padding is NaN, as in the reference), and none past n.
 */
typedef void nconv_f32_dwrow_bw_t(int64_t nq, int64_t m, int64_t n, int64_t nr, const float *const *rows, int64_t rs,
                                  int64_t rd, int64_t xq, int64_t nk, const int64_t *toff, int64_t step, int64_t len,
                                  const float *dy, int64_t dys, int64_t dyq, float *acc, float *db);
typedef nconv_f32_dwrow_bw_t *nconv_f32_dwrow_bw_fn;
/*
 * Depthwise on flattened planes (src/algo/depthwise_flat.c), where an output plane has the
 * source's shape (stride 1): nch channels, channel c's source plane at x + c * xs, its output
 * plane at y + c * ys (n pixels each), its weights at w + c * nt: for c < nch, f < n,
 *   y[c * ys + f] = act(init[c] + sum_{t < nt} w[c * nt + t] * X_c(f, t)),
 * X_c(f, t) = x[c * xs + f + off[t]] where bit f % 16 of mask[(f / 16) * nt + t] is set (taps that
 * leave the plane have it clear), else 0 and nothing read there; summed in tap order; init NULL:
 * 0; act = max(., 0) when relu (NaN stays NaN). Every product of the sum is taken, those with
 * the zeros too (a non-finite weight times the padding is NaN, as in the reference).
 */
typedef void nconv_f32_dwflat_t(int64_t nch, int64_t n, int64_t nt, const int64_t *off, const uint16_t *mask,
                                const float *x, int64_t xs, const float *w, const float *init, float *y, int64_t ys,
                                int relu);
typedef nconv_f32_dwflat_t *nconv_f32_dwflat_fn;
/*
 * dwflat_bw, dwflat's weight gradient over nq images: channel c of image q has its dy plane at
 * dy + q * dyq + c * dys and its source plane at x + q * xq + c * xs (n pixels each): for c < nch,
 * t < nt,
 *   acc[c * nt + t] += sum_{q < nq, f < n} dy_qc[f] * X_qc(f, t),
 * X as in dwflat (0 where the mask bit is clear, nothing read there), the products summed in an
 * order of the kernel's own (the same for every call) and then added to acc; db not NULL:
 * db[c] += the sum of those dy. Every product of the sum is taken, those with the zeros too (an
 * infinite dy times the padding is NaN, as in the reference).
 */
typedef void nconv_f32_dwflat_bw_t(int64_t nch, int64_t nq, int64_t n, int64_t nt, const int64_t *off,
                                   const uint16_t *mask, const float *x, int64_t xs, int64_t xq, const float *dy,
                                   int64_t dys, int64_t dyq, float *acc, float *db);
typedef nconv_f32_dwflat_bw_t *nconv_f32_dwflat_bw_fn;
/* For the vector dwtile kernels: 3, 5 or 7 taps one column apart at pixel step 1 or 2 (the shapes
 * with code of their own), their count; else 0. */
static inline int64_t nconv__dw_reuse_taps(int64_t nt, const int64_t *toff, int64_t cs, int64_t step) {
    if ((nt != 3 && nt != 5 && nt != 7) || step > 2) return 0;
    for (int64_t t = 1; t < nt; t++)
        if (toff[t] != toff[0] + t * cs) return 0;
    return nt;
}

/*
 * Backward-weights of small groups (q = input = output channels per group,
 * q in {2, 4, 8}), channels as the vector dimension: 8 channels (8 / q whole
 * groups) per call. For l < 8, t < nt (<= 3), o0 <= o < o0 + no (no <= 4):
 *   acc[t * ats + (o - o0) * 8 + l] += sum_{i < n} dy[i * dys + (l / q) * q + o] * x[t][i * xs + l]
 * i.e. dw[group][o][l % q][tap t] of the 8 channels. dy and x[t] point at
 * the block's first channel; a zero tap is a pointer to 8 zeros with xs 0.
 */
typedef void nconv_f32_gbw_t(int64_t n, int64_t q, int64_t o0, int64_t no, int64_t nt, const float *dy,
                                 int64_t dys, const float *const *x, int64_t xs, float *acc, int64_t ats);
typedef nconv_f32_gbw_t *nconv_f32_gbw_fn;

/*
 * Forward (and stride-1 backward-data) of small groups, 8 channels (8 / q
 * groups) per call, over n pixels: for l < 8, i < n,
 *   dst[i * ds + l] = act(init[l] (or 0) + sum_{t < ks, j < q} w[(t * q + j) * 8 + l] * src[t][i * ss + (l / q) * q + j])
 * src[t] points at tap t's 8 channels for pixel 0; taps share the pixel
 * stride ss, so a tap of padding points at zeros as long as the run. */
typedef void nconv_f32_gfwd_t(int64_t n, int64_t q, int64_t ks, const float *const *src, int64_t ss,
                                  const float *w, const float *init, float *dst, int64_t ds, int relu);
typedef nconv_f32_gfwd_t *nconv_f32_gfwd_fn;

/*
 * Direct convolution of few input channels (src/algo/stem.c), output channels as the vector
 * dimension, over a run of n output pixels: tap t of pixel i reads x[xo[t] + i * xs], its
 * weights for the O output channels are w[wo[t] .. wo[t] + O):
 *   y[i * ys + o] = act(init[o] + sum_{t < nt} x[xo[t] + i * xs] * w[wo[t] + o])   (i < n, o < O),
 * summed in tap order; act = max(., 0) with NCONV_STEM_RELU (NaN stays NaN). w + wo[t] is
 * 64-byte aligned, and it and init are readable up to O rounded up to 16 (those lanes feed
 * nothing stored). NCONV_STEM_STREAM: whole vectors that lie aligned in y may be written with
 * non-temporal stores (the caller fences before the data is read on another thread).
 */
enum { NCONV_STEM_RELU = 1, NCONV_STEM_STREAM = 2 };
typedef void nconv_f32_stem_t(int64_t n, int64_t O, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                              const float *w, const int64_t *wo, const float *init, float *y, int64_t ys, int flags);
typedef nconv_f32_stem_t *nconv_f32_stem_fn;

/*
 * The same on NCHW planes, pixels as the vector dimension: a row of n output pixels of each of
 * the O output channels, over nr source rows and nk taps along them. Tap k of source row r reads
 * the run that starts at rows[r] + koff[k] (a row of its own, as the columns of one phase of a
 * strided row are), at toff[k] + i for pixel i, zero outside [0, tlen[k]) (not read there; toff
 * may be negative), with the weights at w + wo[r] + k * ws (as stem's: O of them, readable up to
 * O rounded up to 16):
 *   y[o * ys + i] = act(init[o] + sum_{k < nk, r < nr} w[wo[r] + k * ws + o] * R_rk(toff[k] + i)),
 * summed in the order k, r; flags as stem's. Positions and lengths fit in 32 bits.
 */
typedef void nconv_f32_stem_planes_t(int64_t n, int64_t O, int64_t nr, const float *const *rows, const float *w,
                                     const int64_t *wo, int64_t nk, const int64_t *koff, const int64_t *toff,
                                     const int64_t *tlen, int64_t ws, const float *init, float *y, int64_t ys,
                                     int flags);
typedef nconv_f32_stem_planes_t *nconv_f32_stem_planes_fn;

/* Memory a kernel brings into the cache while it computes (its caller's next operands): rows
 * of len floats, stride apart, from p (NULL: none). */
typedef struct nconv_lines {
    const float *p;
    int64_t rows, len, stride;
} nconv_lines;

/* A kernel's walk over such lines, a line a step (next: one prefetch). */
typedef struct nconv_ahead {
    const char *at, *end, *row;
    int64_t rows, len, stride; /* bytes */
} nconv_ahead;
static inline void nconv__ahead_row(nconv_ahead *a) {
    a->at = (const char *)((uintptr_t)a->row & ~(uintptr_t)63), a->end = a->row + a->len;
}
static inline nconv_ahead nconv__ahead_start(const nconv_lines *l) {
    nconv_ahead a = {NULL, NULL, NULL, 0, 0, 0};
    if (!l || !l->p || l->rows <= 0 || l->len <= 0) return a;
    a.row = (const char *)l->p, a.rows = l->rows;
    a.len = l->len * (int64_t)sizeof(float), a.stride = l->stride * (int64_t)sizeof(float);
    nconv__ahead_row(&a);
    return a;
}
static inline void nconv__ahead_next(nconv_ahead *a) {
    if (!a->at) return;
    __builtin_prefetch(a->at);
    a->at += 64;
    if (a->at < a->end) return;
    if (--a->rows > 0) a->row += a->stride, nconv__ahead_row(a);
    else a->at = NULL;
}

/*
 * stem's backward-weights over a run of n output pixels, with stem's taps (tap t of pixel i reads
 * x[xo[t] + i * xs]) and the pixels' rows of dy, op output channels each (a multiple of 16):
 *   acc[ao[t] + o] += sum_{i < n} x[xo[t] + i * xs] * dy[i * ds + o]   (t < nt, o < op),
 * each sum formed over i in order, then added; with db (else NULL) db[o] += sum_i dy[i * ds + o],
 * pixel i summed into partial sum i % 4 in order, then (s0 + s1) + (s2 + s3) added. acc + ao[t]
 * and db are 64-byte aligned. The lines of `ahead` are prefetched a line per pixel of each pass (a
 * burst of them would stall the loads).
 */
typedef void nconv_f32_stem_bw_t(int64_t n, int64_t op, int64_t nt, const float *x, const int64_t *xo, int64_t xs,
                                 const float *dy, int64_t ds, float *acc, const int64_t *ao, float *db,
                                 const nconv_lines *ahead);
typedef nconv_f32_stem_bw_t *nconv_f32_stem_bw_fn;

/* The column phases of a row of n elements at step s (stem_planes' source rows at a stride):
 * dst[q * ld + i] = src[i * s + q] for q < s, i * s + q < n. */
typedef void nconv_f32_phases_t(int64_t n, int64_t s, const float *src, float *dst, int64_t ld);
typedef nconv_f32_phases_t *nconv_f32_phases_fn;

/* dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols. transpose_stream: the same, each
 * dst row written from start to end, its whole cache lines with non-temporal stores (the caller
 * fences before others read dst; portable C: the plain transpose). */
typedef void nconv_f32_transpose_t(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst,
                                       int64_t ldd);
typedef nconv_f32_transpose_t *nconv_f32_transpose_fn;

/*
 * Winograd F(4x4, 3x3) transforms (src/algo/winograd.c), channels as the
 * vector dimension; tile position xi = 6 * i + j is xs floats apart.
 * in:  dst[xi * xs + c] = (B^T d B)[i][j] with d[i][j] = src[6 * i + j][c], c < n;
 *      poison[c % 8] += s - s for some s that is Inf or NaN whenever any input is
 *      (a lane of poison turns NaN: the caller's sign to use direct convolution).
 * out: dst[4 * i + j][c] = act(init[c] (or 0) + (A^T m A)[i][j]) with
 *      m[i][j] = m[(6 * i + j) * xs + c], c < n; a NULL dst[4 * i + j] is skipped.
 * w:   dst[xi * xs + l] = (G g G^T)[i][j] with g[kh][kw] = g[(3 * kh + kw) * 16 + l], l < 16.
 * Backward-weights, dw = G^T (sum over tiles of (A dY A^T) * V) G:
 * dy:    dst[xi * xs + c] = (A dY A^T)[i][j] with dY[i][j] = src[4 * i + j][c] (a NULL src[..] is
 *        zeros), c < n; poison as for in.
 * wgrad: dst[(3 * kh + kw) * ds + c] = (G^T S G)[kh][kw] with S[i][j] = s[(6 * i + j) * xs + c], c < n,
 *        plus s2[(6 * i + j) * xs + c] (one float addition) when s2 is not NULL.
 * in16, dy16: in and dy of 16-bit storage (bf16 when bf16 != 0, else f16) widened as they are
 *        loaded: the same results, bit for bit, as in and dy on the widened values.
 */
typedef void nconv_f32_wino_in_t(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison);
typedef nconv_f32_wino_in_t *nconv_f32_wino_in_fn;
typedef void nconv_f32_wino_out_t(int64_t n, const float *m, int64_t xs, const float *init, float *const *dst,
                                      int relu);
typedef nconv_f32_wino_out_t *nconv_f32_wino_out_fn;
typedef void nconv_f32_wino_w_t(const float *g, float *dst, int64_t xs);
typedef nconv_f32_wino_w_t *nconv_f32_wino_w_fn;
typedef void nconv_f32_wino_dy_t(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison);
typedef nconv_f32_wino_dy_t *nconv_f32_wino_dy_fn;
typedef void nconv_f32_wino_in16_t(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs,
                                   float *poison);
typedef nconv_f32_wino_in16_t *nconv_f32_wino_in16_fn;
typedef void nconv_f32_wino_dy16_t(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs,
                                   float *poison);
typedef nconv_f32_wino_dy16_t *nconv_f32_wino_dy16_fn;
typedef void nconv_f32_wino_wgrad_t(int64_t n, const float *s, const float *s2, int64_t xs, float *dst, int64_t ds);
typedef nconv_f32_wino_wgrad_t *nconv_f32_wino_wgrad_fn;

/*
 * Dot products of pixel rows, for 1x1 backward-weights on channel planes: for o < no (<= 6) and
 * c < nc (<= 4), over images j < nimg and pixels i < len,
 *   part[(o * 4 + c) * 16 + l] += dy[j * dyn + o * dyc + i] * x[j * xn + c * xc + i]
 * summed over the pixels the kernel gives lane l (its own split: only the sum of a partial's 16
 * lanes is the dot product), and when db is not NULL (then nc <= 3), db[o * 16 + l] adds dy's
 * values the same way. Other entries stay untouched. The partial sums stay in memory between
 * calls: a tile's run over many pixels takes no horizontal sum.
 */
typedef void nconv_f32_dot_t(int64_t nimg, int64_t len, const float *dy, int64_t dyc, int64_t dyn, int64_t no,
                             const float *x, int64_t xc, int64_t xn, int64_t nc, float *part, float *db);
typedef nconv_f32_dot_t *nconv_f32_dot_fn;
enum { NCONV_DOT_MR = 6, NCONV_DOT_NC = 4, NCONV_DOT_LANES = 16 };

/* Channel sums in double, four lanes by row mod 4, each adding its rows in order:
 *   lane[(i % 4) * ls + j] += x[i * ld + j]   for i < rows, j < cols. */
typedef void nconv_f32_chsum_t(int64_t rows, int64_t cols, const float *x, int64_t ld, double *lane, int64_t ls);
typedef nconv_f32_chsum_t *nconv_f32_chsum_fn;
/* Conversion of n contiguous elements between a 16-bit storage type (f16, bf16) and f32:
 * to_f32: dst[i] = src[i] exactly; else dst[i] = src[i] rounded to nearest even, overflow to
 * infinity, NaN kept a (quiet) NaN: the library's scalar conversions (tensor.c), bit for bit
 * except for the payload of a NaN. */
typedef void nconv_convert16_t(int64_t n, const void *src, void *dst, int to_f32);
typedef nconv_convert16_t *nconv_convert16_fn;
/* The f32 transpose (dst[j][i] = src[i][j], i < rows, j < cols; strides in elements) between a
 * 16-bit storage type and f32, converted as convert16 does, bit for bit: to_f32: src 16-bit,
 * dst f32; else src f32, dst 16-bit. */
typedef void nconv_transpose16_t(int64_t rows, int64_t cols, const void *src, int64_t lds, void *dst, int64_t ldd,
                                 int to_f32);
typedef nconv_transpose16_t *nconv_transpose16_fn;
/* For the vector kernels: keeps a loaded vector in a register. Compilers otherwise fold the load
 * into each of its FMAs, a load per use, which a kernel built to read each input once defeats. */
#define NCONV_IN_REGISTER(v) __asm__("" : "+v"(v))

/* AVX512_BF16: AVX-512 with the BF16 conversions (and DQ, BW, VL, which every CPU with them has). */
typedef enum nconv_isa {
    NCONV_ISA_GENERIC = 0,
    NCONV_ISA_AVX2 = 1,
    NCONV_ISA_AVX512 = 2,
    NCONV_ISA_AVX512_BF16 = 3
} nconv_isa;
enum { NCONV_ISA_BEST = NCONV_ISA_AVX512_BF16 };

/*
 * Every kernel, one line in the list of its family:
 *   X(slot, type, function, avx2, avx512)
 * puts nconv_<function>__generic (of type nconv_<type>_t) into table slot `slot` of the
 * portable table, and into the AVX2 and AVX-512 tables the function of the ISA those
 * columns name (avx2 or avx512; NONE: the slot is empty, NULL). The AVX512-BF16 table is the
 * AVX-512 one but where that column says avx512_bf16: the AVX-512 function then has a variant
 * built with AVX512-BF16 (its bf16 narrowing in one instruction), which that table takes;
 * avx512_bf16_only: only that table has the kernel (the AVX-512 one: NULL).
 * Kernels live in src/kernels/{generic,x86_avx2,x86_avx512,x86_avx512_bf16}/, a file per
 * kernel or per set of variants of one, named for it (f32_igemm_6x16.c: the tile and its np,
 * np16 and planes variants; f32_wino_4x3.c: the F(4x4, 3x3) transforms). The declarations
 * below, the tables (registry.c), kernel_bench's rows and test_kernels' check of the tables
 * come from these lists: adding a kernel is a line here and its code for each ISA.
 */
#define NCONV_GEMM_KERNELS(X)                                                   \
    X(igemm, f32_igemm, f32_igemm_6x16, avx2, avx512)                           \
    X(igemm_np, f32_igemm_np, f32_igemm_6x16_np, avx2, avx512)                  \
    X(igemm_rows, f32_igemm_rows, f32_igemm_6x16_rows, avx2, avx512)            \
    X(igemm_np16, f32_igemm_np16, f32_igemm_6x16_np16, avx2, avx512_bf16)       \
    X(igemm_rows16, f32_igemm_rows16, f32_igemm_6x16_rows16, avx2, avx512_bf16) \
    X(igemm_planes, f32_igemm_planes, f32_igemm_6x16_planes, avx2, avx512)      \
    X(gemm_ib, f32_gemm_ib, f32_gemm_ib_6x16, avx2, avx512)                     \
    X(gemm_ib_np, f32_gemm_ib_np, f32_gemm_ib_6x16_np, avx2, avx512)            \
    X(gemm, f32_gemm, f32_gemm_6x16, avx2, avx512)                              \
    X(gemm_np, f32_gemm_np, f32_gemm_6x16_np, avx2, avx512)                     \
    X(gemm_np16, f32_gemm_np16, f32_gemm_6x16_np16, avx2, avx512_bf16)          \
    X(gemm_ib7_np, f32_gemm_ib_np, f32_gemm_ib_7x16_np, NONE, avx512)         \
    X(gemm_ib9_np, f32_gemm_ib_np, f32_gemm_ib_9x16_np, NONE, avx512)         \
    X(bf16_igemm_np, bf16_igemm_np, bf16_igemm_6x16_np, NONE, avx512_bf16_only)
#define NCONV_LAYOUT_KERNELS(X)                                                 \
    X(transpose, f32_transpose, f32_transpose, avx2, avx512)                    \
    X(transpose_stream, f32_transpose, f32_transpose_stream, avx2, avx512)      \
    X(chsum, f32_chsum, f32_chsum, avx2, avx512)
#define NCONV_DOT_KERNELS(X)                                                    \
    X(dot, f32_dot, f32_dot_6x4, avx2, avx512)
#define NCONV_DEPTHWISE_KERNELS(X)                                              \
    X(dwtile, f32_dwtile, f32_dwtile, avx2, avx512)                             \
    X(dwtile_bw, f32_dwtile_bw, f32_dwtile_bw, avx2, avx512)                    \
    X(dwrow, f32_dwrow, f32_dwrow, avx2, avx512)                                \
    X(dwrow_bw, f32_dwrow_bw, f32_dwrow_bw, avx2, avx512)                      \
    X(dwflat, f32_dwflat, f32_dwflat, avx2, avx512)                            \
    X(dwflat_bw, f32_dwflat_bw, f32_dwflat_bw, avx2, avx512)
#define NCONV_STEM_KERNELS(X)                                                   \
    X(stem, f32_stem, f32_stem, avx2, avx512)                                   \
    X(stem_planes, f32_stem_planes, f32_stem_planes, avx2, avx512)             \
    X(stem_bw, f32_stem_bw, f32_stem_bw, avx2, avx512)                         \
    X(phases, f32_phases, f32_phases, avx2, avx512)
#define NCONV_GROUPED_KERNELS(X)                                                \
    X(gbw, f32_gbw, f32_gbw, avx2, avx2)                                        \
    X(gfwd, f32_gfwd, f32_gfwd, avx2, avx2)
#define NCONV_WINOGRAD_KERNELS(X)                                               \
    X(wino_in, f32_wino_in, f32_wino_in, avx2, avx512)                          \
    X(wino_out, f32_wino_out, f32_wino_out, avx2, avx512)                       \
    X(wino_w, f32_wino_w, f32_wino_w, avx2, avx2)                               \
    X(wino_dy, f32_wino_dy, f32_wino_dy, avx2, avx512)                          \
    X(wino_wgrad, f32_wino_wgrad, f32_wino_wgrad, avx2, avx2)                   \
    X(wino_in16, f32_wino_in16, f32_wino_in16, avx2, avx512)                    \
    X(wino_dy16, f32_wino_dy16, f32_wino_dy16, avx2, avx512)
#define NCONV_F64_KERNELS(X)                                                    \
    X(f64_gemm, f64_gemm, f64_gemm, avx2, avx512)
#define NCONV_CONVERT_KERNELS(X)                                                \
    X(f16_convert, convert16, f16_convert, avx2, avx512)                        \
    X(bf16_convert, convert16, bf16_convert, avx2, avx512_bf16)                 \
    X(f16_transpose, transpose16, f16_transpose, avx2, avx512)                  \
    X(bf16_transpose, transpose16, bf16_transpose, avx2, avx512)
#define NCONV_KERNELS(X)                                                        \
    NCONV_GEMM_KERNELS(X) NCONV_LAYOUT_KERNELS(X) NCONV_DOT_KERNELS(X)          \
    NCONV_DEPTHWISE_KERNELS(X)                                                  \
    NCONV_GROUPED_KERNELS(X) NCONV_STEM_KERNELS(X) NCONV_WINOGRAD_KERNELS(X)     \
    NCONV_F64_KERNELS(X)                                                        \
    NCONV_CONVERT_KERNELS(X)

/* The function of slot `function` for an ISA column of the lists (NONE: NULL). */
#define NCONV_KERNEL_avx2(function) nconv_##function##__avx2
#define NCONV_KERNEL_avx512(function) nconv_##function##__avx512
#define NCONV_KERNEL_avx512_bf16(function) nconv_##function##__avx512
#define NCONV_KERNEL_avx512_bf16_only(function) NULL
#define NCONV_KERNEL_NONE(function) NULL
/* The function of slot `function` in the AVX512-BF16 table, from the avx512 column. */
#define NCONV_KERNEL_BF16_avx2(function) nconv_##function##__avx2
#define NCONV_KERNEL_BF16_avx512(function) nconv_##function##__avx512
#define NCONV_KERNEL_BF16_avx512_bf16(function) nconv_##function##__avx512_bf16
#define NCONV_KERNEL_BF16_avx512_bf16_only(function) nconv_##function##__avx512_bf16
#define NCONV_KERNEL_BF16_NONE(function) NULL
#define NCONV_DECLARE_avx2(type, function) nconv_##type##_t nconv_##function##__avx2;
#define NCONV_DECLARE_avx512(type, function) nconv_##type##_t nconv_##function##__avx512;
#define NCONV_DECLARE_avx512_bf16_only(type, function) nconv_##type##_t nconv_##function##__avx512_bf16;
#define NCONV_DECLARE_avx512_bf16(type, function) \
    nconv_##type##_t nconv_##function##__avx512;  \
    nconv_##type##_t nconv_##function##__avx512_bf16;
#define NCONV_DECLARE_NONE(type, function)
#define NCONV_DECLARE_KERNEL(slot, type, function, avx2, avx512)                \
    nconv_##type##_t nconv_##function##__generic;                               \
    NCONV_DECLARE_##avx2(type, function) NCONV_DECLARE_##avx512(type, function)
NCONV_KERNELS(NCONV_DECLARE_KERNEL)

/* The kernels of one ISA; the f32 ones share the 6 x 16 tile (gemm_ib7_np: 7 x 16, gemm_ib9_np: 9 x 16). */
#define NCONV_KERNEL_SLOT(slot, type, function, avx2, avx512) nconv_##type##_fn slot;
typedef struct nconv_kernels {
    nconv_isa isa;
    int f64_nr; /* f64_gemm's tile width */
    int dw_vl; /* dwtile's lanes: blocks are whole vectors of them */
    const char *name;
    NCONV_KERNELS(NCONV_KERNEL_SLOT)
} nconv_kernels;

enum { NCONV_MR = 6, NCONV_NR = 16 };

/* The conversion kernel of a 16-bit storage dtype (f16, bf16) in table k; NULL for other dtypes. */
static inline nconv_convert16_fn nconv__convert16(const nconv_kernels *k, nconv_dtype dt) {
    return dt == NCONV_F16 ? k->f16_convert : dt == NCONV_BF16 ? k->bf16_convert : NULL;
}

/* The 16-bit <-> f32 transpose of a 16-bit storage dtype in table k; NULL for other dtypes. */
static inline nconv_transpose16_fn nconv__transpose16(const nconv_kernels *k, nconv_dtype dt) {
    return dt == NCONV_F16 ? k->f16_transpose : dt == NCONV_BF16 ? k->bf16_transpose : NULL;
}

/* The best ISA the CPU has, capped by NCONV_MAX_ISA=generic|avx2|avx512|avx512_bf16 (read
 * once per process, at the first call). */
nconv_isa nconv__detect_isa(void);
/* NCONV_MAX_ISA's value when it names none of those (the library's calls then
 * refuse to run), else NULL. */
const char *nconv__isa_cap_invalid(void);
/* The kernel table for isa (NULL if this build lacks it). */
const nconv_kernels *nconv__kernels_for(nconv_isa isa);
/* nconv__kernels_for(nconv__detect_isa()). */
const nconv_kernels *nconv__kernels(void);
/* Whether bf16 runs on pairs (bf16_igemm_np) with table k: where k has the kernel, but in the
 * AVX512-BF16 table only on AMD's cores, whose VDPBF16PS makes more products per second than the
 * FMAs of f32 (Zen 5: the kernel at 1.76x the f32 FMA peak); Intel's Xeons (family 6, model 207)
 * ran it at half their f32 kernel's rate, bf16 layers up to 2.2x f32's time (BENCHMARKS.md). The
 * portable table keeps them. */
int nconv__bf16_pairs(const nconv_kernels *k);

#endif
