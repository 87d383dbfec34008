/*
 * Algorithm "depthwise_flat": depthwise (groups == in_channels == out_channels) on f32 planes
 * (NCHW) read and written in place, where each output plane has its source plane's shape (stride
 * 1, the padding of a "same" convolution: MobileNet's, EfficientNet's and ConvNeXt's depthwise
 * layers at stride 1), so that output pixel f of a plane flattened reads source pixel f + off(t)
 * for tap t:
 *   fwd:   y[c][f]  = sum_t w[c][t] * x[c][f + off(t)],   off(t) = sum_i (t_i d_i - p_i) * step_i
 *   bwd_d: dx[c][f] = sum_t w[c][t] * dy[c][f - off(t)]
 *   bwd_w: dw[c][t] = sum_n sum_f dy[n][c][f] * x[n][c][f + off(t)]
 * (step_i: the plane's element stride along dim i), each term where the tap's pixel lies in the
 * plane. A vector of 16 pixels of the flattened plane crosses rows, so a plane of 7 x 7 is 4
 * vectors, not 7 rows of 7 lanes each: small planes, whose rows fill a fraction of a vector, keep
 * their lanes busy, and no row is copied or transposed. Which lanes of a vector a tap may read is
 * one bit mask per (vector, tap), the same for every plane: made once per call (the dwflat kernel
 * reads masked lanes as zeros and nothing there). Threads take runs of (image, channel) planes,
 * each plane's outputs summed by one call in tap order; for bwd_w runs of channels, each
 * channel's taps summed over every image by one call (dwflat_bw, the bias gradient from the
 * same dy): the bits do not depend on the thread count. z, other layouts and dtypes are
 * declined (depthwise computes them); so are non-finite weights in bwd_d, whose masked lanes
 * (dy's zero padding) take products that the reference leaves out.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

/* The masks' table, a mask per (vector, tap), at most this size: it is made on every call. */
#define MASK_BYTES ((int64_t)1 << 20)

static int df_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    (void)dir;
    if (c->dt != NCONV_F32 || c->G != c->C || c->G != c->O) {
        if (why_not) *why_not = "f32 depthwise only (groups == in_channels == out_channels)";
        return 0;
    }
    int same = c->mode == NCONV_PAD_ZEROS;
    for (int i = 0; i < 3; i++) same &= c->s[i] == 1 && c->out[i] == c->in[i];
    if (!same) {
        if (why_not) *why_not = "stride 1, zero padding and outputs the size of the inputs only";
        return 0;
    }
    const int64_t nt = nconv__core_kernel_spatial(c);
    if (nconv__div_up(nconv__core_in_spatial(c), 16) > MASK_BYTES / (2 * nt)) {
        if (why_not) *why_not = "planes whose pixels times taps are at most 8 Mi (a mask per 16 pixels and tap)";
        return 0;
    }
    return 1;
}

/* Bytes of the shared tables: the taps' offsets and their shifts along each dim, the masks
 * ([vector][tap]), the weights ([C][tap]) and the bias. */
typedef struct df_geo {
    int64_t n, nt, nv;
    size_t off, shift, mask, wt, init;
} df_geo;

static void geometry(const nconv_core *c, df_geo *g) {
    g->n = nconv__core_in_spatial(c);
    g->nt = nconv__core_kernel_spatial(c);
    g->nv = nconv__div_up(g->n, 16);
    g->off = sizeof(int64_t) * (size_t)g->nt;
    g->shift = 3 * g->off;
    g->mask = sizeof(uint16_t) * (size_t)(g->nv * g->nt);
    g->wt = sizeof(float) * (size_t)(c->C * g->nt);
    g->init = sizeof(float) * (size_t)c->C;
}

static size_t df_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    (void)dir, (void)threads, (void)copies; /* the operands are read and written in place */
    df_geo g;
    geometry(c, &g);
    return nconv__ws_round(g.off) + nconv__ws_round(g.shift) + nconv__ws_round(g.mask) + nconv__ws_round(g.wt) +
           nconv__ws_round(g.init);
}

