/*
 * Algorithm "depthwise": groups == in_channels == out_channels, computed in f32.
 *   fwd:   y[p][c]  = sum_t x[pix(p, t)][c] * w[c][t]
 *   bwd_d: dx[q][c] = sum_t dy[pix'(q, t)][c] * w[c][t]   (the taps whose dy pixel exists; zero padding only)
 *   bwd_w: dw[c][t] = sum_p dy[p][c] * x[pix(p, t)][c]
 *
 * The rows the kernels sweep (x for fwd and bwd_w, dy for bwd_d) are copied into a ring of padded
 * rows as the output rows reach them, each source row once, read in address order when it is
 * channels-last: a ring row holds its columns one after another, each the channels of a block,
 * with the padding columns as the padding mode has them (a row in zero padding is a shared row
 * of zeros, which fwd skips: weights with Inf or NaN are declined). From there the kernels (dwtile, dwtile_bw) read every input at fixed distances,
 * whatever the caller's layout. A block is every channel where the ring of a whole row stays in
 * L2 (L1 for small images, see RING_BYTES); else the channels are cut into blocks whose ring
 * does, and where even one vector's does not, rows run in column segments. With a W stride of 3
 * or more the columns are stored by phase (column q at slot q / s of phase q mod s), so that a
 * row's pixels are one column apart. fwd and bwd_d read channels-last f32 rows in place instead
 * where few of a row's pixels reach into the W padding (see direct_unit).
 *   fwd, bwd_w: output row (od, oh) reads rows (od s - p + kd d, oh s - p + kh d).
 *   bwd_d: the dx columns of one residue mod the W stride are one run over the taps that reach
 *          them (weights packed by tap phase, (k d) mod s); dx row (id, ih) reads the dy rows
 *          its taps reach, and only those.
 * Outputs are written in place where they are f32 with channels or pixels contiguous (pixels:
 * through a row buffer of one block, transposed; both with non-temporal stores where the output
 * is large, DW_STREAM_BYTES); other layouts and dtypes, and z, go through a channels-last
 * copy. Threads take units of rows of one block, each computing whole outputs
 * (fwd, bwd_d); for bwd_w each unit sums its rows into a partial of its own and the partials
 * are added in unit order. Units follow the problem, not the thread count (bwd_w), so neither
 * do the results.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <math.h>
#include <string.h>

/* Bytes of ring one thread may fill: the rows of an output row's reach stay in L2. Where the
 * source of an image stays in L2 while the channel blocks take turns over it (RING_IMAGE_BYTES;
 * fwd and bwd_d at stride 1), the blocks are cut so that the ring stays in L1 instead, at least
 * RING_L1_VECTORS wide: the rows an output row shares with the next are then read from L1. Wider
 * images, strides and bwd_w keep the L2 ring, where narrower blocks measured slower (on wide
 * images a block's columns are lines far apart in a source that leaves the cache while the
 * blocks take turns; BENCHMARKS.md has the figures). */
enum { RING_BYTES = 192 << 10, RING_L1_BYTES = 24 << 10, RING_IMAGE_BYTES = 512 << 10, RING_L1_VECTORS = 4 };
/* fwd and bwd_d in channel blocks: the source rows of a unit of output rows, which each block
 * reads in turn, stay in L2. */
#define UNIT_SOURCE_BYTES ((size_t)384 << 10)
/* fwd and bwd_d read the source rows in place up to this size of an image's source with 8-lane
 * vectors (direct_unit). */
#define DIRECT_IMAGE_BYTES ((size_t)2 << 20)
/* Outputs of this size and more are written with non-temporal stores: a depthwise output takes
 * a few products per store, and the reads for ownership of ordinary stores bound its speed. Twice
 * NCONV_STREAM_OUTPUT_BYTES: outputs of 4-8 MiB still come back from L3 in the next call, and
 * stride-2 bwd_d measured slower with them streamed. */
#define DW_STREAM_BYTES (2 * NCONV_STREAM_OUTPUT_BYTES)
/* bwd_w: units per image where there are fewer images than this, and the most partial sums. */
enum { BW_UNITS = 8 };
#define BW_PARTIAL_BYTES ((size_t)64 << 20)

