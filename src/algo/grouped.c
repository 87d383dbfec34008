/*
 * Algorithm "grouped": convolutions with small groups (q = 2, 4 or 8 input
 * and output channels per group: ResNeXt's 32x4d, and per-sample gradients
 * of such layers).
 *
 *   fwd:   y[p][g q + o]  = sum_{t, i} w[g q + o][i][t] * x[pix(p, t)][g q + i]
 *   bwd_d: dx[p][g q + i] = sum_{t, o} w[g q + o][i][t] * dy[pix'(p, t)][g q + o]
 *          (stride 1: a forward over dy with the taps flipped)
 *   bwd_w: dw[g q + o][i][t] = sum_p dy[p][g q + o] * x[pix(p, t)][g q + i]
 *
 * A GEMM per group would be q x q: a 6 x 16 tile would be mostly padding.
 * Here channels are the
 * vector dimension, 8 / q groups per register, and a vector of the other
 * operand is spread over its groups' lanes (an in-lane permute; a broadcast
 * for q = 8) once per group channel: in bwd_w one dy vector serves every tap (gbw micro-kernel),
 * in fwd and bwd_d one weight vector serves four pixels (gfwd). The input
 * operands are first copied into 8-channel blocks ([block][n][spatial][8],
 * padded along W so a run of output columns reads every tap with one
 * stride): channels-last rows are C floats apart, 4 KiB for per-sample
 * problems, and a run of them folds onto one L1 set. Threads own blocks
 * (bwd_w: summing every pixel in order) or (output row, block) pairs, so
 * results do not depend on the thread count.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { VL = 8, MAX_TAPS = 65536 };

static int grouped_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    const int64_t q = c->G > 0 ? c->C / c->G : 0;
    if (c->dt == NCONV_F64) {
        if (why_not) *why_not = "f64 problems run on gemm (f64 throughout)";
        return 0;
    }
    if (dir == NCONV_DIR_BWD_D && (c->s[0] != 1 || c->s[1] != 1 || c->s[2] != 1 || c->mode != NCONV_PAD_ZEROS)) {
        if (why_not) *why_not = "bwd_d with stride 1 and zero padding only";
        return 0;
    }
    if (c->G < 2 || c->O != c->C || (q != 2 && q != 4 && q != 8) || c->C % VL != 0) {
        if (why_not) *why_not = "needs groups with 2, 4 or 8 input and output channels each, channels a multiple of 8";
        return 0;
    }
    if (nconv__core_kernel_spatial(c) > MAX_TAPS) {
        if (why_not) *why_not = "kernels of more than 65536 taps";
        return 0;
    }
    return 1;
}

/* The row convolution of fwd and bwd_d: destination pixel u, tap k reads
 * source coordinate u * st + k * dl - lo on each axis (bwd_d: stride 1, taps
 * flipped, lo = (K - 1) * d - pad). Sizes: src the input operand (x, or
 * dy), dst the output (y, or dx). */
typedef struct rowconv {
    int64_t src[3], dst[3], st[3], dl[3], lo[3];
    int64_t width; /* of the W-padded blocked source: every tap of every destination column lies inside */
    nconv_padding_mode mode;
} rowconv;

static void row_geometry(const nconv_core *c, nconv_direction dir, rowconv *r) {
    const int bwd_d = dir == NCONV_DIR_BWD_D;
    for (int a = 0; a < 3; a++) {
        r->src[a] = bwd_d ? c->out[a] : c->in[a];
        r->dst[a] = bwd_d ? c->in[a] : c->out[a];
        r->st[a] = bwd_d ? 1 : c->s[a];
        r->dl[a] = c->d[a];
        r->lo[a] = bwd_d ? (c->k[a] - 1) * c->d[a] - c->pb[a] : c->pb[a];
    }
    r->width = (r->dst[2] - 1) * r->st[2] + (c->k[2] - 1) * r->dl[2] + 1;
    r->mode = bwd_d ? NCONV_PAD_ZEROS : c->mode;
}

