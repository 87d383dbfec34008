/*
 * Algorithm "stem": the forward and backward-weights of layers with few input channels (one
 * group, at most 4: the first layer of image networks, raw audio) by direct convolution. As a
 * GEMM the forward's reduction is C * taps long (27 for a 3x3 RGB stem), so short that gathering
 * the columns costs as much as the products. Here every input is read where it lies and used for
 * many outputs in registers:
 *   channels-last y: output channels are the vector dimension, each tap of a pixel is one
 *     broadcast of an input read in place in any layout (the stem micro-kernel);
 *   NCHW x and y, zero padding, W strides 1 and 2 (planes_fit): pixels of an output row are the
 *     vector dimension, each tap a load of its source row (stem_planes). At stride 2 the rows
 *     are first split into their two column phases, so that a tap reads consecutive elements.
 *   backward-weights: the forward's channels-last taps, each tap's sums over the pixels of a
 *     row kept in registers (stem_bw); dy read in place from channels-last rows, or from NCHW
 *     planes through a transpose of each piece of a row.
 * Other operands (z, other layouts, other planes) are declined: the implicit GEMMs compute them.
 *
 * A unit is an output row (image, depth, height). Its taps are those of the input rows that lie
 * inside the input (under zero padding the others only multiply zeros; the other modes map them
 * inside). Channels-last: the pixels whose taps all lie inside the row (the interior) run
 * through the kernel with one list of taps, the few at the edges one by one with their own.
 * Products with zero padding are left out, where PyTorch and the reference compute them: the
 * forward declines a non-finite weight (they would be NaN); backward-weights adds them for the
 * pixels whose dy is not finite (pad_products). Each output is summed in one order: results do
 * not depend on the thread count.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum {
    MAX_C = 4,            /* input channels at most: more fill the reduction of a GEMM */
    MAX_TAPS = 4096,      /* channels x kernel taps at most: a unit's tap lists stay small */
    MIN_TAPS = 16,        /* the heuristic's range (stem_preferred) */
    MAX_TAPS_PREFERRED = 100,
    MAX_ROW = 1 << 20,    /* floats of a unit's source rows at most (their phases, per thread) */
    VL = 16,              /* output channels are padded to whole vectors of the widest ISA */
    CHUNK_FLOATS = 8192,  /* outputs of a kernel call on channels-last y: 32 KiB */
    PLANES_FLOATS = 4096, /* see planes_fit */
    BW_FLOATS = 4096,     /* bwd_w: dy rows of a kernel call (16 KiB: in L1 over the taps' passes) */
    BW_CHUNKS = 64,       /* bwd_w: sums of this many pixel chunks at most, added in order */
    BW_MIN_PLANE_RUN = 32 /* bwd_w: the fewest pixels a piece reads from each of dy's NCHW planes */
};
#define BW_SUMS_BYTES ((size_t)16 << 20) /* bwd_w: the chunks' sums at most */
#define STREAM_BYTES (2 * NCONV_STREAM_OUTPUT_BYTES)

static int64_t source_rows(const nconv_core *c) { return c->C * c->k[0] * c->k[1]; }

static int stem_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (dir == NCONV_DIR_BWD_D || c->dt != NCONV_F32 || c->G != 1 || c->C > MAX_C ||
        c->C * nconv__core_kernel_spatial(c) > MAX_TAPS || source_rows(c) * (c->in[2] + c->s[2]) > MAX_ROW) {
        if (why_not)
            *why_not = "f32 forward or backward-weights of one group with at most 4 input channels, 4096 taps and "
                       "2^20 elements of source rows per output row";
        return 0;
    }
    return 1;
}

static int64_t o_pad(const nconv_core *c) { return nconv__div_up(c->O, VL) * VL; }
static int64_t taps(const nconv_core *c) { return c->C * nconv__core_kernel_spatial(c); }