static int dw_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (c->dt == NCONV_F64) {
        if (why_not) *why_not = "f64 problems run on gemm (f64 throughout)";
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
    if (nconv__core_kernel_spatial(c) > 65536) { /* per-thread tap tables */
        if (why_not) *why_not = "kernels of more than 65536 taps";
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- geometry */

typedef struct dw_geo {
    int64_t vl, nvb, nblocks, cpad; /* lanes, vectors per block (the last may have fewer), blocks, padded channels */
    int64_t orow[2], ow;            /* the rows computed (y for fwd and bwd_w, dx for bwd_d) and their pixels */
    const int64_t *src;             /* the swept operand's dims: x (fwd, bwd_w) or dy (bwd_d) */
    int64_t span[2], ring_rows;     /* ring slots along dims 0 and 1 */
    int64_t seg, nseg;              /* output pixels per column segment (bwd_d: a multiple of s), segments */
    int64_t cols, ph, slots, step;  /* buffer columns of a segment, their phases and slots, the kernels' pixel step */
    int64_t lpad;                   /* bwd_d: dy columns in the buffer before a segment's first reached one */
    int64_t rb, runits, units;      /* output rows per unit, units of rows (images x row blocks), units (x blocks) */
    int l1;                         /* blocks sized for L1 (see RING_BYTES) */
    size_t row;                     /* floats of a ring row (a block) */
    size_t packed, init, zero, partial, taps, shares, ring, tags, rowbuf, dybuf, ptrs, toff; /* bytes */
} dw_geo;

/* Block b: its first channel and width (whole vectors). */
static inline int64_t block_c0(const dw_geo *g, int64_t b) { return b * g->nvb * g->vl; }
static inline int64_t block_cw(const dw_geo *g, int64_t b) {
    const int64_t c0 = block_c0(g, b);
    return g->cpad - c0 < g->nvb * g->vl ? g->cpad - c0 : g->nvb * g->vl;
}

/* Buffer columns of a segment of n output pixels, and bwd_d's left padding. */
static int64_t seg_cols(const nconv_core *c, int bwd_d, int64_t n, int64_t *lpad) {
    const int64_t s = c->s[2], d = c->d[2], k = c->k[2];
    if (!bwd_d) {
        *lpad = 0;
        return (n - 1) * s + (k - 1) * d + 1;
    }
    /* dx column i (first of its residue i0 < s) reads dy column m + e_t, e_t = (i0 + pb - t d) / s */
    int64_t emin = 0, emax = 0;
    for (int64_t i0 = 0; i0 < s; i0++)
        for (int64_t t = 0; t < k; t++) {
            const int64_t num = i0 + c->pb[2] - t * d;
            if (num % s) continue; /* the tap does not reach this residue */
            const int64_t e = num / s;
            emin = e < emin ? e : emin, emax = e > emax ? e : emax;
        }
    *lpad = -emin;
    return -emin + emax + nconv__div_up(n, s);
}

static void geometry(const nconv_core *c, nconv_direction dir, const nconv_kernels *k, int threads, dw_geo *g) {
    memset(g, 0, sizeof *g);
    const int bwd_d = dir == NCONV_DIR_BWD_D;
    g->vl = k->dw_vl;
    const int64_t cv = nconv__div_up(c->C, g->vl);
    g->cpad = cv * g->vl;
    const int64_t *o = bwd_d ? c->in : c->out;
    g->orow[0] = o[0], g->orow[1] = o[1], g->ow = o[2];
    g->src = bwd_d ? c->out : c->in;
    for (int a = 0; a < 2; a++) {
        const int64_t reach = (c->k[a] - 1) * c->d[a];
        g->span[a] = bwd_d ? reach / c->s[a] + 1 : reach + 1;
    }
    g->ring_rows = g->span[0] * g->span[1];
    /* phases: W strides 1 and 2 have kernels of their own; bwd_d reads dy at pixel step 1 */
    g->ph = !bwd_d && c->s[2] > 2 ? c->s[2] : 1;
    g->step = bwd_d || g->ph > 1 ? 1 : c->s[2];
    /* blocks of as many vectors as keep the ring of a whole row within the budget; where one
     * vector's does not, the widest segment whose ring does (bwd_d: whole residue runs) */
    const size_t image = sizeof(float) * (size_t)(g->src[0] * g->src[1] * g->src[2] * c->C);
    g->l1 = dir != NCONV_DIR_BWD_W && c->s[1] == 1 && c->s[2] == 1 && image <= RING_IMAGE_BYTES;
    const size_t budget = g->l1 ? RING_L1_BYTES : RING_BYTES;
    const int64_t unit = bwd_d ? c->s[2] : 1;
    int64_t seg = g->ow;
    for (;;) {
        const int64_t cols = seg_cols(c, bwd_d, seg, &g->lpad);
        const size_t one = sizeof(float) * (size_t)(g->ring_rows * nconv__div_up(cols, g->ph) * g->ph * g->vl);
        g->nvb = one <= budget ? (int64_t)(budget / one) : 1;
        if (one <= budget || seg <= unit) break;
        seg = seg / 2 > unit ? seg / 2 / unit * unit : unit;
    }
    if (g->l1 && g->nvb < RING_L1_VECTORS) g->nvb = RING_L1_VECTORS;
    if (g->nvb > cv) g->nvb = cv;
    g->nblocks = nconv__div_up(cv, g->nvb);
    g->nvb = nconv__div_up(cv, g->nblocks); /* blocks of even widths */
    g->seg = seg > 0 ? seg : 1;
    g->nseg = g->ow > 0 ? nconv__div_up(g->ow, g->seg) : 0;
    g->cols = seg_cols(c, bwd_d, g->seg, &g->lpad);
    g->slots = nconv__div_up(g->cols, g->ph);
    const int64_t bw = g->nvb * g->vl; /* the widest block */
    g->row = (size_t)(g->ph * g->slots * bw);
    /* units: blocks of an image's rows, times channel blocks */
    const int64_t R = g->orow[0] * g->orow[1], N = c->N > 0 ? c->N : 1;
    int64_t per_image;
    if (dir == NCONV_DIR_BWD_W) { /* from the problem alone: partial sums per unit of rows */
        per_image = N >= BW_UNITS ? 1 : nconv__div_up(BW_UNITS, N);
        const size_t one = sizeof(float) * (size_t)(nconv__core_kernel_spatial(c) * g->cpad);
        while (per_image > 1 && (size_t)(N * per_image) * one > BW_PARTIAL_BYTES) per_image /= 2;
    } else {
        per_image = nconv__div_up(4 * (int64_t)threads, N * g->nblocks);
        const size_t source = sizeof(float) * (size_t)(g->src[2] * c->C * (bwd_d ? 1 : c->s[1])); /* per row */
        if (g->nblocks > 1 && R > 0 && source > 0) {
            const int64_t most = UNIT_SOURCE_BYTES / source > 1 ? (int64_t)(UNIT_SOURCE_BYTES / source) : 1;
            if (nconv__div_up(R, most) > per_image) per_image = nconv__div_up(R, most);
        }
    }
    if (per_image > R) per_image = R;
    if (per_image < 1) per_image = 1;
    g->rb = R > 0 ? nconv__div_up(R, per_image) : 1;
    g->runits = c->N * (R > 0 ? nconv__div_up(R, g->rb) : 0);
    g->units = g->runits * g->nblocks;
    /* bytes */
    const int64_t KS = nconv__core_kernel_spatial(c), K01 = c->k[0] * c->k[1];
    g->packed = dir == NCONV_DIR_BWD_W ? 0 : sizeof(float) * (size_t)(KS * g->cpad);
    g->init = sizeof(float) * (size_t)g->cpad;
    g->zero = sizeof(float) * g->row;
    g->partial = dir == NCONV_DIR_BWD_W ? sizeof(float) * (size_t)(g->runits * (KS + 1) * g->cpad) : 0;
    g->taps = sizeof(int64_t) * (size_t)(c->k[2] + c->s[2] + 1 + KS); /* taps by phase, phase starts, w's tap offsets */
    g->shares = sizeof(nconv_share) * (size_t)threads;
    g->ring = sizeof(float) * g->row * (size_t)g->ring_rows;
    g->tags = sizeof(int64_t) * (size_t)g->ring_rows;
    g->rowbuf = sizeof(float) * (size_t)(g->seg * bw);
    g->dybuf = dir == NCONV_DIR_BWD_W ? sizeof(float) * (size_t)(g->seg * bw) : 0;
    g->ptrs = sizeof(float *) * (size_t)(4 * K01); /* rows and their weights; direct_unit's border calls' */
    g->toff = sizeof(int64_t) * (size_t)(K01 + c->k[2]); /* bwd_d: the kernel row of each row; the taps' offsets */
}

static size_t thread_bytes(const dw_geo *g) {
    return nconv__thread_stride(nconv__ws_round(g->ring) + nconv__ws_round(g->tags) + nconv__ws_round(g->rowbuf) +
                                nconv__ws_round(g->dybuf) + nconv__ws_round(g->ptrs) + nconv__ws_round(g->toff));
}

static size_t sizes(const nconv_core *c, nconv_direction dir, const nconv_kernels *k, int threads, unsigned copies,
                    dw_geo *g, size_t *x, size_t *y) {
    geometry(c, dir, k, threads, g);
    *x = copies & NCONV_COPY_X ? sizeof(float) * (size_t)(c->N * nconv__core_in_spatial(c) * c->C) : 0;
    *y = copies & NCONV_COPY_Y ? sizeof(float) * (size_t)(c->N * nconv__core_out_spatial(c) * c->C) : 0;
    return nconv__ws_round(*x) + nconv__ws_round(*y) + nconv__ws_round(g->packed) + nconv__ws_round(g->init) +
           nconv__ws_round(g->zero) + nconv__ws_round(g->partial) + nconv__ws_round(g->taps) +
           nconv__ws_round(g->shares) + (size_t)threads * thread_bytes(g);
}

static size_t dw_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    dw_geo g;
    size_t x, y;
    return sizes(c, dir, nconv__kernels(), threads, copies, &g, &x, &y);
}

/* ----------------------------------------------------------------- weights */

/* The W taps by phase, taps[start[f] .. start[f + 1]): for bwd_d tap phase (t d) mod s, last tap
 * first (so that a phase's taps reach dy columns in increasing order); else every tap in order. */
static void tap_phases(const nconv_core *c, nconv_direction dir, int64_t *taps, int64_t *start) {
    const int bwd_d = dir == NCONV_DIR_BWD_D;
    const int64_t s = bwd_d ? c->s[2] : 1, k = c->k[2];
    int64_t n = 0;
    for (int64_t f = 0; f < s; f++) {
        start[f] = n;
        for (int64_t j = 0; j < k; j++) {
            const int64_t t = bwd_d ? k - 1 - j : j;
            if ((t * c->d[2]) % s == f) taps[n++] = t;
        }
    }
    start[s] = n;
}

/* The packed weights: per tap phase f, [row][tap of f][channel], channels padded to whole
 * vectors with zeros: a block's taps are cpad floats apart. Depends on the channels, kernel, W
 * stride and dilation only (the same for every piece of a split and any batch). taps: see
 * geometry (g->taps). Returns whether every weight is finite. */
static int pack_weights(const nconv_core *c, nconv_direction dir, const dw_geo *g, const nconv_view *w, float *dst,
                        int64_t *taps) {
    const int64_t KS = nconv__core_kernel_spatial(c), K01 = c->k[0] * c->k[1], K2 = c->k[2], C = c->C;
    const int64_t s = dir == NCONV_DIR_BWD_D ? c->s[2] : 1, cs = w->stride[0];
    int64_t *start = taps + K2, *wtap = start + c->s[2] + 1;
    tap_phases(c, dir, taps, start);
    for (int64_t t = 0; t < KS; t++) wtap[t] = nconv__dw_w_offset(c, w, 0, t);
    int finite = 1;
    float *o = dst;
    for (int64_t f = 0; f < s; f++) {
        const int64_t nt = start[f + 1] - start[f];
        for (int64_t r = 0; r < K01; r++)
            for (int64_t j = 0; j < nt; j++, o += g->cpad) {
                const int64_t off = wtap[r * K2 + taps[start[f] + j]];
                if (w->dt == NCONV_F32)
                    for (int64_t l = 0; l < C; l++) o[l] = ((const float *)w->data)[off + l * cs];
                else
                    for (int64_t l = 0; l < C; l++) o[l] = nconv__load_f32(w->data, w->dt, off + l * cs);
                for (int64_t l = 0; l < C; l++) finite &= isfinite(o[l]) != 0;
                memset(o + C, 0, sizeof(float) * (size_t)(g->cpad - C));
            }
    }
    return finite;
}

/* ------------------------------------------------------------------ the rows */

/* An activation as the kernels' framework reads or writes it: f32 with channels contiguous
 * (pixels px floats apart), f32 with pixels contiguous (planar), or neither (copied). */
typedef struct dw_act {
    const nconv_view *v;
    int chan, planar;
} dw_act;

static dw_act act_of(const nconv_view *v) {
    dw_act a = {v, 0, 0};
    if (v->dt == NCONV_F32) {
        a.chan = v->shape[1] == 1 || v->stride[1] == 1;
        a.planar = !a.chan && (v->shape[4] == 1 || v->stride[4] == 1);
    }
    return a;
}

typedef struct dw_ctx {
    const nconv_core *c;
    nconv_direction dir;
    const nconv_kernels *k;
    const dw_geo *g;
    dw_act src, out, dy;   /* the swept operand, the written one (fwd, bwd_d), bwd_w's dy */
    int direct;            /* fwd, bwd_d: the source rows read in place (see direct_unit) */
    const float *packed, *init, *zero;
    const int64_t *taps, *start; /* bwd_d: W taps by phase */
    float *partial;        /* bwd_w: per unit, [block][KS][channel of block], then the bias gradient's [cpad] */
    double *lanes;         /* bwd_w: the bias gradient's lanes (nconv_exec.db_lanes), or NULL */
    int flags;             /* NCONV_DW_RELU, NCONV_DW_STREAM: the kernels' stores */
    nconv_f32_transpose_fn planes_out; /* planar outputs: the row buffer's transpose into the planes */
    nconv_share *shares;
    char *scratch;
    size_t scratch_stride;
} dw_ctx;

/* The element offset of row (n, a, b) of activation v. */
static inline int64_t row_offset(const nconv_view *v, int64_t n, int64_t a, int64_t b) {
    return n * v->stride[0] + a * v->stride[2] + b * v->stride[3];
}

/* Column q's slot in a row stored by phase (see gather_row); ph 1, the common case, divides nothing. */
static inline int64_t phase_slot(int64_t q, int64_t ph, int64_t slots) {
    return ph == 1 ? q : (q % ph) * slots + q / ph;
}

/* n floats, inline and in whole cache lines while they last: a block's columns are a few lines
 * each, too short for a library call to pay for itself. */
static inline void copy_floats(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) memcpy(dst + i, src + i, 16 * sizeof(float));
    if (i < n) memcpy(dst + i, src + i, sizeof(float) * (size_t)(n - i));
}