typedef struct gsizes {
    size_t x, y, acc, zero, init;
} gsizes;

/* x: the blocked padded source; y: bwd_w's blocked dy, or the NHWC output (when it is copied);
 * acc: bwd_w's sums, or the packed weights. */
static size_t sizes(const nconv_core *c, nconv_direction dir, unsigned copies, gsizes *s) {
    const int64_t q = c->C / c->G;
    rowconv r;
    row_geometry(c, dir, &r);
    s->x = sizeof(float) * (size_t)(c->N * r.src[0] * r.src[1] * r.width * c->C);
    const unsigned out = dir == NCONV_DIR_FWD ? NCONV_COPY_Y : NCONV_COPY_X;
    s->y = dir == NCONV_DIR_BWD_W || (copies & out)
               ? sizeof(float) * (size_t)(c->N * r.dst[0] * r.dst[1] * r.dst[2] * c->C)
               : 0;
    s->acc = sizeof(float) * (size_t)(c->C * nconv__core_kernel_spatial(c) * q); /* [block][t][j][8] */
    s->zero = sizeof(float) * (size_t)(r.width * VL);
    s->init = sizeof(float) * (size_t)c->C;
    return nconv__ws_round(s->x) + nconv__ws_round(s->y) + nconv__ws_round(s->acc) + nconv__ws_round(s->zero) +
           nconv__ws_round(s->init);
}

static size_t grouped_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    gsizes s; /* see grouped_run, rows_run */
    size_t own = sizes(c, dir, copies, &s);
    if (dir != NCONV_DIR_BWD_W)
        own += (size_t)threads * nconv__thread_stride(sizeof(float *) * (size_t)nconv__core_kernel_spatial(c));
    return own;
}

typedef struct gctx {
    const nconv_core *c;
    const nconv_kernels *k;
    const float *x, *dy, *zero; /* blocked: x [block][n][i0][i1][iwp][8], dy [block][n][spatial][8] */
    int64_t iwp;
    float *acc;
    const nconv_view *w;
} gctx;

/* Blocked copy of an activation view [N][C][S0][S1][S2]: row r = (block, n, i0, i1) of dst
 * holds dst[r][jw][l] = v[n][block * 8 + l][i0][i1][map(jw - pb)] for jw < width (zeros where the
 * padding mode maps nowhere). */
typedef struct block_ctx {
    const nconv_core *c;
    const nconv_view *v;
    float *dst;
    int64_t width, pb;
    nconv_padding_mode mode;
} block_ctx;

static void block_task(void *arg, int tid, int nthreads) {
    const block_ctx *bc = arg;
    const nconv_view *v = bc->v;
    const int64_t N = v->shape[0], S0 = v->shape[2], S1 = v->shape[3], S2 = v->shape[4];
    const int64_t rows = N * S0 * S1;
    const float *vf = v->dt == NCONV_F32 ? (const float *)v->data : NULL;
    const nconv_f32_transpose_fn transpose = nconv__kernels()->transpose;
    const int64_t blocks = bc->c->C / VL;
    /* Channels-last sources: blocks inner, so each source row is read once, not once per
     * block. Planes: blocks outer, so each unit reads 8 plane rows in order. */
    const int nxc = v->stride[1] == 1;
    int64_t u0, u1;
    nconv__split(rows * blocks, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t r = nxc ? u / blocks : u % rows, b = nxc ? u % blocks : u / rows;
        const int64_t n = r / (S0 * S1), i0 = (r / S1) % S0, i1 = r % S1;
        const int64_t base = n * v->stride[0] + b * VL * v->stride[1] + i0 * v->stride[2] + i1 * v->stride[3];
        float *d = bc->dst + (b * rows + r) * bc->width * VL;
        /* Columns jw in [lo, hi) read input column jw - pb in order. */
        int64_t lo = bc->pb < 0 ? 0 : bc->pb, hi = S2 + bc->pb < bc->width ? S2 + bc->pb : bc->width;
        if (hi < lo) hi = lo;
        if (vf && v->stride[4] == 1 && hi > lo) { /* planes (NCHW): an 8 x run transpose */
            transpose(VL, hi - lo, vf + base + (lo - bc->pb), v->stride[1], d + lo * VL, VL);
        } else if (vf && v->stride[1] == 1) { /* channels-last: 8 floats per column */
            for (int64_t jw = lo; jw < hi; jw++) memcpy(d + jw * VL, vf + base + (jw - bc->pb) * v->stride[4], sizeof(float) * VL);
        } else {
            lo = hi = 0;
        }
        for (int64_t jw = 0; jw < bc->width; jw++) {
            if (jw == lo && hi > lo) jw = hi;
            if (jw >= bc->width) break;
            const int64_t iw = nconv__map_index(jw - bc->pb, S2, bc->mode);
            for (int64_t l = 0; l < VL; l++)
                d[jw * VL + l] = iw < 0 ? 0.0f : (float)nconv__load(v->data, v->dt, base + l * v->stride[1] + iw * v->stride[4]);
        }
    }
}

