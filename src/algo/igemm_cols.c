/*
 * Algorithm "igemm_cols": backward-data for thin input channels (one group,
 * at most 8 channels, as in the first layers of image and audio networks),
 * where rows of Cg columns would waste most of a 6 x 16 tile: a column GEMM
 * col[p][t][c] = sum_o dy[p][o] * w[o][c][t] whose KS * Cg columns fill the
 * tiles, then a scatter-add into a W-padded dx in pixel order. It shares
 * igemm's framework (igemm.h). With a non-finite weight it declines, as
 * igemm's bwd_d does.
 */
#include "igemm.h"

#include <string.h>

/* col[p][t][c] = sum_o dy[p][o] * w[o][c][t] for a block of output pixels
 * (a GEMM whose KS * Cg columns fill the tiles), then each pixel's (kd, kh)
 * runs of KW * Cg are added into a W-padded dx, in pixel order (see
 * scatter_task), so the sums do not depend on the thread count. */
typedef struct cols_ctx {
    const nconv_core *c;
    const geo *g;
    const nconv_kernels *k;
    const float *dy, *wq, *zero;
    const uint16_t *dy16;  /* 16-bit channels-last dy read in place (dy NULL): a tile's rows widened */
    nconv_convert16_fn cv; /* their conversion */
    const nconv_view *dyv; /* NCHW dy planes, f32 or 16-bit (dy NULL): col then transposed, see planes_cols_task */
    float *col;
    int64_t m0, rows;
    char *scratch;
    size_t scratch_stride;
} cols_ctx;

/* col^T[q][i] = sum_o w[o][q] * dy[o][m0 + i] from dy's planes: A = w^T in tiles of MR columns q
 * ([tile][o][MR]), B = plane rows in place (one pointer per o, per image; 16-bit planes: the
 * run's part of each widened first). Threads take runs of pixels, each element written by one
 * call: the result does not depend on the thread count. */
static void planes_cols_task(void *arg, int tid, int nthreads) {
    const cols_ctx *cc = arg;
    const nconv_view *v = cc->dyv;
    const int64_t Q = cc->g->KS * cc->g->Cg, Og = cc->g->Og, OS = cc->g->OS, step = COL_PANELS * NR;
    const float **b = (const float **)(cc->scratch + (size_t)tid * cc->scratch_stride);
    float *wide = (float *)(b + Og); /* 16-bit planes: [o][step] */
    int64_t u0, u1;
    nconv__split(nconv__div_up(cc->rows, step), tid, nthreads, &u0, &u1);
    int64_t img = -1;
    for (int64_t i = u0 * step, end = u1 * step < cc->rows ? u1 * step : cc->rows; i < end;) {
        const int64_t p = cc->m0 + i, n = p / OS, op = p % OS;
        int64_t len = end - i; /* within one unit and one image */
        if (len > step - i % step) len = step - i % step;
        if (len > OS - op) len = OS - op;
        int64_t boff = op; /* B's first column in each row */
        if (v->dt != NCONV_F32) {
            for (int64_t o = 0; o < Og; o++) {
                cc->cv(len, (const uint16_t *)v->data + n * v->stride[0] + o * v->stride[1] + op, wide + o * step, 1);
                b[o] = wide + o * step;
            }
            boff = 0;
        } else if (n != img) {
            for (int64_t o = 0; o < Og; o++) b[o] = (const float *)v->data + n * v->stride[0] + o * v->stride[1];
            img = n;
        }
        const int64_t np = nconv__div_up(len, NR), nc_last = len - (np - 1) * NR;
        for (int64_t q0 = 0; q0 < Q; q0 += MR)
            cc->k->gemm_ib_np(Q - q0 < MR ? Q - q0 : MR, np, nc_last, Og, cc->wq + q0 * Og, MR, b, boff, NR,
                              cc->col + q0 * cc->rows + i, cc->rows, NULL, 0);
        i += len;
    }
}