/* Columns [col0, col0 + ncols) of block k of source row (n, a, b) (columns outside the row as the
 * padding mode reads them) into dst: column q at slot (q mod ph) * slots + q / ph, each cw
 * floats, lanes past the channels zeros. */
static void gather_row(const dw_ctx *d, const dw_act *s, int64_t n, int64_t a, int64_t b, int64_t col0, int64_t ncols,
                       int64_t ph, int64_t slots, int64_t k, nconv_padding_mode mode, float *dst) {
    const nconv_view *v = s->v;
    const int64_t W = v->shape[4], C = d->c->C;
    const int64_t c0 = block_c0(d->g, k), cw = block_cw(d->g, k), nc = C - c0 < cw ? C - c0 : cw;
    const float *base = (const float *)v->data + row_offset(v, n, a, b);
    /* the columns that read the row in order: [q0, q1) */
    const int64_t q0 = col0 < 0 ? (-col0 < ncols ? -col0 : ncols) : 0;
    const int64_t q1 = W - col0 < ncols ? (W - col0 > q0 ? W - col0 : q0) : ncols;
    if (s->chan) {
        const int64_t px = v->stride[4];
        if (ph == 1 && nc == C && cw == C && (px == C || W == 1)) { /* the run is one copy */
            if (q1 > q0) memcpy(dst + q0 * C, base + (col0 + q0) * px, sizeof(float) * (size_t)((q1 - q0) * C));
        } else {
            for (int64_t q = q0; q < q1; q++) {
                float *o = dst + phase_slot(q, ph, slots) * cw;
                copy_floats(o, base + (col0 + q) * px + c0, nc);
                if (nc < cw) memset(o + nc, 0, sizeof(float) * (size_t)(cw - nc));
            }
        }
    } else if (ph == 1) { /* planar: the block's channels transposed */
        if (q1 > q0) d->k->transpose(nc, q1 - q0, base + c0 * v->stride[1] + col0 + q0, v->stride[1], dst + q0 * cw, cw);
        if (nc < cw)
            for (int64_t q = q0; q < q1; q++) memset(dst + q * cw + nc, 0, sizeof(float) * (size_t)(cw - nc));
    } else {
        for (int64_t q = q0; q < q1; q++) {
            float *o = dst + phase_slot(q, ph, slots) * cw;
            for (int64_t l = 0; l < nc; l++) o[l] = base[(c0 + l) * v->stride[1] + col0 + q];
            if (nc < cw) memset(o + nc, 0, sizeof(float) * (size_t)(cw - nc));
        }
    }
    /* the columns outside the row: zeros, or the column the padding mode reads (copied) */
    for (int64_t q = 0; q < ncols; q++) {
        if (q == q0 && q1 > q0) q = q1;
        if (q >= ncols) break;
        const int64_t j = nconv__map_index(col0 + q, W, mode);
        float *o = dst + phase_slot(q, ph, slots) * cw;
        memset(o, 0, sizeof(float) * (size_t)cw);
        if (j < 0) continue;
        if (s->chan)
            memcpy(o, base + j * v->stride[4] + c0, sizeof(float) * (size_t)nc);
        else
            for (int64_t l = 0; l < nc; l++) o[l] = base[(c0 + l) * v->stride[1] + j];
    }
}