static void grouped_task(void *arg, int tid, int nthreads) {
    const gctx *gc = arg;
    const nconv_core *c = gc->c;
    const int64_t q = c->C / c->G, KS = nconv__core_kernel_spatial(c), KW = c->k[2];
    const int64_t ats = q * VL; /* floats between taps in a block's sums */
    const int64_t nblk = q == 8 ? 2 : 1, no = q == 8 ? 4 : q, xs = c->s[2] * VL;
    const int64_t rows = c->N * c->out[0] * c->out[1], OW = c->out[2];
    const int64_t xrows = c->N * c->in[0] * c->in[1];
    int64_t b0, b1;
    nconv__split(c->C / VL, tid, nthreads, &b0, &b1);
    for (int64_t b = b0; b < b1; b++) {
        float *acc = gc->acc + b * KS * ats;
        memset(acc, 0, sizeof(float) * (size_t)(KS * ats));
        for (int64_t r = 0; r < rows; r++) { /* output rows (n, od, oh) */
            const int64_t n = r / (c->out[0] * c->out[1]), o0 = (r / c->out[1]) % c->out[0], o1 = r % c->out[1];
            const float *dyrow = gc->dy + (b * rows + r) * OW * VL;
            for (int64_t k0 = 0; k0 < c->k[0]; k0++) {
                const int64_t i0 = nconv__map_index(o0 * c->s[0] - c->pb[0] + k0 * c->d[0], c->in[0], c->mode);
                for (int64_t k1 = 0; k1 < c->k[1]; k1++) {
                    const int64_t i1 = nconv__map_index(o1 * c->s[1] - c->pb[1] + k1 * c->d[1], c->in[1], c->mode);
                    /* A row outside the input still multiplies: 0 * Inf in dy is NaN, as in PyTorch. */
                    const float *xrow = i0 < 0 || i1 < 0 ? NULL
                                                         : gc->x + (b * xrows + (n * c->in[0] + i0) * c->in[1] + i1) * gc->iwp * VL;
                    const int64_t t_row = (k0 * c->k[1] + k1) * KW;
                    for (int64_t kw0 = 0; kw0 < KW; kw0 += 3) {
                        const int64_t nt = KW - kw0 < 3 ? KW - kw0 : 3;
                        const float *xt[3];
                        for (int64_t t = 0; t < nt; t++) xt[t] = xrow ? xrow + (kw0 + t) * c->d[2] * VL : gc->zero;
                        for (int64_t h = 0; h < nblk; h++)
                            gc->k->gbw(OW, q, h * 4, no, nt, dyrow, VL, xt, xrow ? xs : 0, acc + (t_row + kw0) * ats + h * 4 * VL, ats);
                    }
                }
            }
        }
        /* dw[g q + o][i][t] = acc[t][o][l] for channel b * 8 + l = g q + i (a block holds whole groups). */
        const nconv_view *w = gc->w;
        float *wf = w->dt == NCONV_F32 ? (float *)w->data : NULL;
        for (int64_t t = 0; t < KS; t++) {
            const int64_t toff = (t / (c->k[1] * KW)) * w->stride[2] + ((t / KW) % c->k[1]) * w->stride[3] +
                                 (t % KW) * w->stride[4];
            for (int64_t o = 0; o < q; o++)
                for (int64_t l = 0; l < VL; l++) {
                    const int64_t ch = b * VL + l;
                    const int64_t off = ((ch / q) * q + o) * w->stride[0] + (ch % q) * w->stride[1] + toff;
                    const float v = acc[t * ats + o * VL + l];
                    if (wf) wf[off] = v;
                    else nconv__store1(w->data, w->dt, off, v);
                }
        }
    }
}