static void cols_task(void *arg, int tid, int nthreads) {
    const cols_ctx *cc = arg;
    const int64_t Q = cc->g->KS * cc->g->Cg, Og = cc->g->Og;
    int64_t t0, t1;
    nconv__split(nconv__div_up(cc->rows, MR), tid, nthreads, &t0, &t1);
    const float **a = (const float **)(cc->scratch + (size_t)tid * cc->scratch_stride);
    float *wide = (float *)(a + MR); /* 16-bit dy: the tile's rows, one after another as in dy */
    for (int64_t tile = t0; tile < t1; tile++) {
        const int64_t r0 = tile * MR, mr = cc->rows - r0 < MR ? cc->rows - r0 : MR, O = cc->c->O;
        float *cp[MR];
        if (cc->dy16) {
            cc->cv(mr * O, cc->dy16 + (cc->m0 + r0) * O, wide, 1);
            /* The next tile's rows fetched while this one's GEMM runs, or the widening waits on
             * each of their misses in turn (f32 rows are read by the GEMM, which overlaps them). */
            for (int64_t b = 0; tile + 1 < t1 && b < (int64_t)sizeof(uint16_t) * MR * O; b += 64)
                __builtin_prefetch((const char *)(cc->dy16 + (cc->m0 + r0 + MR) * O) + b);
        }
        for (int64_t r = 0; r < MR; r++)
            a[r] = cc->dy16 ? wide + (r < mr ? r : 0) * O : cc->dy + (cc->m0 + r0 + (r < mr ? r : 0)) * O;
        for (int64_t j0 = 0, p = 0; j0 < Q; j0 += NR, p++) {
            const int64_t nc = Q - j0 < NR ? Q - j0 : NR;
            for (int64_t r = 0; r < mr; r++) cp[r] = cc->col + (r0 + r) * Q + j0;
            cc->k->igemm(mr, nc, Og, 1, a, 0, cc->zero, cc->wq + p * Og * NR, cp, cc->zero, 0);
        }
    }
}

/* The scatter-add of a block of col into the W-padded dx, and at the end
 * the copy of its rows without their W padding into dx (columns no tap
 * reaches stay 0). Threads own disjoint ranges of padded rows (n, i0, i1);
 * each goes over every pixel of the block in order and adds what lands in
 * its rows, so every element is summed in pixel order, whatever the thread
 * count. */
typedef struct scatter_ctx {
    const nconv_core *c;
    const geo *g;
    const float *col; /* element (pixel i, column q) at col[i * ps + q * qs] */
    int64_t ps, qs;
    float *pad, *dst;
    int64_t m0, rows;
    int unpad; /* the final copy instead of a block */
} scatter_ctx;

static void scatter_task(void *arg, int tid, int nthreads) {
    const scatter_ctx *sc = arg;
    const nconv_core *c = sc->c;
    const geo *g = sc->g;
    const int64_t run = c->k[2] * g->Cg;
    int64_t r_lo, r_hi;
    nconv__split(c->N * c->in[0] * c->in[1], tid, nthreads, &r_lo, &r_hi);
    if (sc->unpad) {
        for (int64_t r = r_lo; r < r_hi; r++)
            for (int64_t iw = 0; iw < c->in[2]; iw++) {
                const int64_t jw = iw + c->pb[2];
                float *d = sc->dst + (r * c->in[2] + iw) * c->C;
                if (jw < g->iw_pad) memcpy(d, sc->pad + (r * g->iw_pad + jw) * g->Cg, sizeof(float) * (size_t)g->Cg);
                else memset(d, 0, sizeof(float) * (size_t)g->Cg);
            }
        return;
    }
    /* Output rows (n, o0, o1) at a time: the rows of pad they add to are found once per row
     * (pixel by pixel, the index arithmetic was a tenth of wav2vec2's first layer). */
    for (int64_t i = 0; i < sc->rows;) {
        const int64_t p = sc->m0 + i, n = p / g->OS, op = p % g->OS;
        const int64_t o0 = op / (c->out[1] * c->out[2]), o1 = (op / c->out[2]) % c->out[1], o2 = op % c->out[2];
        const int64_t len = sc->rows - i < c->out[2] - o2 ? sc->rows - i : c->out[2] - o2;
        for (int64_t k0 = 0; k0 < c->k[0]; k0++) {
            const int64_t i0 = o0 * c->s[0] - c->pb[0] + k0 * c->d[0];
            if (i0 < 0 || i0 >= c->in[0]) continue;
            for (int64_t k1 = 0; k1 < c->k[1]; k1++) {
                const int64_t i1 = o1 * c->s[1] - c->pb[1] + k1 * c->d[1];
                const int64_t r = (n * c->in[0] + i0) * c->in[1] + i1;
                if (i1 < 0 || i1 >= c->in[1] || r < r_lo || r >= r_hi) continue;
                for (int64_t l = 0; l < len; l++) {
                    float *d = sc->pad + (r * g->iw_pad + (o2 + l) * c->s[2]) * g->Cg;
                    const float *src = sc->col + (i + l) * sc->ps + (k0 * c->k[1] + k1) * run * sc->qs;
                    for (int64_t j = 0; j < run; j++) d[j] += src[j * sc->qs];
                }
            }
        }
        i += len;
    }
}