/* The ring: the row of source rows (a, b) (logical: before the padding mode), gathered for the
 * segment whose buffer column 0 is source column col0 if not there yet; the zero row for a row
 * in zero padding. Logical rows of one output row differ in their slots (spans), so none
 * evicts another. */
typedef struct ring {
    float *rows;
    int64_t *tags;
    int64_t col0, k; /* the segment's first source column; the unit's block */
} ring;

/* a mod m in [0, m). */
static inline int64_t floor_mod(int64_t a, int64_t m) {
    const int64_t r = a % m;
    return r < 0 ? r + m : r;
}

/* The ring slot of logical row (a, b): (a mod span[0]) span[1] + b mod span[1]. */
static int64_t ring_slot(const dw_geo *g, int64_t a, int64_t b) {
    return floor_mod(a, g->span[0]) * g->span[1] + floor_mod(b, g->span[1]);
}

/* slot: ring_slot(g, a, b), which callers walking a kernel's rows keep without dividing. */
static const float *ring_row(const dw_ctx *d, ring *rg, int64_t n, int64_t a, int64_t b, int64_t slot) {
    const nconv_core *c = d->c;
    const dw_geo *g = d->g;
    const nconv_padding_mode mode = d->dir == NCONV_DIR_BWD_D ? NCONV_PAD_ZEROS : c->mode;
    const int64_t ma = nconv__map_index(a, g->src[0], mode), mb = nconv__map_index(b, g->src[1], mode);
    if (ma < 0 || mb < 0) return d->zero;
    float *row = rg->rows + (size_t)slot * g->row;
    const int64_t tag = ma * g->src[1] + mb;
    if (rg->tags[slot] != tag) {
        gather_row(d, &d->src, n, ma, mb, rg->col0, g->cols, g->ph, g->slots, rg->k, mode, row);
        rg->tags[slot] = tag;
    }
    return row;
}

/* Thread scratch. */
typedef struct dw_scratch {
    ring rg;
    float *rowbuf, *dybuf;
    const float **rows, **wrows, **brows, **bwrows; /* the kernel's rows and their weights; a border call's */
    int64_t *sel, *toff;         /* bwd_d: the kernel row of each row; taps' offsets */
} dw_scratch;

static void take_scratch(const dw_ctx *d, int tid, dw_scratch *s) {
    const dw_geo *g = d->g;
    const int64_t K01 = d->c->k[0] * d->c->k[1];
    char *p = d->scratch + (size_t)tid * d->scratch_stride;
    s->rg.rows = (float *)p, p += nconv__ws_round(g->ring);
    s->rg.tags = (int64_t *)p, p += nconv__ws_round(g->tags);
    s->rowbuf = (float *)p, p += nconv__ws_round(g->rowbuf);
    s->dybuf = (float *)p, p += nconv__ws_round(g->dybuf);
    s->rows = (const float **)p, s->wrows = s->rows + K01, s->brows = s->wrows + K01, s->bwrows = s->brows + K01;
    p += nconv__ws_round(g->ptrs);
    s->sel = (int64_t *)p, s->toff = s->sel + K01;
}

/* Where block k of output row (n, a, b) goes from pixel p on (the segment starting at p0), and
 * its pixel stride: in place, or the row buffer (planar outputs, see out_planes). */
static float *out_at(const dw_ctx *d, const dw_scratch *s, int64_t n, int64_t a, int64_t b, int64_t p0, int64_t p,
                     int64_t k, int64_t *os) {
    const nconv_view *v = d->out.v;
    if (d->out.chan) {
        *os = v->stride[4];
        return (float *)v->data + row_offset(v, n, a, b) + p * v->stride[4] + block_c0(d->g, k) * v->stride[1];
    }
    *os = block_cw(d->g, k);
    return s->rowbuf + (p - p0) * *os;
}

/* Planar outputs: pixels [p0, p0 + np) of block k from the row buffer into the planes. */
static void out_planes(const dw_ctx *d, const dw_scratch *s, int64_t n, int64_t a, int64_t b, int64_t p0, int64_t np,
                       int64_t k) {
    if (d->out.chan || np <= 0) return;
    const nconv_view *v = d->out.v;
    const int64_t c0 = block_c0(d->g, k), cw = block_cw(d->g, k), nc = d->c->C - c0 < cw ? d->c->C - c0 : cw;
    d->planes_out(np, nc, s->rowbuf, cw, (float *)v->data + row_offset(v, n, a, b) + c0 * v->stride[1] + p0,
                  v->stride[1]);
}