/* Per thread: a unit's tap lists (unit_taps, 6 of them), then its source rows split by phase. */
static size_t lists_bytes(const nconv_core *c) { return nconv__ws_round(6 * sizeof(int64_t) * (size_t)taps(c)); }
/* A source row split into its column phases, each as long as the first. */
static int64_t split_row(const nconv_core *c) { return c->s[2] * nconv__div_up(c->in[2], c->s[2]); }
static size_t thread_bytes(const nconv_core *c) {
    return lists_bytes(c) + nconv__ws_round(sizeof(float) * (size_t)(source_rows(c) * split_row(c)));
}
static size_t pack_bytes(const nconv_core *c) { return sizeof(float) * (size_t)(taps(c) * o_pad(c)); }

/* bwd_w: the pixels of a kernel call (dy rows of BW_FLOATS, at least a vector's width of them),
 * the pixel chunks whose sums are kept apart (a count that does not depend on the threads), and
 * the bytes of a chunk's sums ([taps][o_pad] floats, then db's row of o_pad). */
static int64_t bw_pixels(const nconv_core *c) { return BW_FLOATS / o_pad(c) > VL ? BW_FLOATS / o_pad(c) : VL; }
static size_t bw_sums_bytes(const nconv_core *c) { return sizeof(float) * (size_t)((taps(c) + 1) * o_pad(c)); }
static int64_t bw_chunks(const nconv_core *c) {
    const int64_t units = c->N * c->out[0] * c->out[1], fit = (int64_t)(BW_SUMS_BYTES / bw_sums_bytes(c));
    const int64_t k = units < 1 ? 1 : units < BW_CHUNKS ? units : BW_CHUNKS; /* chunk 0 holds the sums */
    return k < fit ? k : fit > 1 ? fit : 1;
}
static size_t bw_thread_bytes(const nconv_core *c) {
    return lists_bytes(c) + nconv__ws_round(sizeof(float) * (size_t)(bw_pixels(c) * o_pad(c)));
}

static size_t stem_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    (void)copies;
    if (dir == NCONV_DIR_BWD_W)
        return 64 + nconv__ws_round((size_t)bw_chunks(c) * bw_sums_bytes(c)) +
               (size_t)threads * nconv__thread_stride(bw_thread_bytes(c));
    return 64 + nconv__ws_round(pack_bytes(c)) + nconv__ws_round(sizeof(float) * (size_t)o_pad(c)) +
           (size_t)threads * nconv__thread_stride(thread_bytes(c));
}

/* dst[t][o]: tap t = (c, kd, kh, kw) in order, o_pad lanes a tap (zeros past O); 0 with a
 * non-finite weight. */
static int pack_weights(const nconv_core *c, const nconv_view *w, float *dst) {
    const int64_t op = o_pad(c), T = taps(c), K12 = c->k[1] * c->k[2];
    const float *wd = w->data;
    memset(dst, 0, sizeof(float) * (size_t)(T * op));
    for (int64_t t = 0; t < T; t++) {
        const int64_t ch = t / (c->k[0] * K12), k0 = t / K12 % c->k[0], k1 = t / c->k[2] % c->k[1], k2 = t % c->k[2];
        const int64_t off = ch * w->stride[1] + k0 * w->stride[2] + k1 * w->stride[3] + k2 * w->stride[4];
        for (int64_t o = 0; o < c->O; o++) {
            const float v = wd[off + o * w->stride[0]];
            if (v - v != 0) return 0; /* Inf or NaN */
            dst[t * op + o] = v;
        }
    }
    return 1;
}

typedef struct stem_ctx {
    const nconv_exec *e;
    const float *wp, *init;
    char *scratch;
    size_t stride; /* a thread's scratch */
    int planes;    /* NCHW x and y: stem_planes; else channels-last y: stem */
    int flags;     /* the kernels': relu, streamed stores */
} stem_ctx;