static void bwd_d_cols(const nconv_exec *e, const geo *g, const nconv_kernels *k, const float *dy, const uint16_t *dy16,
                       const nconv_view *dyv, const wsrc *w, float *wq, float *pad, float *col, const float *zero,
                       char *scratch, size_t scratch_stride, float *dst) {
    const nconv_core *c = e->c;
    const int64_t Q = g->KS * g->Cg, M = c->N * g->OS;
    /* wq[q0 / wd][o][wd]: column q = t * Cg + ci, in A tiles of w^T (wd = MR) for NCHW dy, else in
     * B panels (wd = NR) */
    const int64_t wd = dyv ? MR : NR;
    for (int64_t q0 = 0; q0 < Q; q0 += wd)
        for (int64_t o = 0; o < g->Og; o++)
            for (int64_t r = 0; r < wd; r++) {
                const int64_t q = q0 + r;
                wq[(q0 / wd * g->Og + o) * wd + r] = q < Q ? wload(w, o, q % g->Cg, q / g->Cg) : 0.0f;
            }
    /* Without left padding or unread trailing columns, the W-padded dx is dx's own layout: the
     * sums go there directly, without a copy after. */
    const int direct = c->G == 1 && c->pb[2] == 0 && g->iw_pad == c->in[2];
    if (direct) pad = dst;
    memset(pad, 0, sizeof(float) * (size_t)(c->N * c->in[0] * c->in[1] * g->iw_pad * g->Cg));
    for (int64_t m0 = 0; m0 < M; m0 += g->col_rows) {
        const int64_t rows = M - m0 < g->col_rows ? M - m0 : g->col_rows;
        cols_ctx cc = {c,   g,   k,  dy,   wq,   zero, dy16, nconv__convert16(k, c->dt), dyv, col, m0,
                       rows, scratch, scratch_stride};
        nconv__parallel(e, dyv ? planes_cols_task : cols_task, &cc);
        scatter_ctx sc = {c, g, col, dyv ? 1 : Q, dyv ? rows : 1, pad, dst, m0, rows, 0};
        nconv__parallel(e, scatter_task, &sc);
    }
    if (direct) return;
    scatter_ctx sc = {c, g, NULL, 0, 0, pad, dst, 0, 0, 1};
    nconv__parallel(e, scatter_task, &sc);
}

static int cols_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (!nconv__igemm_applies(c, dir, why_not)) return 0;
    if (nconv__igemm_cols_shape(c, dir)) return 1;
    if (why_not) *why_not = "bwd_d only, one group, at most 8 input channels, no W dilation, a kernel of 2 taps or more";
    return 0;
}

static void cols_geometry(const nconv_core *c, nconv_direction dir, int threads, geo *g) {
    nconv__igemm_geometry(c, dir, threads, g);
    g->dcols = 1;
}

static size_t cols_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    geo g;
    cols_geometry(c, dir, threads, &g);
    ws_sizes s;
    return nconv__igemm_sizes(c, &g, threads, copies, &s);
}

static nconv_status cols_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    geo g;
    cols_geometry(c, e->dir, e->threads, &g);
    if (!nconv__view_all_finite(e->w)) return (nconv_status)NCONV__DECLINE_W; /* see nconv__view_all_finite */
    igemm_bufs b;
    nconv_status st = nconv__igemm_setup(e, &g, "igemm_cols", &b);
    if (st) return st;
    const ws_sizes s = b.s;
    const unsigned copies = b.copies;
    const nconv_kernels *k = e->k;
    float *xb = b.xb, *packed = b.packed, *init = b.init, *zero = b.zero;
    char *scratch = b.scratch;
    const float *y = b.y;
    const int dy_planes = b.dy_planes;
    const nconv_view *out = e->x;
    const nconv_epi *epi = e->epi;
    int fuse;
    float *dst = nconv__nxc_output(out, epi, xb, &fuse);
    const wsrc ws_ = {e->w, b.toff};
    float *col = nconv__arena_take(e->ws, s.cols);
    /* The padded dx lives after the NHWC dx in xb, where it is copied (see nconv__igemm_sizes). */
    float *pad = xb + (copies & NCONV_COPY_X ? c->N * g.IS * c->C : 0);
    if (!col) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm_cols");
    float *dxb = fuse ? dst : xb;
    bwd_d_cols(e, &g, k, y, b.src16, dy_planes ? &b.dyv : NULL, &ws_, packed, pad, col, zero, scratch,
               nconv__ws_round(s.scratch), dxb);
    if (fuse && epi && (epi->bias || epi->relu)) { /* the transposed forward's bias and relu */
        nconv__epi_init(epi, init, c->C);
        for (int64_t i = 0; i < c->N * g.IS; i++)
            for (int64_t ch = 0; ch < c->C; ch++) {
                const float v = dxb[i * c->C + ch] + init[ch];
                dxb[i * c->C + ch] = epi->relu && v < 0 ? 0.0f : v;
            }
    }
    if (!fuse) nconv__scatter_nxc_f32(e, out, dxb, epi);
    return NCONV_OK;
}

const nconv_algo nconv_algo_igemm_cols = {.name = "igemm_cols", .applies = cols_applies, .workspace = cols_workspace,
                                          .run = cols_run, .declines = {0, NCONV__DECLINES_W, 0}};