/* A segment of a unit's rows: pixels p0 .. p0 + np, the ring emptied. */
static void start_segment(const dw_ctx *d, dw_scratch *s, int64_t sg, int64_t *p0, int64_t *np) {
    const nconv_core *c = d->c;
    const dw_geo *g = d->g;
    *p0 = sg * g->seg;
    *np = g->ow - *p0 < g->seg ? g->ow - *p0 : g->seg;
    s->rg.col0 = d->dir == NCONV_DIR_BWD_D ? *p0 / c->s[2] - g->lpad : *p0 * c->s[2] - c->pb[2];
    for (int64_t i = 0; i < g->ring_rows; i++) s->rg.tags[i] = -1;
}

/* fwd and bwd_w: the source rows of output row (o0, o1), kernel rows in order. */
static void fwd_rows(const dw_ctx *d, dw_scratch *s, int64_t n, int64_t o0, int64_t o1) {
    const nconv_core *c = d->c;
    const dw_geo *g = d->g;
    /* the slots advance by the dilation, which is less than the span where a kernel has two taps
     * or more along that dim: one wrap at most, no division per row */
    const int64_t a0 = o0 * c->s[0] - c->pb[0], b0 = o1 * c->s[1] - c->pb[1];
    const int64_t sb0 = floor_mod(b0, g->span[1]);
    int64_t sa = floor_mod(a0, g->span[0]);
    for (int64_t k0 = 0, r = 0; k0 < c->k[0]; k0++) {
        int64_t sb = sb0;
        for (int64_t k1 = 0; k1 < c->k[1]; k1++, r++) {
            s->rows[r] = ring_row(d, &s->rg, n, a0 + k0 * c->d[0], b0 + k1 * c->d[1], sa * g->span[1] + sb);
            if ((sb += c->d[1]) >= g->span[1]) sb -= g->span[1];
        }
        if ((sa += c->d[0]) >= g->span[0]) sa -= g->span[0];
    }
}

/* Taps' offsets for output pixel 0 of a segment (fwd, bwd_w), for columns cw floats apart. */
static void fwd_taps(const dw_ctx *d, int64_t cw, int64_t *toff) {
    const int64_t ph = d->g->ph;
    for (int64_t t = 0; t < d->c->k[2]; t++) {
        const int64_t q = t * d->c->d[2];
        toff[t] = phase_slot(q, ph, d->g->slots) * cw;
    }
}

/* A row of output pixels from source rows read in place (direct_unit), bwd_d (stride 1) as the
 * forward of dy with the kernel reversed (its W taps are packed last first): output pixel i's tap
 * j reads source column e[j] + i step, e increasing with j. Returns the taps' count. */
static int64_t direct_line(const dw_ctx *d, int64_t *step, int64_t *e) {
    const nconv_core *c = d->c;
    const int bwd_d = d->dir == NCONV_DIR_BWD_D;
    *step = bwd_d ? 1 : c->s[2];
    for (int64_t j = 0; j < c->k[2]; j++) e[j] = bwd_d ? c->pb[2] - d->taps[j] * c->d[2] : j * c->d[2] - c->pb[2];
    return c->k[2];
}

/* The pixels [*il, *ir) of a row of m (see direct_line) whose taps all read source columns in [0, W). */
static void line_interior(const int64_t *e, int64_t nt, int64_t m, int64_t step, int64_t W, int64_t *il, int64_t *ir) {
    *il = e[0] >= 0 ? 0 : nconv__div_up(-e[0], step);
    *ir = W - 1 - e[nt - 1] >= 0 ? (W - 1 - e[nt - 1]) / step + 1 : 0;
    if (*il > m) *il = m;
    if (*ir > m) *ir = m;
    if (*ir < *il) *ir = *il;
}

/* The source row (its index a * src[1] + b) that output row (o0, o1) reads for kernel row (k0, k1),
 * or -1 where that lies in the padding. */
static int64_t direct_row(const dw_ctx *d, int64_t o0, int64_t o1, int64_t k0, int64_t k1) {
    const nconv_core *c = d->c;
    const int64_t *src = d->g->src;
    const int fwd = d->dir == NCONV_DIR_FWD; /* bwd_d: stride 1 */
    const int64_t a = fwd ? o0 * c->s[0] - c->pb[0] + k0 * c->d[0] : o0 + c->pb[0] - k0 * c->d[0];
    const int64_t b = fwd ? o1 * c->s[1] - c->pb[1] + k1 * c->d[1] : o1 + c->pb[1] - k1 * c->d[1];
    return a < 0 || a >= src[0] || b < 0 || b >= src[1] ? -1 : a * src[1] + b;
}

/* The output pixels of a row that read the W padding (direct: a kernel call each). */
static int64_t direct_border(const dw_ctx *d) {
    int64_t e[64], step, il, ir;
    const int64_t nt = direct_line(d, &step, e);
    line_interior(e, nt, d->g->ow, step, d->g->src[2], &il, &ir);
    return d->g->ow - (ir - il);
}

/* The output rows [q0, q1) of image n with the source rows read in place (d->direct:
 * channels-last f32 source, zero padding, fwd at W stride 1 or 2, bwd_d at stride 1, few pixels
 * in the W padding): the pixels whose taps all read the row in one call, each other pixel with
 * the taps that do (the rest read zeros), rows in the padding skipped: no copy into the ring, a
 * large share of these layers' time (BENCHMARKS.md). */
