/*
 * Algorithm "depthwise": groups == in_channels == out_channels, on
 * channels-last f32 data with channels as the vector dimension.
 *   fwd:   y[p][c]  = sum_t x[pix(p, t)][c] * w[c][t]
 *   bwd_d: dx[q][c] = sum_t dy[pix'(q, t)][c] * w[c][t]   (a gather: taps whose
 *          output pixel exists; zero padding only)
 *   bwd_w: dw[c][t] = sum_p dy[p][c] * x[pix(p, t)][c]
 * Threads split pixels (fwd, bwd_d) or channel blocks (bwd_w); every output
 * is summed in a fixed order, so results do not depend on the thread count.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { CBLOCK = 64 }; /* bwd_w: channels per thread task */

static int dw_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (c->dt == NCONV_F64) {
        if (why_not) *why_not = "f64 problems run on the reference (f64 accumulation)";
        return 0;
    }
    if (c->G != c->C || c->G != c->O) {
        if (why_not) *why_not = "not depthwise (needs groups == in_channels == out_channels)";
        return 0;
    }
    if (dir == NCONV_DIR_BWD_D && c->mode != NCONV_PAD_ZEROS) {
        if (why_not) *why_not = "bwd_d with a non-zero padding mode needs a scatter (gemm does it)";
        return 0;
    }
    if (nconv__core_kernel_spatial(c) > 65536) { /* per-thread tap pointers */
        if (why_not) *why_not = "kernels of more than 65536 taps";
        return 0;
    }
    return 1;
}

typedef struct dw_sizes {
    size_t x, y, w, init, zero, scratch;
} dw_sizes;

static size_t sizes(const nconv_core *c, int threads, dw_sizes *s) {
    const int64_t KS = nconv__core_kernel_spatial(c);
    s->x = sizeof(float) * (size_t)(c->N * nconv__core_in_spatial(c) * c->C);
    s->y = sizeof(float) * (size_t)(c->N * nconv__core_out_spatial(c) * c->C);
    s->w = sizeof(float) * (size_t)(KS * c->C); /* wt [KS][C], then the bwd_w sums */
    s->init = s->zero = sizeof(float) * (size_t)c->C;
    s->scratch = sizeof(float *) * (size_t)KS;
    return nconv__ws_round(s->x) + nconv__ws_round(s->y) + nconv__ws_round(s->w) + nconv__ws_round(s->init) +
           nconv__ws_round(s->zero) + (size_t)threads * nconv__ws_round(s->scratch);
}

static size_t dw_workspace(const nconv_core *c, nconv_direction dir, int threads) {
    dw_sizes s;
    const size_t own = sizes(c, threads, &s);
    return dir == NCONV_DIR_BWD_D ? nconv__bwd_d_nonfinite_workspace(c, threads, own) : own;
}

typedef struct dw_ctx {
    const nconv_core *c;
    nconv_direction dir;
    const nconv_kernels *k;
    const float *x, *dy, *wt, *init, *zero;
    float *out; /* y (fwd), dx (bwd_d), dw sums [KS][C] (bwd_w) */
    int relu;
    char *scratch;
    size_t scratch_stride;
} dw_ctx;

/* bwd_d: the output coordinate that input coordinate num / s feeds, or -1. */
static inline int64_t out_index(int64_t num, int64_t s, int64_t out) {
    return num >= 0 && num % s == 0 && num / s < out ? num / s : -1;
}

/* Row pointers of every tap for pixel u of image n: input rows of output
 * pixel u (gather = 1, fwd and bwd_w), or the dy rows that input pixel u
 * feeds (gather = 0, bwd_d); d->zero where there is none. */
static void tap_rows(const dw_ctx *d, int gather, int64_t n, const int64_t *u, const float **rows) {
    const nconv_core *c = d->c;
    const int64_t C = c->C;
    const int64_t *other = gather ? c->in : c->out;
    const float *base = gather ? d->x + n * nconv__core_in_spatial(c) * C : d->dy + n * nconv__core_out_spatial(c) * C;
    int64_t t = 0;
    for (int64_t k0 = 0; k0 < c->k[0]; k0++) {
        const int64_t i0 = gather ? nconv__map_index(u[0] * c->s[0] - c->pb[0] + k0 * c->d[0], c->in[0], c->mode)
                                  : out_index(u[0] + c->pb[0] - k0 * c->d[0], c->s[0], c->out[0]);
        for (int64_t k1 = 0; k1 < c->k[1]; k1++) {
            const int64_t i1 = gather ? nconv__map_index(u[1] * c->s[1] - c->pb[1] + k1 * c->d[1], c->in[1], c->mode)
                                      : out_index(u[1] + c->pb[1] - k1 * c->d[1], c->s[1], c->out[1]);
            const float *r01 = i0 < 0 || i1 < 0 ? NULL : base + (i0 * other[1] + i1) * other[2] * C;
            for (int64_t k2 = 0; k2 < c->k[2]; k2++, t++) {
                const int64_t i2 = gather ? nconv__map_index(u[2] * c->s[2] - c->pb[2] + k2 * c->d[2], c->in[2], c->mode)
                                          : out_index(u[2] + c->pb[2] - k2 * c->d[2], c->s[2], c->out[2]);
                rows[t] = !r01 || i2 < 0 ? d->zero : r01 + i2 * C;
            }
        }
    }
}

