/*
 * igemm's backward-weights: dw[o][c][t] = sum_p dy[p][o] * x[pix(p, t)][c], a
 * GEMM per tap reduced over pixels in blocks (dy^T packed, input rows read in
 * place; for thin input channels the other way round), threads owning dw
 * tiles or pixel chunks. See igemm.c for the algorithm.
 */
#include "igemm.h"

#include <string.h>

typedef struct bw_ctx {
    const nconv_core *c;
    geo g;
    const nconv_kernels *k;
    const float *x, *dy, *zero;
    const nconv_view *dy_planes; /* with bw_swap: dy read from its NCHW planes (dy NULL), see bw_task */
    const uint16_t *x16, *dy16;  /* 16-bit channels-last x and dy (x, dy NULL), widened a block at a time */
    nconv_convert16_fn cv;
    float *acc; /* per chunk: [G][taps][Og][width], or [G][taps][width][Og] when g.bw_swap (see bw_task) */
    /* db's channel-sum lanes (see nconv_exec) of chunk 0, and of chunks 1.. (4 * O doubles each);
     * NULL: not summed here */
    double *lanes, *lanes_more;
    int64_t units, tiles; /* tiles of MR rows per (group, tap) */
    int64_t dwf;          /* floats of one chunk's sums */
    nconv_share *shares;  /* per thread: its pixel chunks (bw_chunks > 1), claimed by nconv__share_claim */
    char *scratch;
    size_t scratch_stride;
} bw_ctx;

/* The db lanes of the pixel chunk ch (NULL when db is not summed here). */
static double *chunk_lanes(const bw_ctx *bc, int64_t ch) {
    if (!bc->lanes) return NULL;
    return ch == 0 ? bc->lanes : bc->lanes_more + (ch - 1) * 4 * bc->c->O;
}

/* lane[(op + i) % 4][j] += rows[i * ld + j] for i < n, j < nch: n rows of one image from its
 * pixel op on, each lane adding its rows in order, as nconv__channel_sums does. */
static void lanes_add(const nconv_kernels *k, double *lane, int64_t ls, const float *rows, int64_t ld, int64_t op,
                      int64_t n, int64_t nch) {
    for (; n > 0 && op % 4; op++, n--, rows += ld) { /* to a row of lane 0 (chsum starts every block there) */
        double *l = lane + op % 4 * ls;
        for (int64_t j = 0; j < nch; j++) l[j] += rows[j];
    }
    if (n > 0) k->chsum(n, nch, rows, ld, lane, ls);
}

/* lane[(p % OS) % 4][ch] += dy[p][ch] for pixels [p0, p0 + n) and channels
 * [ch0, ch0 + nch), dy0 the row of pixel p0 (rows O floats apart): a dy block that packing has
 * just brought to L2 (summing dy apart would read it from memory again). */
static void bias_lanes(const bw_ctx *bc, double *lane, const float *dy0, int64_t p0, int64_t n, int64_t ch0,
                       int64_t nch) {
    const int64_t O = bc->c->O, OS = bc->g.OS;
    for (int64_t p = p0; p < p0 + n;) {
        const int64_t op = p % OS, run = p0 + n - p < OS - op ? p0 + n - p : OS - op; /* within one image */
        lanes_add(bc->k, lane + ch0, O, dy0 + (p - p0) * O + ch0, O, op, run, nch);
        p += run;
    }
}

/* acc[r * ld + o] += 0 * dy(p, o) for r < rows, o < cols, over pixels [p0, p1), dy(p, o) at
 * brow[p][boff + (o / NR) * bs + o % NR]: the products of a row of zero padding, which takes no
 * kernel call. They are zeros but where dy is not finite: NaN, as PyTorch (and the reference)
 * make them; only those are added. */
static void zero_row_products(const float *const *brow, int64_t boff, int64_t bs, int64_t p0, int64_t p1,
                              int64_t cols, float *acc, int64_t rows, int64_t ld) {
    for (int64_t o = 0; o < cols; o++) {
        float f = 0.0f;
        for (int64_t p = p0; p < p1; p++) f += 0.0f * brow[p][boff + o / NR * bs + o % NR];
        for (int64_t r = 0; f != 0.0f && r < rows; r++) acc[r * ld + o] += f; /* f is 0 or NaN */
    }
}