/* ---------------------------------------------------------- fwd, bwd_d */

/* Output rows (n, u0, u1) x channel blocks per thread: each a gfwd run over the row's pixels. */
typedef struct fctx {
    const nconv_core *c;
    const nconv_kernels *k;
    const rowconv *r;
    const float *src, *wp, *init, *zero; /* src blocked [block][n][s0][s1][width][8]; wp [block][t][j][8] */
    float *dst;                          /* NHWC */
    int relu;
    char *taps;                          /* per thread, tstride apart: KS pointers */
    size_t tstride;
    int64_t ks;
} fctx;

static void rows_task(void *arg, int tid, int nthreads) {
    const fctx *fc = arg;
    const nconv_core *c = fc->c;
    const rowconv *r = fc->r;
    const int64_t C = c->C, q = C / c->G, blocks = C / VL, KS = fc->ks;
    const int64_t rows = c->N * r->dst[0] * r->dst[1], srows = c->N * r->src[0] * r->src[1];
    const float **taps = (const float **)(fc->taps + (size_t)tid * fc->tstride);
    int64_t u0, u1;
    nconv__split(rows * blocks, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t row = u / blocks, b = u % blocks;
        const int64_t n = row / (r->dst[0] * r->dst[1]), d0 = (row / r->dst[1]) % r->dst[0], d1 = row % r->dst[1];
        for (int64_t k0 = 0, t = 0; k0 < c->k[0]; k0++) {
            const int64_t s0 = nconv__map_index(d0 * r->st[0] + k0 * r->dl[0] - r->lo[0], r->src[0], r->mode);
            for (int64_t k1 = 0; k1 < c->k[1]; k1++) {
                const int64_t s1 = nconv__map_index(d1 * r->st[1] + k1 * r->dl[1] - r->lo[1], r->src[1], r->mode);
                const float *srow = s0 < 0 || s1 < 0 ? NULL
                                                     : fc->src + (b * srows + (n * r->src[0] + s0) * r->src[1] + s1) * r->width * VL;
                for (int64_t k2 = 0; k2 < c->k[2]; k2++, t++) taps[t] = srow ? srow + k2 * r->dl[2] * VL : fc->zero;
            }
        }
        fc->k->gfwd(r->dst[2], q, KS, taps, r->st[2] * VL, fc->wp + b * KS * q * VL, fc->init ? fc->init + b * VL : NULL,
                    fc->dst + row * r->dst[2] * C + b * VL, C, fc->relu);
    }
}