/* Advances pixel u (and image n) over a grid of size sz. */
static inline void next_pixel(const int64_t *sz, int64_t *u, int64_t *n) {
    if (++u[2] < sz[2]) return;
    u[2] = 0;
    if (++u[1] < sz[1]) return;
    u[1] = 0;
    if (++u[0] < sz[0]) return;
    u[0] = 0;
    ++*n;
}

static void dw_task(void *arg, int tid, int nthreads) {
    const dw_ctx *d = arg;
    const nconv_core *c = d->c;
    const int64_t C = c->C, KS = nconv__core_kernel_spatial(c);
    const float **rows = (const float **)(d->scratch + (size_t)tid * d->scratch_stride);
    const int bwd_d = d->dir == NCONV_DIR_BWD_D;
    const int64_t *sz = bwd_d ? c->in : c->out;
    const int64_t S = sz[0] * sz[1] * sz[2];
    int64_t b, e, n = 0, u[3] = {0, 0, 0};
    if (d->dir == NCONV_DIR_BWD_W) {
        nconv__split((C + CBLOCK - 1) / CBLOCK, tid, nthreads, &b, &e);
        const int64_t c0 = b * CBLOCK, c1 = e * CBLOCK < C ? e * CBLOCK : C;
        if (c0 >= c1) return;
        for (int64_t t = 0; t < KS; t++) memset(d->out + t * C + c0, 0, sizeof(float) * (size_t)(c1 - c0));
        for (int64_t p = 0; p < c->N * S; p++, next_pixel(sz, u, &n)) {
            tap_rows(d, 1, n, u, rows);
            for (int64_t t = 0; t < KS; t++)
                if (rows[t] != d->zero) d->k->vmacc(c1 - c0, d->dy + p * C + c0, rows[t] + c0, d->out + t * C + c0);
        }
        return;
    }
    nconv__split(c->N * S, tid, nthreads, &b, &e);
    if (b >= e) return;
    n = b / S;
    u[0] = (b % S) / (sz[1] * sz[2]), u[1] = ((b % S) / sz[2]) % sz[1], u[2] = (b % S) % sz[2];
    for (int64_t p = b; p < e; p++, next_pixel(sz, u, &n)) {
        tap_rows(d, !bwd_d, n, u, rows);
        d->k->dwconv(C, KS, rows, d->wt, d->init, d->out + p * C, d->relu);
    }
}

static nconv_status dw_run(const nconv_exec *e) {
    if (e->dir == NCONV_DIR_BWD_D && !nconv__view_all_finite(e->w)) return nconv_algo_gemm.run(e);
    const nconv_core *c = e->c;
    const int64_t C = c->C, KS = nconv__core_kernel_spatial(c);
    dw_sizes s;
    sizes(c, e->threads, &s);
    float *xb = nconv__arena_take(e->ws, s.x), *yb = nconv__arena_take(e->ws, s.y);
    float *wt = nconv__arena_take(e->ws, s.w), *init = nconv__arena_take(e->ws, s.init);
    float *zero = nconv__arena_take(e->ws, s.zero);
    char *scratch = nconv__arena_take(e->ws, (size_t)e->threads * nconv__ws_round(s.scratch));
    if (!xb || !yb || !wt || !init || !zero || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm depthwise");
    memset(zero, 0, s.zero);
    dw_ctx d = {c, e->dir, nconv__kernels(), NULL, NULL, wt, NULL, zero, NULL, 0, scratch, nconv__ws_round(s.scratch)};
    if (e->dir != NCONV_DIR_BWD_D) d.x = nconv__nxc_input(e->x, xb);
    if (e->dir != NCONV_DIR_FWD) d.dy = nconv__nxc_input(e->y, yb);
    if (e->dir == NCONV_DIR_BWD_W) {
        d.out = wt;
        nconv__parallel(e->threads, dw_task, &d);
        /* dw[c][0][t] = sums[t][c] */
        const nconv_view *wv = e->w;
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t t = 0; t < KS; t++) {
                const int64_t k0 = t / (c->k[1] * c->k[2]), k1 = (t / c->k[2]) % c->k[1], k2 = t % c->k[2];
                nconv__store1(wv->data, wv->dt, ch * wv->stride[0] + k0 * wv->stride[2] + k1 * wv->stride[3] + k2 * wv->stride[4],
                              wt[t * C + ch]);
            }
        return NCONV_OK;
    }
    /* wt[t][c] = w[c][0][t] */
    const nconv_view *wv = e->w;
    for (int64_t ch = 0; ch < C; ch++)
        for (int64_t t = 0; t < KS; t++) {
            const int64_t k0 = t / (c->k[1] * c->k[2]), k1 = (t / c->k[2]) % c->k[1], k2 = t % c->k[2];
            wt[t * C + ch] = (float)nconv__load(wv->data, wv->dt,
                                                ch * wv->stride[0] + k0 * wv->stride[2] + k1 * wv->stride[3] + k2 * wv->stride[4]);
        }
    const nconv_view *out = e->dir == NCONV_DIR_FWD ? e->y : e->x;
    int fuse;
    d.out = nconv__nxc_output(out, e->epi, e->dir == NCONV_DIR_FWD ? yb : xb, &fuse);
    nconv__epi_init(fuse ? e->epi : NULL, init, C);
    d.init = init;
    d.relu = fuse && e->epi && e->epi->relu;
    nconv__parallel(e->threads, dw_task, &d);
    if (!fuse) nconv__scatter_nxc_f32(out, d.out, e->epi);
    return NCONV_OK;
}

const nconv_algo nconv_algo_depthwise = {"depthwise", dw_applies, dw_workspace, dw_run};