/* Units [u0, u1) (group, tap, tile of MR rows) reduced over pixels
 * [m0, m1), block by block, into acc; with lanes, the tap-0 units' output
 * channels of dy summed into them as well. Rows are output channels: A = dy^T
 * packed once per block and group, B = input rows in place. With bw_swap
 * rows are input columns: A = x^T packed per unit, B = dy rows in place
 * (or dy^T panels from NCHW planes). Per block the pixels are decoded once
 * and input row pointers built once per tap. */
static void bw_range(const bw_ctx *bc, char *scratch, int64_t u0, int64_t u1, int64_t m0, int64_t m1, float *acc,
                     double *lanes) {
    const nconv_core *c = bc->c;
    const geo *g = &bc->g;
    const int swap = g->bw_swap;
    /* With the W fold a tap is (kd, kh) and the columns are its run of KW * Cg floats. */
    const int64_t taps = g->wfold ? g->ks_rows : g->KS, width = g->wfold ? c->k[2] * g->Cg : g->Cg;
    const int64_t rows_n = swap ? width : g->Og, cols_n = swap ? g->Og : width;
    if (u0 >= u1) return;
    const int64_t KC = g->bw_kc;
    /* Swapped, 1x1 f32: whole tiles read x's rows in place (lda C), each k a line apart, which
     * pays for rows up to 1 KiB (256 channels: projections such as 192 to 32 spent as long copying
     * x^T as in the GEMM); longer rows fold onto few L1 sets and lost. The products and sums are
     * those of the packed tiles. */
    const int x_rows = swap && g->pointwise && !bc->x16 && c->C * (int64_t)sizeof(float) <= 1024;
    const int64_t ts = bw_tile_stride(g);
    float *apack = (float *)scratch;                                /* [tiles][KC][MR], ts floats apart */
    const float **xrows = (const float **)(apack + bc->tiles * ts); /* [KC] */
    const float **dyrows = xrows + KC;                              /* [KC] */
    int64_t *pix = (int64_t *)(dyrows + KC);                        /* [4][KC]: image offset, o0, o1, o2 */
    const float **brows = (const float **)(pix + 4 * KC);           /* [KC] rows of bpack */
    float *bpack = (float *)(brows + KC);                           /* [2][KC][NR], or [panels][KC][NR] */
    float *dyblk = bpack + (swap ? g->panels : 2) * NR * KC;        /* 16-bit: the block's dy rows, widened */
    float *xblk = dyblk + KC * c->O + NR;                           /* and x rows (a tap's, or all channels) */
    for (int64_t k = 0; k < KC; k++) brows[k] = bpack + k * NR;
    /* One kernel call per unit, panel pair and block (not W-folded, which goes row by row): the
     * first block's calls write the sums, unzeroed (megabytes for deep layers). */
    const int fresh = !g->wfold && m0 < m1;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t gt = u / bc->tiles, r0 = (u % bc->tiles) * g->bw_mr;
        const int64_t mr = rows_n - r0 < g->bw_mr ? rows_n - r0 : g->bw_mr;
        if (!fresh) memset(acc + (gt * rows_n + r0) * cols_n, 0, sizeof(float) * (size_t)(mr * cols_n));
        /* db's lanes: by the tap-0 units of their channels (swapped: the group's first unit, all of them) */
        const int64_t l0 = swap ? 0 : r0, ln = swap ? g->Og : mr;
        for (int64_t l = 0; l < 4 && lanes && gt % taps == 0 && (!swap || r0 == 0); l++)
            memset(lanes + l * c->O + gt / taps * g->Og + l0, 0, sizeof(double) * (size_t)ln);
    }
    for (int64_t p0 = m0; p0 < m1; p0 += KC) {
        const int64_t kc = m1 - p0 < KC ? m1 - p0 : KC;
        const int add = !fresh || p0 > m0 ? NCONV_GEMM_ACCUMULATE : 0;
        /* Pixels advanced one by one: five divisions each cost conv1's bwd_w about 10%.
         * Pointwise problems need none: input pixel p is output pixel p. */
        pixel px;
        if (!g->pointwise) pixel_of(c, g->OS, p0, &px);
        for (int64_t k = 0; k < kc && !g->pointwise; k++, pixel_next(c, &px)) {
            pix[k] = g->wfold ? px.n : px.n * g->IS * c->C; /* the image, or its offset */
            pix[KC + k] = px.o[0], pix[2 * KC + k] = px.o[1], pix[3 * KC + k] = px.o[2];
        }
        if (bc->dy16) bc->cv(kc * c->O, bc->dy16 + p0 * c->O, dyblk, 1); /* the block's rows are one run */
        if (bc->x16 && g->pointwise) bc->cv(kc * c->C, bc->x16 + p0 * c->C, xblk, 1);
        for (int64_t k = 0; k < kc; k++)
            dyrows[k] = bc->dy16 ? dyblk + k * c->O : bc->dy ? bc->dy + (p0 + k) * c->O : NULL;
        int64_t packed_g = -1;
        /* Units of one (group, tap) share the input rows of the tap: take them as a run. */
        for (int64_t u = u0; u < u1;) {
            const int64_t gt = u / bc->tiles, gi = gt / taps, t = gt % taps;
            const int64_t run_end = (gt + 1) * bc->tiles < u1 ? (gt + 1) * bc->tiles : u1;
            if (!swap && gi != packed_g) { /* dy^T: apack[ot][k][r] = dy[p0 + k][gi * Og + ot * MR + r] */
                /* Only the tiles of this thread's units of the group (all once they span a tap):
                 * with few taps (1x1) every thread packing them all would not scale. */
                const int64_t ua = u > gi * taps * bc->tiles ? u : gi * taps * bc->tiles;
                const int64_t ub = u1 < (gi + 1) * taps * bc->tiles ? u1 : (gi + 1) * taps * bc->tiles;
                int64_t t_lo = ua % bc->tiles, t_hi = (ub - 1) % bc->tiles + 1;
                if (ub - ua >= bc->tiles || t_lo >= t_hi) t_lo = 0, t_hi = bc->tiles;
                /* Pixel by pixel, so each dy row is read once (rows are O floats apart). */
                const int64_t full = g->Og / MR < t_hi ? g->Og / MR : t_hi;
                for (int64_t k = 0; k < kc; k++) {
                    const float *src = dyrows[k] + gi * g->Og;
                    /* dy streams from memory (megabytes, read once per block): its rows are
                     * fetched ahead of the copy. */
                    if (k + 8 < kc)
                        for (int64_t o = t_lo * MR; o < t_hi * MR; o += 16)
                            __builtin_prefetch(dyrows[k + 8] + gi * g->Og + o);
                    for (int64_t o = t_lo > g->bw_dy_rows ? t_lo : g->bw_dy_rows; o < full; o++)
                        memcpy(apack + o * ts + k * MR, src + o * MR, sizeof(float) * MR);
                    if (full < t_hi) {
                        float *d = apack + full * ts + k * MR;
                        for (int64_t r = 0; r < MR; r++) d[r] = full * MR + r < g->Og ? src[full * MR + r] : 0.0f;
                    }
                }
                packed_g = gi;
            }
            if (lanes && t == 0 && !swap) {
                const int64_t ch0 = (u % bc->tiles) * MR, ch1 = (run_end - 1) % bc->tiles * MR + MR;
                bias_lanes(bc, lanes, dyrows[0], p0, kc, gi * g->Og + ch0, (ch1 < g->Og ? ch1 : g->Og) - ch0);
            }
            if (g->wfold) { /* rows into the W-padded copy [g][n][i0][i1][jw][c] at the run's start */
                /* Every loop bound in a local: the stores to xrows kept the compiler reloading them. */
                const int64_t in0 = c->in[0], in1 = c->in[1], s0 = c->s[0], s1 = c->s[1], Cg = g->Cg;
                const int64_t h0 = (t / c->k[1]) * c->d[0] - c->pb[0], h1 = (t % c->k[1]) * c->d[1] - c->pb[1];
                const int64_t row = g->iw_pad * Cg, col = c->s[2] * Cg;
                const nconv_padding_mode mode = c->mode;
                const float *xg = bc->x + gi * c->N * in0 * in1 * row;
                for (int64_t k = 0; k < kc; k++) {
                    if (swap && k > 0 && pix[3 * KC + k] != 0) continue; /* read from row starts only, see below */
                    const int64_t i0 = nconv__map_index(pix[KC + k] * s0 + h0, in0, mode);
                    const int64_t i1 = nconv__map_index(pix[2 * KC + k] * s1 + h1, in1, mode);
                    xrows[k] = (i0 < 0 || i1 < 0) ? bc->zero
                                                  : xg + ((pix[k] * in0 + i0) * in1 + i1) * row + pix[3 * KC + k] * col;
                }
            } else if (g->pointwise) {
                for (int64_t k = 0; k < kc; k++)
                    xrows[k] = bc->x16 ? xblk + k * c->C + gi * g->Cg : bc->x + (p0 + k) * c->C + gi * g->Cg;
            } else {
                const int64_t k0 = t / (c->k[1] * c->k[2]), k1 = (t / c->k[2]) % c->k[1], k2 = t % c->k[2];
                for (int64_t k = 0; k < kc; k++) {
                    const int64_t i0 = nconv__map_index(pix[KC + k] * c->s[0] - c->pb[0] + k0 * c->d[0], c->in[0], c->mode);
                    const int64_t i1 = nconv__map_index(pix[2 * KC + k] * c->s[1] - c->pb[1] + k1 * c->d[1], c->in[1], c->mode);
                    const int64_t i2 = nconv__map_index(pix[3 * KC + k] * c->s[2] - c->pb[2] + k2 * c->d[2], c->in[2], c->mode);
                    const int64_t off = gi * g->Cg + pix[k] + ((i0 * c->in[1] + i1) * c->in[2] + i2) * c->C;
                    if (i0 < 0 || i1 < 0 || i2 < 0) {
                        xrows[k] = bc->zero;
                    } else if (bc->x16) { /* the tap's row widened */
                        bc->cv(g->Cg, bc->x16 + off, xblk + k * g->Cg, 1);
                        xrows[k] = xblk + k * g->Cg;
                    } else {
                        xrows[k] = bc->x + off;
                    }
                }
            }
            if (!swap) {
                /* Column panels outside: a panel's slab of input rows stays in L1 over the row tiles.
                 * Input rows lie C floats apart, a power of two in most networks; from 1 KiB
                 * apart (C >= 256, or many groups) the slab folds onto a few L1 sets, so with
                 * several row tiles it is copied together first (measured: slower below). */
                const int pack = run_end - u > 1 && c->C >= 256 && !g->wfold;
                /* Two panels per kernel call (the AVX-512 kernels share each load of A between two). */
                for (int64_t j0 = 0; j0 < cols_n; j0 += 2 * NR) {
                    const int64_t np = cols_n - j0 > NR ? 2 : 1, jl = j0 + (np - 1) * NR;
                    const int64_t nc_last = cols_n - jl < NR ? cols_n - jl : NR;
                    /* constant-size copies: a memcpy of nc floats becomes a slow rep movs */
                    for (int64_t q = 0; q < np && pack; q++)
                        for (int64_t k = 0; k < kc; k++) {
                            const float *src = xrows[k] + j0 + q * NR;
                            float *dst = bpack + (q * KC + k) * NR;
                            /* Each row gives one line per panel, a miss at memory latency: the next
                             * pair's is fetched now. */
                            if (j0 + (q + 2) * NR < cols_n) __builtin_prefetch(src + 2 * NR);
                            if (q + 1 < np || nc_last == NR)
                                memcpy(dst, src, sizeof(float) * NR);
                            else
                                for (int64_t i = 0; i < nc_last; i++) dst[i] = src[i];
                        }
                    for (int64_t v = u; v < run_end; v++) {
                        const int64_t r0 = (v % bc->tiles) * MR, mr = rows_n - r0 < MR ? rows_n - r0 : MR;
                        const int inplace = v % bc->tiles < g->bw_dy_rows;
                        const float *a = inplace ? dyrows[0] + gi * g->Og + r0 : apack + (v % bc->tiles) * ts;
                        bc->k->gemm_ib_np(mr, np, nc_last, kc, a, inplace ? c->O : MR, pack ? brows : xrows,
                                          pack ? 0 : j0, pack ? KC * NR : NR, acc + (gt * rows_n + r0) * cols_n + j0,
                                          cols_n, NULL, add);
                    }
                }
            } else {
                /* x^T of the run's tiles: apack[ot][k][r] = x row of pixel p0 + k at column ot * MR + r
                 * (W-folded rows need none, see below). */
                const int64_t o0 = u % bc->tiles, o1 = (run_end - 1) % bc->tiles + 1;
                const int64_t full = rows_n / MR < o1 ? rows_n / MR : o1;
                for (int64_t k = 0; k < kc && !g->wfold; k++) {
                    const float *src = xrows[k];
                    for (int64_t o = o0; o < full && !x_rows; o++)
                        memcpy(apack + o * ts + k * MR, src + o * MR, sizeof(float) * MR);
                    if (full < o1) {
                        float *d = apack + full * ts + k * MR;
                        for (int64_t r = 0; r < MR; r++) d[r] = full * MR + r < rows_n ? src[full * MR + r] : 0.0f;
                    }
                }
                if (bc->dy_planes && gi != packed_g) {
                    /* dy^T panels of the group from the NCHW planes, once per block and group (every
                     * tap and tile reuses them): no NHWC copy of dy, and B rows are contiguous. */
                    const nconv_view *v = bc->dy_planes;
                    const nconv_transpose16_fn t16 = nconv__transpose16(bc->k, v->dt); /* 16-bit: widened */
                    /* db by the thread of the group's first unit (which zeroed its lanes) */
                    const int64_t first = gi * taps * bc->tiles;
                    const int db = lanes && u0 <= first && first < u1;
                    for (int64_t k = 0; k < kc;) {
                        const int64_t p = p0 + k, op = p % g->OS, run = kc - k < g->OS - op ? kc - k : g->OS - op;
                        for (int64_t j0 = 0; j0 < cols_n; j0 += NR) {
                            const int64_t nc = cols_n - j0 < NR ? cols_n - j0 : NR;
                            float *panel = bpack + (j0 / NR * KC + k) * NR;
                            const int64_t at = (p / g->OS) * v->stride[0] + (gi * g->Og + j0) * v->stride[1] + op;
                            if (t16) t16(nc, run, (const uint16_t *)v->data + at, v->stride[1], panel, NR, 1);
                            else bc->k->transpose(nc, run, (const float *)v->data + at, v->stride[1], panel, NR);
                            /* db from the rows just written (a pass over the planes apart read them from
                             * memory again: a quarter of wav2vec2's first layer) */
                            if (db) lanes_add(bc->k, lanes + gi * g->Og + j0, c->O, panel, NR, op, run, nc);
                        }
                        k += run;
                    }
                    packed_g = gi;
                }
                const int64_t np = nconv__div_up(cols_n, NR), nc_last = cols_n - (np - 1) * NR;
                const float *const *brow = bc->dy_planes ? brows : dyrows;
                const int64_t boff = bc->dy_planes ? 0 : gi * g->Og, bs = bc->dy_planes ? KC * NR : NR;
                /* W-folded, along an output row pixel k + 1's run starts s[2] * Cg floats after
                 * pixel k's: tile o of x^T is the padded input itself from column o * bw_mr on,
                 * read with that stride (conv1's x^T copies were a fifth of its bwd_w). The kernel
                 * calls go row by row; a row of padding (the zero row) adds nothing. Part tiles
                 * (of 6 or 7 rows) read up to MR floats past a run's end (the copy has MR floats of
                 * slack): rows past rows_n, never stored. */
                const int64_t lda = g->wfold ? c->s[2] * g->Cg : MR;
                const nconv_f32_gemm_ib_np_fn ib = g->bw_mr == 9   ? bc->k->gemm_ib9_np
                                                   : g->bw_mr == 7 ? bc->k->gemm_ib7_np
                                                                   : bc->k->gemm_ib_np;
                for (int64_t k = 0; k < kc;) {
                    int64_t e = kc;
                    if (g->wfold) {
                        for (e = k + 1; e < kc && pix[3 * KC + e] != 0;) e++;
                        if (e < kc && xrows[e] != bc->zero) { /* the next row's run, while this one computes */
                            const int64_t n = (e - k < kc - e ? e - k : kc - e) * lda + rows_n;
                            for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(xrows[e] + i);
                        }
                    }
                    for (int64_t v = u; v < run_end; v++) {
                        const int64_t ot = v % bc->tiles, r0 = ot * g->bw_mr;
                        const int64_t mr = rows_n - r0 < g->bw_mr ? rows_n - r0 : g->bw_mr;
                        if (g->wfold && xrows[k] == bc->zero) {
                            zero_row_products(brow, boff, bs, k, e, cols_n, acc + (gt * rows_n + r0) * cols_n, mr,
                                              cols_n);
                            continue;
                        }
                        const int a_in = x_rows && ot < rows_n / MR; /* x's rows in place (see x_rows) */
                        const float *a = g->wfold || a_in ? xrows[k] + r0 : apack + ot * ts;
                        ib(mr, np, nc_last, e - k, a, a_in ? c->C : lda, brow + k, boff, bs,
                           acc + (gt * rows_n + r0) * cols_n, cols_n, NULL, add);
                    }
                    k = e;
                }
                /* The block's dy rows, read in place by every unit, summed once for db while in cache
                 * after the group's first unit (a separate pass over dy took as long as this GEMM
                 * for wav2vec2's first layer; before the GEMM, the misses were this sum's). */
                if (lanes && !bc->dy_planes && t == 0 && u % bc->tiles == 0)
                    bias_lanes(bc, lanes, dyrows[0], p0, kc, gi * g->Og, g->Og);
            }
            u = run_end;
        }
    }
}