/* Forward: reductions shorter than MIN_TAPS (raw audio: 10) leave the kernels too few products
 * per block for its loads of weights and its stores; longer than MAX_TAPS_PREFERRED (ResNet's
 * 7 x 7 RGB stem: 147), they amortize a GEMM's packing, and the implicit GEMMs ran as fast or
 * faster: the heuristic leaves both to them. Backward-weights: short reductions as well ran
 * faster than on igemm; ResNet's stem on NCHW planes with two threads ran slower (BENCHMARKS.md). */
static int stem_preferred(const nconv_core *c, nconv_direction dir) {
    return (dir == NCONV_DIR_BWD_W || taps(c) >= MIN_TAPS) && taps(c) <= MAX_TAPS_PREFERRED;
}

/* Element offset of pixel (n, od, oh, ow) of activation view v. */
static int64_t pixel(const nconv_view *v, int64_t n, int64_t od, int64_t oh, int64_t ow) {
    return n * v->stride[0] + od * v->stride[2] + oh * v->stride[3] + ow * v->stride[4];
}

/* A unit's taps: the (channel, kd, kh) rows of them inside the input (offset in x, first
 * weight row), and two lists: channels-last, the interior's first pixel's taps (offset in x,
 * weight row) and an edge pixel's; planes, the rows' starts (in x, or their phases in the
 * thread's buffer) and the offset, position and length of each kw tap's run in a row. */
typedef struct unit_taps {
    int64_t nr, *roff, *rw, *xo, *wo, *xe, *we;
} unit_taps;

/* The source rows of output row (n, od, oh): u's nr, roff, rw. */
static void unit_rows(const nconv_core *c, const nconv_view *x, unit_taps *u, int64_t n, int64_t od, int64_t oh) {
    const int64_t op = o_pad(c), K12 = c->k[1] * c->k[2];
    u->nr = 0;
    for (int64_t ch = 0; ch < c->C; ch++)
        for (int64_t k0 = 0; k0 < c->k[0]; k0++) {
            const int64_t id = nconv__map_index(od * c->s[0] + k0 * c->d[0] - c->pb[0], c->in[0], c->mode);
            for (int64_t k1 = 0; id >= 0 && k1 < c->k[1]; k1++) {
                const int64_t ih = nconv__map_index(oh * c->s[1] + k1 * c->d[1] - c->pb[1], c->in[1], c->mode);
                if (ih < 0) continue;
                u->roff[u->nr] = n * x->stride[0] + ch * x->stride[1] + id * x->stride[2] + ih * x->stride[3];
                u->rw[u->nr++] = (ch * c->k[0] + k0) * K12 * op + k1 * c->k[2] * op;
            }
        }
}

/* The interior [*a, *b) of an output row: the pixels every tap of which lies inside the row
 * (empty: both OW). Its tap lists in u (xo, wo) for pixel *a; returns their length. */
static int64_t interior_taps(const nconv_core *c, const nconv_view *x, unit_taps *u, int64_t *a, int64_t *b) {
    const int64_t op = o_pad(c), KW = c->k[2], s2 = c->s[2], d2 = c->d[2], p2 = c->pb[2], xw = x->stride[4];
    const int64_t reach = c->in[2] - 1 + p2 - (KW - 1) * d2;
    *a = nconv__div_up(p2, s2), *b = reach < 0 ? 0 : reach / s2 + 1;
    if (*b > c->out[2]) *b = c->out[2];
    if (*a >= *b) *a = *b = c->out[2];
    int64_t nt = 0;
    for (int64_t r = 0; r < u->nr; r++)
        for (int64_t k2 = 0; k2 < KW; k2++, nt++)
            u->xo[nt] = u->roff[r] + (*a * s2 + k2 * d2 - p2) * xw, u->wo[nt] = u->rw[r] + k2 * op;
    return nt;
}

/* The tap lists of edge pixel ow in u (xe, we: offsets in x), its taps inside the row (zero
 * padding) or mapped into it; returns their length. */