static nconv_status rows_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    const int fwd = e->dir == NCONV_DIR_FWD;
    /* bwd_d reads zero taps past dy's edges: with a non-finite weight that would make NaN where
     * PyTorch computes no product (see nconv__view_all_finite). */
    if (!fwd && !nconv__view_all_finite(e->w)) return (nconv_status)NCONV__DECLINE_W;
    gsizes s;
    sizes(c, e->dir, nconv__exec_copies(e), &s);
    rowconv r;
    row_geometry(c, e->dir, &r);
    const int64_t KS = nconv__core_kernel_spatial(c), q = c->C / c->G;
    float *xb = nconv__arena_take(e->ws, s.x), *yb = nconv__arena_take(e->ws, s.y);
    float *wp = nconv__arena_take(e->ws, s.acc), *zero = nconv__arena_take(e->ws, s.zero);
    float *init = nconv__arena_take(e->ws, s.init);
    /* each thread's tap list apart (lists side by side shared cache lines, written every row) */
    const size_t tstride = nconv__thread_stride(sizeof(float *) * (size_t)KS);
    char *taps = nconv__arena_take(e->ws, tstride * (size_t)e->threads);
    if (!xb || !yb || !wp || !zero || !init || !taps)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm grouped");
    memset(zero, 0, s.zero);
    /* wp[b][t][j][l]: lane l is channel ch = b * 8 + l of the output (fwd: o = ch % q, j the
     * input channel; bwd_d: i = ch % q, j the output channel, taps flipped). */
    const nconv_view *w = e->w;
    for (int64_t t = 0; t < KS; t++) { /* taps outside: their offsets divide, once per tap */
        const int64_t k0 = t / (c->k[1] * c->k[2]), k1 = (t / c->k[2]) % c->k[1], k2 = t % c->k[2];
        const int64_t tw = fwd ? t : ((c->k[0] - 1 - k0) * c->k[1] + (c->k[1] - 1 - k1)) * c->k[2] + (c->k[2] - 1 - k2);
        const int64_t toff = nconv__dw_w_offset(c, w, 0, tw);
        for (int64_t ch = 0; ch < c->C; ch++)
            for (int64_t j = 0; j < q; j++) {
                const int64_t o = fwd ? ch : (ch / q) * q + j, i = fwd ? j : ch % q;
                wp[((ch / VL * KS + t) * q + j) * VL + ch % VL] =
                    (float)nconv__load(w->data, w->dt, o * w->stride[0] + i * w->stride[1] + toff);
            }
    }
    const nconv_view *in = fwd ? e->x : e->y, *out = fwd ? e->y : e->x;
    block_ctx bc = {c, in, xb, r.width, r.lo[2], r.mode};
    nconv__parallel(e, block_task, &bc);
    int fuse;
    float *dst = nconv__nxc_output(out, e->epi, yb, &fuse);
    nconv__epi_init(fuse ? e->epi : NULL, init, c->C);
    fctx fc = {c, e->k, &r, xb, wp, init, zero, dst, fuse && e->epi && e->epi->relu, taps, tstride, KS};
    nconv__parallel(e, rows_task, &fc);
    if (!fuse) nconv__scatter_nxc_f32(e, out, dst, e->epi);
    return NCONV_OK;
}

/* ---------------------------------------------------------------- bwd_w */

static nconv_status grouped_run(const nconv_exec *e) {
    if (e->dir != NCONV_DIR_BWD_W) return rows_run(e);
    const nconv_core *c = e->c;
    gsizes s;
    sizes(c, e->dir, nconv__exec_copies(e), &s);
    rowconv r;
    row_geometry(c, e->dir, &r);
    float *xb = nconv__arena_take(e->ws, s.x), *yb = nconv__arena_take(e->ws, s.y);
    float *acc = nconv__arena_take(e->ws, s.acc), *zero = nconv__arena_take(e->ws, s.zero);
    if (!xb || !yb || !acc || !zero) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm grouped");
    memset(zero, 0, s.zero);
    block_ctx bx = {c, e->x, xb, r.width, c->pb[2], c->mode};
    nconv__parallel(e, block_task, &bx);
    block_ctx by = {c, e->y, yb, c->out[2], 0, NCONV_PAD_ZEROS};
    nconv__parallel(e, block_task, &by);
    gctx gc = {c, e->k, xb, yb, zero, r.width, acc, e->w};
    nconv__parallel(e, grouped_task, &gc);
    return NCONV_OK;
}

const nconv_algo nconv_algo_grouped = {.name = "grouped", .applies = grouped_applies, .workspace = grouped_workspace,
                                       .run = grouped_run, .declines = {0, NCONV__DECLINES_W, 0}};