static void direct_unit(const dw_ctx *d, dw_scratch *s, int64_t n, int64_t q0, int64_t q1) {
    const nconv_core *c = d->c;
    const dw_geo *g = d->g;
    const nconv_view *v = d->src.v;
    const int64_t K01 = c->k[0] * c->k[1], k = s->rg.k, c0 = block_c0(g, k), cw = block_cw(g, k);
    const int64_t W = g->src[2], px = v->stride[4], cpad = g->cpad;
    const float *base = (const float *)v->data + n * v->stride[0] + c0 * v->stride[1];
    int64_t e[64], step, il, ir, os;
    const int64_t nt = direct_line(d, &step, e), m = g->ow; /* the same for every row */
    line_interior(e, nt, m, step, W, &il, &ir);
    for (int64_t q = q0; q < q1; q++) {
        const int64_t o0 = q / g->orow[1], o1 = q % g->orow[1];
        int64_t nr = 0;
        for (int64_t r = 0; r < K01; r++) {
            const int64_t row = direct_row(d, o0, o1, r / c->k[1], r % c->k[1]);
            if (row < 0) continue;
            s->rows[nr] = base + (row / g->src[1]) * v->stride[2] + (row % g->src[1]) * v->stride[3];
            s->sel[nr++] = r;
        }
        /* The next output row's new source rows are left to the hardware prefetcher (rows of W
         * pixels one after another): fetched in software, a row's lines at once before its calls,
         * they stalled them for want of miss buffers (BENCHMARKS.md). */
        for (int64_t r = 0; r < nr; r++) s->wrows[r] = d->packed + c0 + s->sel[r] * nt * cpad; /* [row][tap] */
        float *out = out_at(d, s, n, o0, o1, 0, 0, k, &os);
        for (int64_t i = il > 0 ? 0 : ir; i < m; i = i + 1 == il ? ir : i + 1) { /* [0, il), [ir, m) */
            int64_t t0 = 0, t1 = nt;
            while (t0 < nt && e[t0] + i * step < 0) t0++;
            while (t1 > t0 && e[t1 - 1] + i * step > W - 1) t1--;
            for (int64_t j = t0; j < t1; j++) s->toff[j - t0] = (e[j] - e[t0]) * px;
            for (int64_t r = 0; r < nr; r++) {
                s->brows[r] = t1 > t0 ? s->rows[r] + (e[t0] + i * step) * px : s->rows[r];
                s->bwrows[r] = s->wrows[r] + t0 * cpad;
            }
            d->k->dwtile(cw, px, step, 1, nr, s->brows, s->bwrows, cpad, t1 - t0, s->toff, d->init + c0, out + i * os, os,
                         cw, d->flags);
        }
        if (ir > il) {
            for (int64_t j = 0; j < nt; j++) s->toff[j] = (e[j] - e[0]) * px;
            for (int64_t r = 0; r < nr; r++) s->brows[r] = s->rows[r] + (e[0] + il * step) * px;
            d->k->dwtile(cw, px, step, ir - il, nr, s->brows, s->wrows, cpad, nt, s->toff, d->init + c0, out + il * os, os,
                         cw, d->flags);
        }
        out_planes(d, s, n, o0, o1, 0, g->ow, k);
    }
}

/* fwd and bwd_w: the output rows [q0, q1) of image n (bwd_w: summed into partial). */
static void fwd_unit(const dw_ctx *d, dw_scratch *s, float *partial, int64_t n, int64_t q0, int64_t q1) {
    const nconv_core *c = d->c;
    const dw_geo *g = d->g;
    const int64_t K01 = c->k[0] * c->k[1], K2 = c->k[2], KS = K01 * K2, k = s->rg.k;
    const int64_t c0 = block_c0(g, k), cw = block_cw(g, k), nc = c->C - c0 < cw ? c->C - c0 : cw;
    const int fwd = d->dir == NCONV_DIR_FWD;
    const nconv_view *dy = d->dy.v;
    float *acc = fwd ? NULL : partial + c0 * KS, *db = fwd || !d->lanes ? NULL : partial + KS * g->cpad + c0;
    if (!fwd) memset(acc, 0, sizeof(float) * (size_t)(KS * cw));
    if (db) memset(db, 0, sizeof(float) * (size_t)cw);
    fwd_taps(d, cw, s->toff);
    /* bwd_w: dy rows straight from dy where they are the block's columns already */
    const int direct = !fwd && d->dy.chan && cw == c->C && (dy->stride[4] == c->C || g->ow == 1);
    for (int64_t sg = 0; sg < g->nseg; sg++) {
        int64_t p0, np;
        start_segment(d, s, sg, &p0, &np);
        for (int64_t q = q0; q < q1; q++) {
            const int64_t o0 = q / g->orow[1], o1 = q % g->orow[1];
            fwd_rows(d, s, n, o0, o1);
            if (fwd) { /* rows in zero padding add nothing (the weights are finite) */
                int64_t nr = 0;
                for (int64_t r = 0; r < K01; r++)
                    if (s->rows[r] != d->zero) s->rows[nr] = s->rows[r], s->wrows[nr++] = d->packed + r * K2 * g->cpad + c0;
                int64_t os;
                float *out = out_at(d, s, n, o0, o1, p0, p0, k, &os);
                d->k->dwtile(cw, cw, g->step, np, nr, s->rows, s->wrows, g->cpad, K2, s->toff, d->init + c0, out, os,
                             nc, d->flags);
                out_planes(d, s, n, o0, o1, p0, np, k);
                continue;
            }
            const float *dyr = s->dybuf;
            if (direct)
                dyr = (const float *)dy->data + row_offset(dy, n, o0, o1) + p0 * c->C;
            else
                gather_row(d, &d->dy, n, o0, o1, p0, np, 1, np, k, NCONV_PAD_ZEROS, s->dybuf);
            d->k->dwtile_bw(cw, cw, g->step, np, K01, s->rows, K2, s->toff, dyr, acc, db);
        }
    }
}

static void bwd_d_unit(const dw_ctx *d, dw_scratch *s, int64_t n, int64_t q0, int64_t q1) {
    const nconv_core *c = d->c;
    const dw_geo *g = d->g;
    const int64_t K01 = c->k[0] * c->k[1], S = c->s[2], k = s->rg.k;
    const int64_t c0 = block_c0(g, k), cw = block_cw(g, k), nc = c->C - c0 < cw ? c->C - c0 : cw;
    for (int64_t sg = 0; sg < g->nseg; sg++) {
        int64_t p0, np;
        start_segment(d, s, sg, &p0, &np);
        for (int64_t q = q0; q < q1; q++) {
            const int64_t i0 = q / g->orow[1], i1 = q % g->orow[1];
            /* the dy rows this dx row's taps reach */
            int64_t nr = 0;
            for (int64_t k0 = 0; k0 < c->k[0]; k0++) {
                const int64_t a = i0 + c->pb[0] - k0 * c->d[0];
                if (a < 0 || a % c->s[0] || a / c->s[0] >= c->out[0]) continue;
                for (int64_t k1 = 0; k1 < c->k[1]; k1++) {
                    const int64_t b = i1 + c->pb[1] - k1 * c->d[1];
                    if (b < 0 || b % c->s[1] || b / c->s[1] >= c->out[1]) continue;
                    const int64_t ra = a / c->s[0], rb = b / c->s[1];
                    s->rows[nr] = ring_row(d, &s->rg, n, ra, rb, ring_slot(g, ra, rb));
                    s->sel[nr++] = k0 * c->k[1] + k1;
                }
            }
            for (int64_t f = 0; f < S; f++) {
                /* dx columns i of tap phase f: (i + pb) mod S == f, from the segment's first on */
                const int64_t first = ((f - c->pb[2]) % S + S) % S;
                if (first >= np) continue;
                const int64_t m = nconv__div_up(np - first, S), nt = d->start[f + 1] - d->start[f];
                const int64_t *taps = d->taps + d->start[f];
                for (int64_t j = 0; j < nt; j++) /* dy column (first + pb - t d) / S + pixel */
                    s->toff[j] = ((first + c->pb[2] - taps[j] * c->d[2]) / S + g->lpad) * cw;
                const float *wf = d->packed + K01 * d->start[f] * g->cpad + c0;
                for (int64_t r = 0; r < nr; r++) s->wrows[r] = wf + s->sel[r] * nt * g->cpad;
                int64_t os;
                float *out = out_at(d, s, n, i0, i1, p0, p0 + first, k, &os);
                d->k->dwtile(cw, cw, 1, m, nr, s->rows, s->wrows, g->cpad, nt, s->toff, d->init + c0, out, os * S, nc,
                             d->flags);
            }
            out_planes(d, s, n, i0, i1, p0, np, k);
        }
    }
}