static int64_t edge_taps(const nconv_core *c, const nconv_view *x, unit_taps *u, int64_t ow) {
    int64_t ne = 0;
    for (int64_t r = 0; r < u->nr; r++)
        for (int64_t k2 = 0; k2 < c->k[2]; k2++) {
            const int64_t iw = nconv__map_index(ow * c->s[2] + k2 * c->d[2] - c->pb[2], c->in[2], c->mode);
            if (iw >= 0) u->xe[ne] = u->roff[r] + iw * x->stride[4], u->we[ne++] = u->rw[r] + k2 * o_pad(c);
        }
    return ne;
}

/* The next pixel of [c0, c1) after ow that is not in the interior's part [lo, hi) (taken whole). */
static int64_t next_edge(int64_t ow, int64_t lo, int64_t hi) { return ow + 1 == lo && hi > lo ? hi : ow + 1; }
static int64_t first_edge(int64_t c0, int64_t lo, int64_t hi) { return lo == c0 && hi > lo ? hi : c0; }

/* Channels-last y: output row (n, od, oh) in chunks, each the interior's part in one call and
 * the edge pixels one at a time. */
static void row_nxc(const stem_ctx *s, unit_taps *u, int64_t n, int64_t od, int64_t oh) {
    const nconv_exec *e = s->e;
    const nconv_core *c = e->c;
    const nconv_view *x = e->x, *y = e->y;
    const int64_t op = o_pad(c), OW = c->out[2], xs = c->s[2] * x->stride[4], ys = y->stride[4];
    const float *xd = x->data;
    float *yrow = (float *)y->data + pixel(y, n, od, oh, 0);
    int64_t a, b;
    const int64_t nt = interior_taps(c, x, u, &a, &b);
    /* chunks whose outputs stay in L1 while the kernel's passes over the channels complete them */
    const int64_t chunk = CHUNK_FLOATS / op > VL ? CHUNK_FLOATS / op / VL * VL : VL;
    for (int64_t c0 = 0; c0 < OW; c0 += chunk) {
        const int64_t c1 = OW - c0 < chunk ? OW : c0 + chunk, lo = a > c0 ? a : c0, hi = b < c1 ? b : c1;
        if (lo < hi)
            e->k->stem(hi - lo, c->O, nt, xd + (lo - a) * xs, u->xo, xs, s->wp, u->wo, s->init, yrow + lo * ys, ys,
                       s->flags);
        for (int64_t ow = first_edge(c0, lo, hi); ow < c1; ow = next_edge(ow, lo, hi)) {
            const int64_t ne = edge_taps(c, x, u, ow);
            e->k->stem(1, c->O, ne, xd, u->xe, 0, s->wp, u->we, s->init, yrow + ow * ys, ys, s->flags);
        }
    }
}

/* NCHW planes: output row (n, od, oh) in one stem_planes call. At stride 1 the kernel reads the
 * source rows in place; at stride s each is first split into its s column phases (phase q holds
 * columns q, q + s, ...), where tap kw reads phase (kw d - p) mod s from column (kw d - p) div s on. */
static void row_planes(const stem_ctx *s, unit_taps *u, float *split, int64_t n, int64_t od, int64_t oh) {
    const nconv_exec *e = s->e;
    const nconv_core *c = e->c;
    const int64_t W = c->in[2], KW = c->k[2], s2 = c->s[2], ps = nconv__div_up(W, s2);
    const float **rows = (const float **)u->xo; /* the channels-last lists' room */
    int64_t *koff = u->wo, *toff = u->xe, *tlen = u->we;
    for (int64_t r = 0; r < u->nr; r++) {
        const float *src = (const float *)e->x->data + u->roff[r];
        if (s2 == 1) {
            rows[r] = src;
            continue;
        }
        e->k->phases(W, s2, src, split + r * s2 * ps, ps);
        rows[r] = split + r * s2 * ps;
    }
    for (int64_t k2 = 0; k2 < KW; k2++) {
        const int64_t at = k2 * c->d[2] - c->pb[2], q = ((at % s2) + s2) % s2, start = (at - q) / s2;
        koff[k2] = q * ps, toff[k2] = start, tlen[k2] = (W - q + s2 - 1) / s2;
    }
    const nconv_view *y = e->y;
    e->k->stem_planes(c->out[2], c->O, u->nr, rows, s->wp, u->rw, KW, koff, toff, tlen, o_pad(c), s->init,
                      (float *)y->data + pixel(y, n, od, oh, 0), y->stride[1], s->flags);
}