/* Threads own units over all pixels (runs of them share packed panels), or
 * (bw_chunks > 1) claim whole pixel chunks. */
static void bw_task(void *arg, int tid, int nthreads) {
    const bw_ctx *bc = arg;
    char *scratch = bc->scratch + (size_t)tid * bc->scratch_stride;
    const int64_t M = bc->c->N * bc->g.OS, chunks = bc->g.bw_chunks;
    if (chunks == 1) {
        int64_t a, b;
        nconv__split(bc->units, tid, nthreads, &a, &b);
        bw_range(bc, scratch, a, b, 0, M, bc->acc, bc->lanes);
        return;
    }
    for (int64_t ch; (ch = nconv__share_claim(bc->shares, tid, nthreads)) >= 0;) {
        int64_t m0, m1;
        nconv__split(M, (int)ch, (int)chunks, &m0, &m1);
        bw_range(bc, scratch, 0, bc->units, m0, m1, bc->acc + ch * bc->dwf, chunk_lanes(bc, ch));
    }
}

/* acc (chunk 0) += chunk 1 + ... in chunk order, element ranges per thread; the db lanes alike. */
static void chunk_sum_task(void *arg, int tid, int nthreads) {
    const bw_ctx *bc = arg;
    nconv__add_chunks(tid, nthreads, bc->acc, bc->dwf, bc->g.bw_chunks, bc->lanes, bc->lanes_more, 4 * bc->c->O);
}