typedef struct df_ctx {
    const nconv_exec *e;
    float *dw; /* bwd_w: the sums, [C][tap] (the weights' table) */
    const df_geo *g;
    const nconv_view *sv, *ov; /* the source (x, or dy for bwd_d) and the output */
    const int64_t *off;
    const uint16_t *mask;
    const float *wt, *init;
    int relu;
} df_ctx;

static void df_task(void *arg, int tid, int nthreads) {
    const df_ctx *d = arg;
    const int64_t C = d->e->c->C;
    int64_t b, end;
    nconv__split(d->e->c->N * C, tid, nthreads, &b, &end);
    while (b < end) { /* a run of one image's channels per call */
        const int64_t n = b / C, ch = b % C, nch = C - ch < end - b ? C - ch : end - b;
        const float *src = (const float *)d->sv->data + n * d->sv->stride[0] + ch * d->sv->stride[1];
        float *out = (float *)d->ov->data + n * d->ov->stride[0] + ch * d->ov->stride[1];
        d->e->k->dwflat(nch, d->g->n, d->g->nt, d->off, d->mask, src, d->sv->stride[1], d->wt + ch * d->g->nt,
                        d->init + ch, out, d->ov->stride[1], d->relu);
        b += nch;
    }
}

/* The weights as the kernels read them, [C][tap] in w's tap order, into wt; whether they are all
 * finite. */
static int gather_w(const nconv_core *c, const nconv_view *w, float *wt) {
    const int64_t nt = nconv__core_kernel_spatial(c);
    int finite = 1;
    for (int64_t ch = 0; ch < c->C; ch++) finite &= nconv__dw_gather_w(c, w, ch, 0, wt + ch * nt);
    return finite;
}

/* bwd_w: a thread's channels, each over every image in one call. */
static void bw_task(void *arg, int tid, int nthreads) {
    const df_ctx *d = arg;
    const nconv_exec *e = d->e;
    const nconv_view *x = e->x, *dy = e->y;
    const int64_t C = e->c->C, nt = d->g->nt;
    double *lanes = e->db_lanes;
    int64_t b, end;
    nconv__split(C, tid, nthreads, &b, &end);
    for (int64_t ch = b; ch < end; ch++) {
        float *acc = d->dw + ch * nt, db = 0.0f;
        memset(acc, 0, sizeof(float) * (size_t)nt);
        e->k->dwflat_bw(1, e->c->N, d->g->n, nt, d->off, d->mask, (const float *)x->data + ch * x->stride[1],
                        x->stride[1], x->stride[0], (const float *)dy->data + ch * dy->stride[1], dy->stride[1],
                        dy->stride[0], acc, lanes ? &db : NULL);
        for (int l = 0; lanes && l < 4; l++) lanes[l * C + ch] = l ? 0.0 : db;
        nconv__dw_store_w(e->c, e->w, ch, acc);
    }
}