static void stem_task(void *arg, int tid, int nthreads) {
    const stem_ctx *s = arg;
    const nconv_exec *e = s->e;
    const nconv_core *c = e->c;
    const int64_t T = taps(c), OD = c->out[0], OH = c->out[1];
    int64_t *lists = (int64_t *)(s->scratch + (size_t)tid * s->stride);
    unit_taps u = {0, lists, lists + T, lists + 2 * T, lists + 3 * T, lists + 4 * T, lists + 5 * T};
    float *split = (float *)((char *)lists + lists_bytes(c));
    int64_t u0, u1;
    nconv__split(c->N * OD * OH, tid, nthreads, &u0, &u1);
    for (int64_t i = u0; i < u1; i++) {
        const int64_t n = i / (OD * OH), od = i / OH % OD, oh = i % OH;
        unit_rows(c, e->x, &u, n, od, oh);
        if (s->planes) row_planes(s, &u, split, n, od, oh);
        else row_nxc(s, &u, n, od, oh);
    }
    if (s->flags & NCONV_STEM_STREAM) nconv__stream_fence();
}

/* stem_planes where a unit's source rows (their phases) and a channel block's weights (a line a
 * tap) fill at most a third of L1 (PLANES_FLOATS), at strides 1 and 2: larger ones and those at
 * wider strides ran slower than igemm_planes with two threads. With 8-lane vectors, whose blocks
 * add half the products per load, at stride 2 only: at stride 1 igemm_planes, which reads its
 * rows without splitting them, was faster. */
static int planes_fit(const nconv_core *c, const nconv_kernels *k) {
    return (c->s[2] == 2 || (c->s[2] == 1 && k->dw_vl >= 16)) &&
           source_rows(c) * split_row(c) + taps(c) * VL <= PLANES_FLOATS;
}

/* ---------------------------------------------------------------- backward-weights */

/* bwd_w: dw[o][t] = sum over the output pixels of x(pixel, t) * dy[pixel][o], output channels as
 * the vector dimension (the stem_bw kernel: a tile of taps by channel vectors summed in registers
 * over a run of pixels), the same tap lists as the forward's channels-last path. Units (output
 * rows) fall into a fixed number of chunks, each summed apart and the chunks added in order, so
 * the bits do not depend on the thread count. */
typedef struct bw_ctx {
    const nconv_exec *e;
    char *sums;    /* per chunk, bw_sums_bytes apart */
    char *scratch; /* per thread, stride apart: tap lists, then a piece of dy rows */
    size_t stride;
    int64_t chunks;
} bw_ctx;

/* Whether the O floats of dy's row d are all finite. */
static int row_finite(const float *d, int64_t O) {
    int ok = 1;
    for (int64_t o = 0; o < O; o++) ok &= d[o] - d[o] == 0.0f;
    return ok;
}

/* The products a pixel's taps in zero padding make with its dy row d, which the kernel calls
 * leave out: zeros, or NaN where dy is not finite (PyTorch's and the reference's 0 * Inf); added
 * where d holds a non-finite value. */