/* dw[o][c][t] = acc[g][t][o][c] (or acc[g][t][c][o]); with the W fold,
 * acc[g][(kd, kh)][o][(kw, c)] (or [(kw, c)][o]), tap t = (kd, kh) * KW + kw.
 * Threads split the (group, output channel) rows: the weights of deep
 * layers are megabytes. */
typedef struct dw_ctx {
    const nconv_core *c;
    const geo *g;
    const nconv_view *wv;
    const int64_t *toff;
    const float *acc;
    int64_t width;
    int accumulate;        /* dw += (see nconv_exec) */
    nconv_convert16_fn cv; /* 16-bit dw: its narrowing */
} dw_ctx;

static void dw_task(void *arg, int tid, int nthreads) {
    const dw_ctx *d = arg;
    const nconv_core *c = d->c;
    const geo *g = d->g;
    const nconv_view *wv = d->wv;
    float *wf = wv->dt == NCONV_F32 ? (float *)wv->data : NULL;
    const int64_t taps = g->wfold ? g->ks_rows : g->KS;
    int64_t r0, r1;
    nconv__split(c->G * g->Og, tid, nthreads, &r0, &r1);
    const nconv_f32_transpose_fn transpose = nconv__kernels()->transpose;
    /* [c][o] sums to channels-last rows: 16 x 16 transposes */
    if (wf && g->bw_swap && wv->stride[1] == 1 && !d->accumulate) {
        for (int64_t row = r0; row < r1;) {
            const int64_t gi = row / g->Og, o = row % g->Og, n = r1 - row < g->Og - o ? r1 - row : g->Og - o;
            for (int64_t t = 0; t < g->KS; t++) {
                const int64_t tr = g->wfold ? t / c->k[2] : t, col0 = g->wfold ? (t % c->k[2]) * g->Cg : 0;
                const float *acc = d->acc + (gi * taps + tr) * g->Og * d->width + col0 * g->Og + o;
                transpose(g->Cg, n, acc, g->Og, wf + row * wv->stride[0] + d->toff[t], wv->stride[0]);
            }
            row += n;
        }
        return;
    }
    /* Taps innermost and dense (OIHW): per output channel a [taps][Cg] -> [Cg][taps] transpose
     * (a scalar loop is too slow for deep layers' megabytes). */
    int dense_taps = wf && !g->bw_swap && !g->wfold && g->KS > 1 && !d->accumulate;
    for (int64_t t = 0; t < g->KS && dense_taps; t++) dense_taps = d->toff[t] == t;
    for (int64_t row = r0; row < r1 && dense_taps; row++) {
        const int64_t gi = row / g->Og, o = row % g->Og;
        transpose(g->KS, g->Cg, d->acc + gi * taps * g->Og * d->width + o * d->width, g->Og * d->width,
                  wf + row * wv->stride[0], wv->stride[1]);
    }
    /* 16-bit weights whose rows are dense (OIHW or OHWI): a row gathered in its own order, then
     * narrowed by one call (element by element, narrowing cost more than the GEMM of deep layers). */
    enum { ROW16 = 8192 };
    float row16[ROW16];
    int dense16 = nconv__is_16bit(wv->dt) && !d->accumulate && g->KS * g->Cg <= ROW16;
    const int oihw = wv->stride[1] == g->KS, ohwi = wv->stride[1] == 1;
    for (int64_t t = 0; t < g->KS && dense16; t++)
        dense16 = (oihw && d->toff[t] == t) || (ohwi && d->toff[t] == t * g->Cg);
    dense16 = dense16 && (oihw || ohwi);
    for (int64_t row = r0; row < r1 && dense16; row++) {
        const int64_t gi = row / g->Og, o = row % g->Og;
        for (int64_t t = 0; t < g->KS; t++) {
            const int64_t tr = g->wfold ? t / c->k[2] : t, col0 = g->wfold ? (t % c->k[2]) * g->Cg : 0;
            const float *acc = d->acc + (gi * taps + tr) * g->Og * d->width;
            for (int64_t ci = 0; ci < g->Cg; ci++)
                row16[ci * wv->stride[1] + d->toff[t]] =
                    g->bw_swap ? acc[(col0 + ci) * g->Og + o] : acc[o * d->width + col0 + ci];
        }
        d->cv(g->KS * g->Cg, row16, (uint16_t *)wv->data + row * wv->stride[0], 0);
    }
    for (int64_t row = r0; row < r1 && !dense_taps && !dense16; row++) {
        const int64_t gi = row / g->Og, o = row % g->Og;
        for (int64_t t = 0; t < g->KS; t++) {
            const int64_t tr = g->wfold ? t / c->k[2] : t, col0 = g->wfold ? (t % c->k[2]) * g->Cg : 0;
            const float *acc = d->acc + (gi * taps + tr) * g->Og * d->width;
            const int64_t base = row * wv->stride[0] + d->toff[t];
            if (wf && !g->bw_swap && wv->stride[1] == 1 && !d->accumulate) { /* channels-last weights, or 1x1 */
                memcpy(wf + base, acc + o * d->width + col0, sizeof(float) * (size_t)g->Cg);
                continue;
            }
            for (int64_t ci = 0; ci < g->Cg; ci++) {
                const float v = g->bw_swap ? acc[(col0 + ci) * g->Og + o] : acc[o * d->width + col0 + ci];
                if (d->accumulate) wf[base + ci * wv->stride[1]] += v;
                else if (wf) wf[base + ci * wv->stride[1]] = v;
                else nconv__store1(wv->data, wv->dt, base + ci * wv->stride[1], v);
            }
        }
    }
}