static void dw_task(void *arg, int tid, int nthreads) {
    const dw_ctx *d = arg;
    const dw_geo *g = d->g;
    dw_scratch s;
    take_scratch(d, tid, &s);
    const int64_t R = g->orow[0] * g->orow[1], per_image = nconv__div_up(R, g->rb);
    for (int64_t u; (u = nconv__share_claim(d->shares, tid, nthreads)) >= 0;) {
        const int64_t ru = u / g->nblocks;
        const int64_t n = ru / per_image, q0 = ru % per_image * g->rb, q1 = q0 + g->rb < R ? q0 + g->rb : R;
        s.rg.k = u % g->nblocks;
        if (d->direct) direct_unit(d, &s, n, q0, q1);
        else if (d->dir == NCONV_DIR_BWD_D) bwd_d_unit(d, &s, n, q0, q1);
        else fwd_unit(d, &s, d->partial ? d->partial + ru * (nconv__core_kernel_spatial(d->c) + 1) * g->cpad : NULL, n,
                      q0, q1);
    }
    if ((d->flags & NCONV_DW_STREAM) || d->planes_out != d->k->transpose) nconv__stream_fence();
}

/* bwd_w: dw[ch][t] = the units' partial sums, added in unit order, and the bias gradient's (in lane
 * 0 of its four, in f64); threads take channels. */
typedef struct reduce_ctx {
    const dw_ctx *d;
    const nconv_view *w;
} reduce_ctx;

static void reduce_task(void *arg, int tid, int nthreads) {
    const reduce_ctx *rc = arg;
    const dw_ctx *d = rc->d;
    const nconv_core *c = d->c;
    const dw_geo *g = d->g;
    const int64_t KS = nconv__core_kernel_spatial(c), stride = (KS + 1) * g->cpad;
    int64_t b, e;
    nconv__split(c->C, tid, nthreads, &b, &e);
    /* runs of up to RUN channels of one block, each (channel, tap) summed over the units in unit
     * order, the channels side by side (one channel at a time waited on each add's latency) */
    enum { RUN = 64 };
    for (int64_t ch0 = b; ch0 < e;) {
        const int64_t k = ch0 / (g->nvb * g->vl), c0 = block_c0(g, k), cw = block_cw(g, k);
        const int64_t n = e - ch0 < RUN ? e - ch0 : RUN, m = c0 + cw - ch0 < n ? c0 + cw - ch0 : n;
        const float *p = d->partial + c0 * KS + (ch0 - c0);
        for (int64_t t = 0; t < KS; t++) {
            const int64_t toff = nconv__dw_w_offset(c, rc->w, 0, t); /* once per tap: it divides */
            float sum[RUN];
            for (int64_t i = 0; i < m; i++) sum[i] = g->runits ? p[t * cw + i] : 0.0f; /* no images: zeros */
            for (int64_t u = 1; u < g->runits; u++)
                for (int64_t i = 0; i < m; i++) sum[i] += p[u * stride + t * cw + i];
            for (int64_t i = 0; i < m; i++) {
                const int64_t off = (ch0 + i) * rc->w->stride[0] + toff;
                if (rc->w->dt == NCONV_F32) ((float *)rc->w->data)[off] = sum[i];
                else nconv__store1(rc->w->data, rc->w->dt, off, sum[i]);
            }
        }
        if (d->lanes) {
            double sum[RUN] = {0};
            for (int64_t u = 0; u < g->runits; u++)
                for (int64_t i = 0; i < m; i++) sum[i] += d->partial[u * stride + KS * g->cpad + ch0 + i];
            for (int64_t i = 0; i < m; i++)
                for (int l = 0; l < 4; l++) d->lanes[l * c->C + ch0 + i] = l ? 0.0 : sum[i];
        }
        ch0 += m;
    }
}

/* A dense channels-last f32 view of v's shape at data. */
static void nxc_view(const nconv_view *v, float *data, nconv_view *out) {
    *out = *v;
    out->data = data, out->dt = NCONV_F32;
    out->stride[1] = 1, out->stride[4] = v->shape[1], out->stride[3] = v->shape[1] * v->shape[4];
    out->stride[2] = out->stride[3] * v->shape[3], out->stride[0] = out->stride[2] * v->shape[2];
}

/* An input the framework reads as it is, or a channels-last copy of it in buf (*copy). */
static dw_act input_act(const nconv_exec *e, const nconv_view *v, float *buf, nconv_view *copy) {
    dw_act a = act_of(v);
    if (a.chan || a.planar) return a;
    nxc_view(v, (float *)nconv__nxc_input(e, v, buf), copy);
    return act_of(copy);
}

/* NCONV_VERBOSE's path: how rows are cut and read, and whether the stores stream (NULL: one
 * block of whole rows from the ring, ordinary stores). */
static const char *path_name(const dw_geo *g, int direct, int stream) {
    static const char *const names[2][7] = {
        {NULL, "column segments", "channel blocks", "channel blocks in L1", "channel blocks, rows in place",
         "channel blocks in L1, rows in place", "rows in place"},
        {"streamed stores", "column segments, streamed stores", "channel blocks, streamed stores",
         "channel blocks in L1, streamed stores", "channel blocks, rows in place, streamed stores",
         "channel blocks in L1, rows in place, streamed stores", "rows in place, streamed stores"}};
    const int which = g->nseg > 1 ? 1 : g->nblocks > 1 ? 2 + g->l1 + 2 * direct : direct ? 6 : 0;
    return names[stream != 0][which];
}