static void pad_products(const nconv_core *c, int64_t od, int64_t oh, int64_t ow, const float *d, float *sums) {
    if (row_finite(d, c->O)) return;
    const int64_t op = o_pad(c), K12 = c->k[1] * c->k[2];
    for (int64_t t = 0; t < taps(c); t++) {
        const int64_t k0 = t / K12 % c->k[0], k1 = t / c->k[2] % c->k[1], k2 = t % c->k[2];
        const int64_t at[3] = {od * c->s[0] + k0 * c->d[0] - c->pb[0], oh * c->s[1] + k1 * c->d[1] - c->pb[1],
                               ow * c->s[2] + k2 * c->d[2] - c->pb[2]};
        int inside = 1;
        for (int a = 0; a < 3; a++) inside &= at[a] >= 0 && at[a] < c->in[a];
        for (int64_t o = 0; !inside && o < c->O; o++) sums[t * op + o] += 0.0f * d[o];
    }
}

/* The dy rows of n pixels from p as lines to fetch ahead: the kernel's first pass over them
 * otherwise waits on memory. */
static nconv_lines dy_lines(const nconv_view *y, const float *p, int64_t n, int64_t O) {
    const int64_t yw = y->stride[4];
    if (y->stride[1] != 1) return (nconv_lines){p, O, n, y->stride[1]}; /* planes: a row per channel */
    if (yw == O) return (nconv_lines){p, 1, n * O, 0};                  /* one run */
    return (nconv_lines){p, n, O, yw};
}

/* Output row (n, od, oh) added into a chunk's sums (and db's), in pieces of bw_pixels: dy
 * read in place (channels-last rows of whole vectors), else copied (channels-last) or transposed
 * (planes) into dyb as rows of o_pad floats; the interior's part in one call, the edge pixels one
 * at a time. The calls leave out the products with zero padding (see pad_products). */
static void row_bw(const bw_ctx *b, unit_taps *u, float *dyb, int64_t n, int64_t od, int64_t oh, const float *next,
                   float *sums, float *db) {
    const nconv_exec *e = b->e;
    const nconv_core *c = e->c;
    const nconv_view *x = e->x, *y = e->y;
    const int64_t op = o_pad(c), O = c->O, OW = c->out[2], xs = c->s[2] * x->stride[4], piece = bw_pixels(c);
    const int64_t yw = y->stride[4], taps_row = u->nr * c->k[2];
    const float *xd = x->data, *yd = (const float *)y->data + pixel(y, n, od, oh, 0);
    const int nxc = y->stride[1] == 1, in_place = nxc && O % VL == 0, dropped = u->nr < source_rows(c);
    int64_t a, z;
    const int64_t nt = interior_taps(c, x, u, &a, &z);
    for (int64_t c0 = 0; c0 < OW; c0 += piece) {
        const int64_t c1 = OW - c0 < piece ? OW : c0 + piece, lo = a > c0 ? a : c0, hi = z < c1 ? z : c1;
        /* the next piece, of this row or the next (next: its dy, or NULL) */
        const nconv_lines ahead = c1 < OW ? dy_lines(y, yd + c1 * yw, OW - c1 < piece ? OW - c1 : piece, O)
                                          : dy_lines(y, next, OW < piece ? OW : piece, O);
        const float *d = dyb;
        int64_t ds = op;
        if (in_place) d = yd + c0 * yw, ds = yw;
        else if (nxc)
            for (int64_t i = c0; i < c1; i++) memcpy(dyb + (i - c0) * op, yd + i * yw, sizeof(float) * (size_t)O);
        else e->k->transpose(O, c1 - c0, yd + c0, y->stride[1], dyb, op);
        for (int64_t ow = c0; dropped && ow < c1; ow++) pad_products(c, od, oh, ow, d + (ow - c0) * ds, sums);
        if (lo < hi)
            e->k->stem_bw(hi - lo, op, nt, xd + (lo - a) * xs, u->xo, xs, d + (lo - c0) * ds, ds, sums, u->wo, db,
                          &ahead);
        for (int64_t ow = first_edge(c0, lo, hi); ow < c1; ow = next_edge(ow, lo, hi)) {
            const int64_t ne = edge_taps(c, x, u, ow);
            if (ne < taps_row && !dropped) pad_products(c, od, oh, ow, d + (ow - c0) * ds, sums);
            e->k->stem_bw(1, op, ne, xd, u->xe, 0, d + (ow - c0) * ds, ds, sums, u->we, db, NULL);
        }
    }
}