static nconv_status df_run(const nconv_exec *e) {
    const int bw = e->dir == NCONV_DIR_BWD_W;
    if ((!bw && e->epi && e->epi->z) || !nconv__view_is_planar_f32(e->x) || !nconv__view_is_planar_f32(e->y))
        return (nconv_status)NCONV__DECLINE_LAYOUT;
    const nconv_core *c = e->c;
    const int bwd_d = e->dir == NCONV_DIR_BWD_D;
    df_geo g;
    geometry(c, &g);
    int64_t *off = nconv__arena_take(e->ws, g.off), (*sh)[3] = nconv__arena_take(e->ws, g.shift);
    uint16_t *mask = nconv__arena_take(e->ws, g.mask);
    float *wt = nconv__arena_take(e->ws, g.wt), *init = nconv__arena_take(e->ws, g.init);
    const nconv_view *w = e->w;
    if (!off || !sh || !mask || !wt || !init)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm depthwise_flat");
    const float *wts = e->packed && !bw ? e->packed : wt; /* packed: as gather_w made it, finite for bwd_d */
    if (!bw && !e->packed && !gather_w(c, w, wt) && bwd_d) return (nconv_status)NCONV__DECLINE_W;
    /* tap t's shift along each dim, sh[t][i] = t_i d_i - p_i, negated for bwd_d; its lanes, those
     * whose pixel p (walked in order, its coordinates carried) has p + sh inside the plane */
    const int64_t *sz = c->in, step[3] = {c->in[1] * c->in[2], c->in[2], 1};
    for (int64_t t = 0; t < g.nt; t++) {
        const int64_t a[3] = {t / (c->k[1] * c->k[2]), t / c->k[2] % c->k[1], t % c->k[2]};
        off[t] = 0;
        for (int i = 0; i < 3; i++) {
            sh[t][i] = (a[i] * c->d[i] - c->pb[i]) * (bwd_d ? -1 : 1);
            off[t] += sh[t][i] * step[i];
        }
    }
    memset(mask, 0, g.mask);
    for (int64_t f = 0, p[3] = {0, 0, 0}; f < g.n; f++) {
        for (int64_t t = 0; t < g.nt; t++) {
            int in = 1;
            for (int i = 0; i < 3; i++) in &= p[i] + sh[t][i] >= 0 && p[i] + sh[t][i] < sz[i];
            if (in) mask[(f / 16) * g.nt + t] |= (uint16_t)(1u << (f % 16));
        }
        for (int i = 2; i >= 0 && ++p[i] == sz[i]; i--) p[i] = 0; /* the next pixel's coordinates */
    }
    /* (a transposed convolution's forward is the core bwd_d, with its bias and relu) */
    nconv__epi_init(e->epi, init, c->C);
    df_ctx d = {.e = e, .dw = wt, .g = &g, .sv = bwd_d ? e->y : e->x, .ov = bwd_d ? e->x : e->y, .off = off,
                .mask = mask, .wt = wts, .init = init, .relu = e->epi && e->epi->relu};
    nconv__parallel(e, bw ? bw_task : df_task, &d);
    if (bw && e->db_lanes) *e->db_done = 1;
    return NCONV_OK;
}

/* With 16-lane vectors, 3 x 3 taps (and smaller) on planes whose rows are 7 to 14 pixels (bwd_w:
 * 7 to 13): a row there fills at most one vector, and both depthwise_planes' rows (a fraction of
 * a vector each) and depthwise's channel blocks (a transpose of every plane in and out) lose to
 * the flattened plane. With more taps, each a masked load of its own, or wider rows they do not;
 * nor does bwd_w against depthwise_planes' on rows of 14 (BENCHMARKS.md). */
static int df_preferred(const nconv_core *c, nconv_direction dir) {
    const int64_t widest = dir == NCONV_DIR_BWD_W ? 13 : 14;
    return nconv__kernels()->dw_vl >= 16 && c->k[0] == 1 && c->k[1] <= 3 && c->k[2] <= 3 && c->in[2] >= 7 &&
           c->in[2] <= widest && c->in[1] > 1;
}

/* Prepacked weights (fwd, bwd_d): the [C][tap] table, the same for both directions; bwd_d's with
 * a non-finite weight is declined, as run would. */
static size_t df_pack_size(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch) {
    (void)threads;
    *scratch = 0;
    return dir == NCONV_DIR_BWD_W ? 0 : sizeof(float) * (size_t)(c->C * nconv__core_kernel_spatial(c));
}

static nconv_status df_pack(const nconv_exec *e, void *dst) {
    if (!gather_w(e->c, e->w, dst) && e->dir == NCONV_DIR_BWD_D) return (nconv_status)NCONV__DECLINE_W;
    return NCONV_OK;
}

/* Not where the activations are channels-last: they would always be declined. */
static int df_suits(unsigned copies) { return !(copies & NCONV_ACTS_NXC); }

const nconv_algo nconv_algo_depthwise_flat = {
    .name = "depthwise_flat", .applies = df_applies, .workspace = df_workspace, .run = df_run,
    .preferred = df_preferred,
    .declines = {NCONV__DECLINES_LAYOUT, NCONV__DECLINES_LAYOUT | NCONV__DECLINES_W, NCONV__DECLINES_LAYOUT},
    .suits = df_suits, .pack_size = df_pack_size, .pack = df_pack};