nconv_status nconv__igemm_bwd_w_run(const nconv_exec *e, const geo *gp, const igemm_bufs *b) {
    const nconv_core *c = e->c;
    const geo g = *gp;
    const ws_sizes s = b->s;
    const nconv_kernels *k = e->k;
    float *packed = b->packed, *zero = b->zero;
    double *lanes_more = b->lanes_more;
    char *scratch = b->scratch;
    const int64_t *toff = b->toff;
    const float *x = b->x, *y = b->y;
    const int dy_planes = b->dy_planes;
    const int64_t taps = g.wfold ? g.ks_rows : g.KS, width = g.wfold ? c->k[2] * g.Cg : g.Cg;
    const int64_t tiles = nconv__div_up(g.bw_swap ? width : g.Og, g.bw_mr);
    /* db's lanes on the way: from the packing of dy^T, or (swapped) from dy's rows in place,
     * or from the panels transposed from dy's NCHW planes */
    double *lanes = e->db_lanes;
    nconv_share *shares = nconv__arena_take(e->ws, s.shares);
    if (!shares) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    nconv__share_split(shares, g.bw_chunks, nconv__parallel_width(e));
    /* The sums' layout [Og][Cg] is dense f32 1x1 weights' own (one group, one chunk, not
     * swapped): then they go to dw directly (the copy after was 4 MiB for res5b_reduce). */
    const nconv_view *wv = e->w;
    const int direct = !e->accumulate && wv->dt == NCONV_F32 && c->G == 1 && g.KS == 1 && !g.bw_swap &&
                       g.bw_chunks == 1 && wv->stride[1] == 1 && wv->stride[0] == g.Cg;
    bw_ctx bc = {.c = c,
                 .g = g,
                 .k = k,
                 .x = x,
                 .dy = y,
                 .zero = zero,
                 .dy_planes = dy_planes ? &b->dyv : NULL,
                 .x16 = b->x16,
                 .dy16 = b->dy16,
                 .cv = nconv__convert16(k, c->dt),
                 .acc = direct ? (float *)wv->data : packed,
                 .lanes = lanes,
                 .lanes_more = lanes_more,
                 .units = c->G * taps * tiles,
                 .tiles = tiles,
                 .dwf = c->G * g.KS * g.Og * g.Cg,
                 .shares = shares,
                 .scratch = scratch,
                 .scratch_stride = nconv__ws_round(s.scratch)};
    nconv__parallel(e, bw_task, &bc);
    if (g.bw_chunks > 1) nconv__parallel(e, chunk_sum_task, &bc);
    if (lanes) *e->db_done = 1;
    dw_ctx dc = {c, &g, wv, toff, packed, width, e->accumulate, nconv__convert16(k, wv->dt)};
    if (!direct) nconv__parallel(e, dw_task, &dc);
    return NCONV_OK;
}