static void bw_task(void *arg, int tid, int nthreads) {
    const bw_ctx *b = arg;
    const nconv_exec *e = b->e;
    const nconv_core *c = e->c;
    const int64_t T = taps(c), OD = c->out[0], OH = c->out[1], units = c->N * OD * OH;
    int64_t *lists = (int64_t *)(b->scratch + (size_t)tid * b->stride);
    unit_taps u = {0, lists, lists + T, lists + 2 * T, lists + 3 * T, lists + 4 * T, lists + 5 * T};
    float *dyb = (float *)((char *)lists + lists_bytes(c));
    memset(dyb, 0, sizeof(float) * (size_t)(bw_pixels(c) * o_pad(c))); /* lanes past O stay zero */
    int64_t ch0, ch1;
    nconv__split(b->chunks, tid, nthreads, &ch0, &ch1);
    for (int64_t ch = ch0; ch < ch1; ch++) {
        char *cs = b->sums + (size_t)ch * bw_sums_bytes(c);
        float *sums = (float *)cs, *db = e->db_lanes ? sums + T * o_pad(c) : NULL;
        memset(cs, 0, bw_sums_bytes(c));
        int64_t u0, u1;
        nconv__split(units, (int)ch, (int)b->chunks, &u0, &u1);
        for (int64_t i = u0; i < u1; i++) {
            const int64_t n = i / (OD * OH), od = i / OH % OD, oh = i % OH;
            const int64_t j = i + 1 < u1 ? i + 1 : -1;
            const float *next =
                j < 0 ? NULL : (const float *)e->y->data + pixel(e->y, j / (OD * OH), j / OH % OD, j % OH, 0);
            unit_rows(c, e->x, &u, n, od, oh);
            row_bw(b, &u, dyb, n, od, oh, next, sums, db);
        }
    }
}

/* The chunks' sums added into chunk 0 in chunk order (nconv__add_chunks), threads taking ranges. */
static void bw_sum_task(void *arg, int tid, int nthreads) {
    const bw_ctx *b = arg;
    const nconv_core *c = b->e->c;
    nconv__add_chunks(tid, nthreads, (float *)b->sums, (taps(c) + 1) * o_pad(c), b->chunks, NULL, NULL, 0);
}

/* dw from chunk 0's sums, tap t = (c, kd, kh, kw); db into its lane 0. */
static void bw_write(const nconv_exec *e, const float *sums) {
    const nconv_core *c = e->c;
    const nconv_view *w = e->w;
    const int64_t op = o_pad(c), T = taps(c), K12 = c->k[1] * c->k[2];
    for (int64_t t = 0; t < T; t++) {
        const int64_t ch = t / (c->k[0] * K12), k0 = t / K12 % c->k[0], k1 = t / c->k[2] % c->k[1], k2 = t % c->k[2];
        const int64_t base = ch * w->stride[1] + k0 * w->stride[2] + k1 * w->stride[3] + k2 * w->stride[4];
        for (int64_t o = 0; o < c->O; o++) {
            const int64_t off = base + o * w->stride[0];
            if (w->dt != NCONV_F32) nconv__store1(w->data, w->dt, off, sums[t * op + o]);
            else ((float *)w->data)[off] = sums[t * op + o];
        }
    }
    if (!e->db_lanes) return;
    memset(e->db_lanes, 0, 4 * sizeof(double) * (size_t)c->O);
    for (int64_t o = 0; o < c->O; o++) e->db_lanes[o] = sums[T * op + o];
}