static nconv_status dw_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    const int threads = nconv__parallel_width(e);
    dw_geo g;
    size_t xs, ys;
    sizes(c, e->dir, e->k, threads, nconv__exec_copies(e), &g, &xs, &ys);
    float *xb = nconv__arena_take(e->ws, xs), *yb = nconv__arena_take(e->ws, ys);
    float *packed = e->packed || !g.packed ? NULL : nconv__arena_take(e->ws, g.packed);
    float *init = nconv__arena_take(e->ws, g.init), *zero = nconv__arena_take(e->ws, g.zero);
    float *partial = nconv__arena_take(e->ws, g.partial);
    int64_t *taps = nconv__arena_take(e->ws, g.taps);
    nconv_share *shares = nconv__arena_take(e->ws, g.shares);
    char *scratch = nconv__arena_take(e->ws, (size_t)threads * thread_bytes(&g));
    if ((xs && !xb) || (ys && !yb) || (!e->packed && g.packed && !packed) || !init || !zero || (g.partial && !partial) ||
        !taps || !shares || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm depthwise");
    dw_ctx d = {.c = c, .dir = e->dir, .k = e->k, .g = &g, .init = init, .zero = zero, .taps = taps,
                .start = taps + c->k[2], .partial = partial, .shares = shares, .scratch = scratch,
                .scratch_stride = thread_bytes(&g)};
    memset(zero, 0, g.zero);
    memset(init, 0, g.init);
    if (e->dir != NCONV_DIR_BWD_W) {
        if (e->packed) {
            tap_phases(c, e->dir, taps, taps + c->k[2]);
            d.packed = e->packed;
        } else {
            /* fwd skips rows in zero padding and bwd_d reads dy's: with a non-finite weight either
             * would differ from the reference's products, NaN for padding in fwd, none in bwd_d
             * (see nconv__view_all_finite) */
            if (!pack_weights(c, e->dir, &g, e->w, packed, taps)) return (nconv_status)NCONV__DECLINE_W;
            d.packed = packed;
        }
    }
    nconv_view xcopy, ycopy, ocopy;
    if (e->dir == NCONV_DIR_BWD_D) d.src = input_act(e, e->y, yb, &ycopy);
    else d.src = input_act(e, e->x, xb, &xcopy);
    /* Not where the pixels in the W padding, a kernel call each, are more than 1 in 10 of rows of
     * more than 3 taps, nor, with vectors of 8 lanes, where the source of an image leaves the
     * cache (DIRECT_IMAGE_BYTES), whose rows the ring's copies stream in faster than those
     * kernels read them (16-lane ones read as fast or faster); bwd_d at stride 1 with vectors of
     * 16 lanes only (at stride 2, or with 8 lanes, its ring measured faster). Rows of 3 taps or
     * fewer take few products per input: with vectors of 16 lanes the ring's copy of each source
     * row cost more there than the border's calls on rows of any width (with 8 lanes, less). */
    const size_t image = sizeof(float) * (size_t)(g.src[0] * g.src[1] * g.src[2] * c->C);
    const int stride1 = c->s[0] == 1 && c->s[1] == 1 && c->s[2] == 1;
    d.direct = (e->dir == NCONV_DIR_FWD || (e->dir == NCONV_DIR_BWD_D && stride1 && g.vl >= 16)) && d.src.chan &&
               c->mode == NCONV_PAD_ZEROS && g.ph == 1 && g.nseg == 1 && c->C % g.vl == 0 &&
               c->k[2] <= 64 /* direct_line's taps */ && (image <= DIRECT_IMAGE_BYTES || g.vl >= 16) &&
               ((c->k[2] <= 3 && g.vl >= 16) || 10 * direct_border(&d) <= g.ow);
    if (e->dir == NCONV_DIR_BWD_W) {
        if (e->path) *e->path = path_name(&g, 0, 0);
        d.dy = input_act(e, e->y, yb, &ycopy);
        d.lanes = e->db_lanes;
        nconv__share_split(shares, g.units, threads);
        nconv__parallel(e, dw_task, &d);
        reduce_ctx rc = {&d, e->w};
        nconv__parallel(e, reduce_task, &rc);
        if (d.lanes) *e->db_done = 1;
        return NCONV_OK;
    }
    /* the output in place (bias and relu in the kernels), or a channels-last copy that takes the epilogue after */
    const nconv_view *out = e->dir == NCONV_DIR_FWD ? e->y : e->x;
    d.out = act_of(out);
    const int fuse = (d.out.chan || d.out.planar) && !(e->epi && e->epi->z);
    if (!fuse) {
        nxc_view(out, e->dir == NCONV_DIR_FWD ? yb : xb, &ocopy);
        d.out = act_of(&ocopy);
    }
    nconv__epi_init(fuse ? e->epi : NULL, init, c->C);
    d.flags = fuse && e->epi && e->epi->relu ? NCONV_DW_RELU : 0;
    /* Outputs written in place that leave the cache before they are read (DW_STREAM_BYTES): the
     * size is the whole call's for bwd_d and planar outputs, whose pieces each measured faster
     * streamed, and the piece's for channels-last fwd, whose pieces of 3-4 MiB measured slower
     * streamed. Planes are streamed where their rows are whole cache lines: rows that share their
     * end lines with the next ones, each written by ordinary stores, measured slower. */
    const size_t piece = sizeof(float) * (size_t)nconv__core_output_numel(c, e->dir);
    const size_t whole = sizeof(float) * (size_t)nconv__core_output_numel(nconv__exec_whole(e), e->dir);
    if (fuse && d.out.chan && (e->dir == NCONV_DIR_FWD ? piece : whole) >= DW_STREAM_BYTES) d.flags |= NCONV_DW_STREAM;
    const int lines = d.out.v->shape[4] % 16 == 0;
    d.planes_out = fuse && d.out.planar && whole >= DW_STREAM_BYTES && lines && e->k->transpose_stream
                       ? e->k->transpose_stream
                       : e->k->transpose;
    if (e->path) *e->path = path_name(&g, d.direct, (d.flags & NCONV_DW_STREAM) || d.planes_out != e->k->transpose);
    nconv__share_split(shares, g.units, threads);
    nconv__parallel(e, dw_task, &d);
    if (!fuse) nconv__scatter_nxc_f32(e, out, d.out.v->data, e->epi);
    return NCONV_OK;
}

/* Prepacked weights (fwd, bwd_d): the blocks of pack_weights. */
static size_t dw_pack_size(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch) {
    (void)threads;
    *scratch = 0;
    if (dir == NCONV_DIR_BWD_W) return 0;
    dw_geo g;
    geometry(c, dir, nconv__kernels(), 1, &g);
    *scratch = 64 + nconv__ws_round(g.taps); /* 64: the arena's alignment */
    return g.packed;
}

static nconv_status dw_pack(const nconv_exec *e, void *dst) {
    dw_geo g;
    geometry(e->c, e->dir, e->k, 1, &g);
    int64_t *taps = nconv__arena_take(e->ws, g.taps);
    if (!taps) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: scratch too small for depthwise's packing");
    return pack_weights(e->c, e->dir, &g, e->w, dst, taps) ? NCONV_OK : (nconv_status)NCONV__DECLINE_W;
}

/* fwd and bwd_d with non-finite weights: see dw_run. */
const nconv_algo nconv_algo_depthwise = {.name = "depthwise", .applies = dw_applies, .workspace = dw_workspace,
                                         .run = dw_run, .declines = {NCONV__DECLINES_W, NCONV__DECLINES_W, 0},
                                         .pack_size = dw_pack_size, .pack = dw_pack};