static nconv_status bw_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    const nconv_view *y = e->y;
    if (y->stride[1] != 1 && y->stride[4] != 1) return (nconv_status)NCONV__DECLINE_OWN; /* no rows to read */
    /* NCHW planes of many channels: pieces of a line or two of each plane (wav2vec2's 512 channels:
     * 16 pixels) ran 1.6x slower than igemm with two threads */
    if (y->stride[1] != 1 && BW_FLOATS / o_pad(c) < BW_MIN_PLANE_RUN) return (nconv_status)NCONV__DECLINE_OWN;
    const int64_t chunks = bw_chunks(c);
    const size_t stride = nconv__thread_stride(bw_thread_bytes(c));
    char *sums = nconv__arena_take(e->ws, (size_t)chunks * bw_sums_bytes(c));
    char *scratch = nconv__arena_take(e->ws, (size_t)e->threads * stride);
    if (!sums || !scratch) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm stem");
    bw_ctx b = {.e = e, .sums = sums, .scratch = scratch, .stride = stride, .chunks = chunks};
    nconv__parallel(e, bw_task, &b);
    if (chunks > 1) nconv__parallel(e, bw_sum_task, &b);
    bw_write(e, (const float *)sums);
    if (e->db_lanes) *e->db_done = 1;
    return NCONV_OK;
}

static nconv_status stem_run(const nconv_exec *e) {
    if (e->dir == NCONV_DIR_BWD_W) return bw_run(e);
    const nconv_core *c = e->c;
    const nconv_view *x = e->x, *y = e->y;
    const int planes = y->stride[4] == 1 && x->stride[4] == 1 && c->mode == NCONV_PAD_ZEROS && planes_fit(c, e->k);
    if ((e->epi && e->epi->z) || (y->stride[1] != 1 && !planes)) return (nconv_status)NCONV__DECLINE_OWN;
    float *wp = e->packed ? NULL : nconv__arena_take(e->ws, pack_bytes(c));
    float *init = nconv__arena_take(e->ws, sizeof(float) * (size_t)o_pad(c));
    const size_t stride = nconv__thread_stride(thread_bytes(c));
    char *scratch = nconv__arena_take(e->ws, (size_t)e->threads * stride);
    if ((!e->packed && !wp) || !init || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm stem");
    if (wp && !pack_weights(c, e->w, wp)) return (nconv_status)NCONV__DECLINE_W;
    memset(init, 0, sizeof(float) * (size_t)o_pad(c));
    nconv__epi_init(e->epi, init, c->O);
    /* outputs that leave the cache before they are read: streamed */
    const int stream =
        sizeof(float) * (size_t)nconv__core_output_numel(nconv__exec_whole(e), NCONV_DIR_FWD) >= STREAM_BYTES;
    stem_ctx s = {.e = e, .wp = e->packed ? e->packed : wp, .init = init, .scratch = scratch, .stride = stride,
                  .planes = y->stride[1] != 1,
                  .flags = (e->epi && e->epi->relu ? NCONV_STEM_RELU : 0) | (stream ? NCONV_STEM_STREAM : 0)};
    nconv__parallel(e, stem_task, &s);
    return NCONV_OK;
}

/* Prepacked weights: pack_weights' rows. */
static size_t stem_pack_size(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch) {
    (void)dir, (void)threads;
    *scratch = 0;
    return pack_bytes(c);
}

static nconv_status stem_pack(const nconv_exec *e, void *dst) {
    return pack_weights(e->c, e->w, dst) ? NCONV_OK : (nconv_status)NCONV__DECLINE_W;
}

/* Operands it does not read in place are declined (see above). */
const nconv_algo nconv_algo_stem = {.name = "stem", .applies = stem_applies, .workspace = stem_workspace,
                                    .run = stem_run, .preferred = stem_preferred,
                                    .declines = {NCONV__DECLINES_W | NCONV__DECLINES_OWN, 0,
                                                 NCONV__DECLINES_OWN},
                                    .pack_size = stem_pack_size, .pack = stem_pack};
