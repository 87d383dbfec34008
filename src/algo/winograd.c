/*
 * Algorithm "winograd": Winograd F(4x4, 3x3) convolution on channels-last
 * f32 data, for 3x3 (x any depth) kernels at stride 1, every direction: fwd;
 * bwd_d as the forward convolution of dy with the flipped, transposed
 * weights; bwd_w as the gradient of the forward's tile products (see its
 * section below). Any dilation: with dilation d an output tile is 4 x 4
 * pixels d apart, read from a 6 x 6 input patch d apart.
 *
 * A tile's 4 x 4 outputs cost 36 products per (input, output) channel pair
 * instead of 144: the input patch and the weights are transformed
 * (V = B^T d B, U = G g G^T), and the sums over input channels become 36
 * independent GEMMs, one per tile position xi:
 *   M[xi][tile][o] = sum_{kd, k} V[kd][xi][tile][k] * U[xi][kd][k][o]
 * whose results are transformed back (A^T M A) into the output tile.
 *
 * Framework (this file): tiles, blocking, threading. The GEMMs run on the
 * igemm micro-kernel (A rows are pointers into V; depth taps are its taps)
 * and, for bwd_w, the packed GEMM kernel; the transforms on the wino_*
 * micro-kernels (src/kernels).
 *
 * Blocking: output channels in chunks whose U fits U_BUDGET (deep layers'
 * U is 4x their weights); per chunk, threads take blocks of T tiles and run
 * input transform, GEMMs and output transform on each while V and M are in
 * L2. Each output element is computed by the same operations whatever the
 * block or thread, so results are bitwise identical for any thread count.
 *
 * Accuracy: the transforms scale values by up to 100 and cancel, so f32
 * errors are about ten times those of direct summation (relative to the
 * largest output, 1e-6 - 5e-5 on real layers, the largest for bwd_w's sums
 * over all tiles). Inf or NaN anywhere in x, w or dy would spread over whole
 * tiles (Inf - Inf): such calls are handed to igemm, which computes the
 * products PyTorch does.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { MR = NCONV_MR, NR = NCONV_NR, XI = 36 };
enum { U_BUDGET = 8 << 20 };       /* bytes of transformed weights per output-channel chunk */
enum { BLOCK_BYTES = 384 << 10 };  /* V and M of a tile block */
enum { MAX_T = 120, MAX_KD = 64 }; /* tiles per block; depth taps */
enum { KB = 128 };                 /* weight transform: reduction channels read together */
enum { PF_ROWS = 4 };              /* weight transform: rows read ahead when rows are the far dimension */
enum { PF_ROWS16 = 16 };           /* the same for 16-bit rows, whose widening has nothing to overlap a miss with */
enum { WIDE_W = 4 * KB * 9 };      /* weight transform: floats of a 16-bit run widened at once */

static int wino_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    const char *why = NULL;
    if (c->dt == NCONV_F64) why = "f64 problems run on gemm (f64 throughout)";
    else if (c->G != 1) why = "groups are not supported";
    else if (c->k[1] != 3 || c->k[2] != 3) why = "needs a 3x3 kernel (x any depth)";
    else if (c->k[0] > MAX_KD) why = "kernels of more than 64 taps in depth";
    else if (c->s[0] != 1 || c->s[1] != 1 || c->s[2] != 1) why = "needs stride 1";
    else if (dir == NCONV_DIR_BWD_D && c->mode != NCONV_PAD_ZEROS) why = "bwd_d needs zero padding";
    if (why && why_not) *why_not = why;
    return !why;
}

/* ------------------------------------------------------------- geometry */

/* The forward convolution computed: src (x, or dy for bwd_d) to dst. */
typedef struct wgeo {
    int64_t K, cols;          /* channels of src (the reduction per tap) and of dst */
    int64_t KD;               /* depth taps */
    int64_t src[3], dst[3];   /* spatial sizes */
    int64_t pad[3], dil[3];   /* of the forward convolution */
    int64_t nh, nw;           /* tile origins per plane along H and W */
    int64_t tiles;            /* N * dst[0] * nh * nw */
    int64_t panels;           /* column panels of NR over all dst channels */
    int64_t cpanels, chunks;  /* panels per chunk, chunks */
    int64_t T, blocks;        /* tiles per block, blocks */
    int64_t pgroups;          /* a unit of work: a block and one of pgroups ranges of the chunk's panels */
    int64_t ldv, ldm;         /* row pitch of V and M (floats) */
} wgeo;

/* Tiles along one axis of size n with dilation d: each of the d phases
 * (pixels p with p % d fixed) is cut into runs of 4. */
static int64_t axis_tiles(int64_t n, int64_t d, int64_t *org) {
    int64_t m = 0;
    for (int64_t ph = 0; ph < d && ph < n; ph++)
        for (int64_t o = ph; o < n; o += 4 * d, m++)
            if (org) org[m] = o;
    return m;
}

/* The heuristic's choice among applicable algorithms, against igemm: fwd
 * and bwd_d need enough tiles to pay back transforming the weights (4x
 * their size) and 8 channels on both sides; bwd_w transforms no weights,
 * but input channels under 16 leave V's panels of 16 half empty. With the
 * AVX-512 kernels igemm's GEMM runs twice as fast while the transforms
 * (memory-bound) do not, so Winograd needs more tiles there
 * (BENCHMARKS.md, the measurements behind choices). */
static int wino_preferred(const nconv_core *c, nconv_direction dir) {
    const int64_t min_tiles = nconv__kernels()->isa >= NCONV_ISA_AVX512 ? 64 : 16;
    const int64_t *dst = dir == NCONV_DIR_BWD_D ? c->in : c->out;
    const int64_t tiles = c->N * dst[0] * axis_tiles(dst[1], c->d[1], NULL) * axis_tiles(dst[2], c->d[2], NULL);
    if (dir == NCONV_DIR_BWD_W) return c->C >= 16 && c->O >= 8 && (min_tiles == 16 || tiles >= min_tiles);
    return c->C >= 8 && c->O >= 8 && tiles >= min_tiles;
}

static void geometry(const nconv_core *c, nconv_direction dir, int threads, wgeo *g) {
    const int bwd = dir == NCONV_DIR_BWD_D;
    g->K = bwd ? c->O : c->C;
    g->cols = bwd ? c->C : c->O;
    g->KD = c->k[0];
    for (int a = 0; a < 3; a++) {
        g->src[a] = bwd ? c->out[a] : c->in[a];
        g->dst[a] = bwd ? c->in[a] : c->out[a];
        g->dil[a] = c->d[a];
        g->pad[a] = bwd ? (c->k[a] - 1) * c->d[a] - c->pb[a] : c->pb[a];
    }
    g->nh = axis_tiles(g->dst[1], g->dil[1], NULL);
    g->nw = axis_tiles(g->dst[2], g->dil[2], NULL);
    g->tiles = c->N * g->dst[0] * g->nh * g->nw;
    g->panels = nconv__div_up(g->cols, NR);
    int64_t pmax = U_BUDGET / ((int64_t)sizeof(float) * XI * g->KD * (g->K > 0 ? g->K : 1) * NR);
    if (pmax < 1) pmax = 1;
    g->chunks = nconv__div_up(g->panels, pmax);
    if (g->chunks < 1) g->chunks = 1;
    g->cpanels = nconv__div_up(g->panels, g->chunks);
    g->ldv = nconv__div_up(g->K, 8) * 8 + 8; /* + 8: rows a multiple of 4 KiB apart would share L1 sets */
    g->ldm = g->cpanels * NR + 8;
    g->T = BLOCK_BYTES / ((int64_t)sizeof(float) * XI * (g->KD * g->ldv + g->ldm));
    g->T -= g->T % MR;
    if (g->T > MAX_T) g->T = MAX_T;
    if (g->T < MR) g->T = MR;
    if (g->tiles > 0 && g->T > nconv__div_up(g->tiles, MR) * MR) g->T = nconv__div_up(g->tiles, MR) * MR;
    g->blocks = nconv__div_up(g->tiles, g->T);
    /* Few blocks (small images): threads share a block's column panels too. */
    g->pgroups = 1;
    if (g->blocks > 0 && g->blocks < 4 * (int64_t)threads) g->pgroups = nconv__div_up(4 * (int64_t)threads, g->blocks);
    if (g->pgroups > g->cpanels) g->pgroups = g->cpanels;
}

/* 16-bit operands: floats per thread of a tile's 16 output pixels before narrowing (see block_out;
 * the input transforms read 16-bit patches as they lie). */
static int64_t wide_floats(const nconv_core *c, const wgeo *g) {
    return nconv__is_16bit(c->dt) ? 16 * g->cpanels * NR : 0;
}

/* Per thread: wt_task's KB x 9 x NR floats, then a run of 16-bit weights widened. */
static size_t wt_scratch(nconv_dtype dt) { return sizeof(float) * (KB * 9 * NR + (nconv__is_16bit(dt) ? WIDE_W : 0)); }

typedef struct ws_sizes {
    size_t src, dst, u, org, zero, init, shares, scratch; /* scratch: per thread */
} ws_sizes;

static size_t sizes(const nconv_core *c, nconv_direction dir, int threads, unsigned copies, ws_sizes *s) {
    wgeo g;
    geometry(c, dir, threads, &g);
    const int bwd = dir == NCONV_DIR_BWD_D;
    const int64_t src = c->N * g.src[0] * g.src[1] * g.src[2] * g.K, dst = c->N * g.dst[0] * g.dst[1] * g.dst[2] * g.cols;
    /* a 16-bit channels-last source is read in place (see block_in) */
    if (nconv__is_16bit(c->dt) && (copies & NCONV_ACTS_NXC)) copies &= ~(unsigned)(bwd ? NCONV_COPY_Y : NCONV_COPY_X);
    s->src = copies & (bwd ? NCONV_COPY_Y : NCONV_COPY_X) ? sizeof(float) * (size_t)src : 0;
    s->dst = copies & (bwd ? NCONV_COPY_X : NCONV_COPY_Y) ? sizeof(float) * (size_t)dst : 0;
    s->u = sizeof(float) * (size_t)(XI * g.cpanels * g.KD * g.K * NR);
    s->org = sizeof(int64_t) * (size_t)(g.nh + g.nw);
    s->zero = sizeof(float) * (size_t)(g.K + 2 * NR); /* K zeros (a padding row), then zero init for two panels */
    s->init = sizeof(float) * (size_t)(g.cols);
    s->shares = sizeof(nconv_share) * (size_t)threads;
    s->scratch = sizeof(float) * (size_t)(XI * g.T * (g.KD * g.ldv + g.ldm) + 8 + wide_floats(c, &g)) +
                 sizeof(float *) * (size_t)(g.KD * g.T + nconv__div_up(g.T, MR) * g.KD * MR + XI + 16);
    if (s->scratch < wt_scratch(c->dt)) s->scratch = wt_scratch(c->dt);
    return nconv__ws_round(s->src) + nconv__ws_round(s->dst) + nconv__ws_round(s->u) + nconv__ws_round(s->org) +
           nconv__ws_round(s->zero) + nconv__ws_round(s->init) + nconv__ws_round(s->shares) +
           (size_t)threads * nconv__ws_round(s->scratch);
}

/* ------------------------------------------------- weight transform */

typedef struct wt_ctx {
    const wgeo *g;
    const nconv_kernels *k;
    const nconv_view *w;
    int bwd;
    int64_t p0;      /* first panel of the chunk */
    float *u;        /* [xi][cpanels][kd][k][NR] */
    int *finite;     /* per thread */
    char *scratch;   /* per thread: KB x 9 x NR floats, then WIDE_W for 16-bit weights */
    size_t scratch_stride;
} wt_ctx;

/* dst[t * NR] = src[toff[t]] for the nine taps of one weight. */
static inline void gather9(const float *src, const int64_t *toff, float *dst) {
    for (int t = 0; t < 9; t++) dst[t * NR] = src[toff[t]];
}

/* The 16-bit weights at base + i * step + toff[t] (i < n, t < 9) widened into wide: as one run
 * from the first tap's first weight to the last tap's last where that span is the shorter (taps
 * next to each other, OIHW), else tap by tap (channels-last weights, whose taps lie a row of
 * channels apart, the span mostly weights of other rows). Returns p, with weight (i, t) at
 * p[rel[t] + i * step], or NULL when they do not fit, to read them element by element. */
static const float *widen_run(const wt_ctx *wc, int64_t base, int64_t step, int64_t n, const int64_t *toff,
                              int64_t tlo, int64_t thi, float *wide, int64_t *rel) {
    const nconv_convert16_fn cv = nconv__convert16(wc->k, wc->w->dt);
    const uint16_t *const w16 = wc->w->data;
    const int64_t reach = (n - 1) * step, first = reach < 0 ? reach : 0, len = (reach < 0 ? -reach : reach) + 1;
    const int64_t lo = base + first + tlo, span = base + (reach > 0 ? reach : 0) + thi - lo + 1;
    if (span <= 9 * len) {
        if (span > WIDE_W) return NULL;
        cv(span, w16 + lo, wide, 1);
        for (int t = 0; t < 9; t++) rel[t] = toff[t] - tlo;
        return wide + (base + tlo - lo);
    }
    if (9 * len > WIDE_W) return NULL;
    for (int t = 0; t < 9; t++) cv(len, w16 + base + toff[t] + first, wide + t * len, 1), rel[t] = t * len;
    return wide - first;
}

/* Row r = (panel p, depth tap kd, reduction channel k) of U: the weights of
 * column j = (p0 + p) * NR + l, l < NR, of the forward convolution computed
 * (w[j][k] for fwd, w[k][j] flipped for bwd_d), 3 x 3 taps each, are read
 * as tap[t * NR + l] and transformed. Weights are megabytes for deep
 * layers, read once per chunk: every offset is computed outside the loads. */
static void wt_task(void *arg, int tid, int nthreads) {
    const wt_ctx *wc = arg;
    const wgeo *g = wc->g;
    const nconv_view *w = wc->w;
    /* The last chunk's panels past the last column are never read: not transformed. */
    const int64_t left = nconv__div_up(g->cols, NR) - wc->p0, panels = left < g->cpanels ? left : g->cpanels;
    const int64_t rows = panels * g->KD * g->K, xs = g->cpanels * g->KD * g->K * NR;
    const int64_t sj = wc->bwd ? w->stride[1] : w->stride[0], sk = wc->bwd ? w->stride[0] : w->stride[1];
    int64_t toff[9], tlo = INT64_MAX, thi = INT64_MIN;
    for (int64_t t = 0; t < 9; t++) { /* bwd_d reads the taps flipped */
        toff[t] = wc->bwd ? (2 - t / 3) * w->stride[3] + (2 - t % 3) * w->stride[4]
                          : (t / 3) * w->stride[3] + (t % 3) * w->stride[4];
        tlo = toff[t] < tlo ? toff[t] : tlo, thi = toff[t] > thi ? toff[t] : thi;
    }
    int64_t r0, r1;
    nconv__split(rows, tid, nthreads, &r0, &r1);
    float(*tap)[9 * NR] = (float(*)[9 * NR])(wc->scratch + (size_t)tid * wc->scratch_stride), poison[NR] = {0};
    float *wide = tap[KB];
    for (int64_t r = r0; r < r1;) {
        /* KB rows of consecutive k at once, each column's weights read in memory order
         * (a column's k x taps is one run in both OIHW and OHWI): one stream at a time
         * instead of 9 * NR pages per row. */
        const int64_t p = r / (g->KD * g->K), kd = (r / g->K) % g->KD, k = r % g->K;
        const int64_t kb = g->K - k < KB ? (g->K - k < r1 - r ? g->K - k : r1 - r) : (KB < r1 - r ? KB : r1 - r);
        const int64_t base = k * sk + (wc->bwd ? g->KD - 1 - kd : kd) * w->stride[2];
        const int64_t nl = g->cols - (wc->p0 + p) * NR < NR ? g->cols - (wc->p0 + p) * NR : NR; /* real columns */
        if (sj == 1 && sk >= NR) {
            /* Each tap's columns one run (channels-last weights in bwd_d): the runs copied (or
             * widened) into the tap rows as they lie, a later row's nine runs asked for first
             * (rows are kilobytes apart, the taps of a row too). */
            const int64_t es = (int64_t)nconv_dtype_size(w->dt), off = base + (wc->p0 + p) * NR;
            for (int64_t q = 0; q < kb; q++) {
                for (int64_t t = 0; q + PF_ROWS < kb && t < 9; t++) {
                    const char *later = (const char *)w->data + (off + (q + PF_ROWS) * sk + toff[t]) * es;
                    __builtin_prefetch(later), __builtin_prefetch(later + nl * es - 1);
                }
                for (int64_t t = 0; t < 9; t++) {
                    const int64_t at = off + q * sk + toff[t];
                    if (w->dt == NCONV_F32) memcpy(&tap[q][t * NR], (const float *)w->data + at, sizeof(float) * (size_t)nl);
                    else nconv__convert16(wc->k, w->dt)(nl, (const uint16_t *)w->data + at, &tap[q][t * NR], 1);
                }
            }
        } else if (w->dt == NCONV_F32) {
            const float *wf = (const float *)w->data + base + (wc->p0 + p) * NR * sj;
            if (sj < sk) {
                /* Columns closer in memory than rows (bwd_d of OIHW: a row's 16 columns x 9 taps
                 * are one run): row by row, not column by column across rows a page apart. */
                for (int64_t q = 0; q < kb; q++) {
                    /* Rows are kilobytes apart: ask for a later row's run now, or each row costs
                     * a memory latency. */
                    for (int64_t b = 0; q + PF_ROWS < kb && b < NR * 9 * (int64_t)sizeof(float); b += 64)
                        __builtin_prefetch((const char *)(wf + (q + PF_ROWS) * sk) + b);
                    for (int64_t l = 0; l < nl; l++) gather9(wf + q * sk + l * sj, toff, &tap[q][l]);
                }
            } else {
                /* Column by column: a column's k x taps is one run in OIHW (fwd), and in OHWI
                 * its k are adjacent per tap. */
                for (int64_t l = 0; l < nl; l++)
                    for (int64_t q = 0; q < kb; q++) gather9(wf + l * sj + q * sk, toff, &tap[q][l]);
            }
        } else {
            /* The same two orders, each row's (column's) run widened first. */
            const int64_t off = base + (wc->p0 + p) * NR * sj;
            const int rows_first = sj < sk;
            for (int64_t a = 0; a < (rows_first ? kb : nl); a++) {
                const int64_t sa = rows_first ? sk : sj, sb = rows_first ? sj : sk, nb = rows_first ? nl : kb;
                if (rows_first && a + PF_ROWS16 < kb) { /* a later row's run asked for now, as above */
                    const char *later = (const char *)((const uint16_t *)w->data + off + (a + PF_ROWS16) * sk + tlo);
                    for (int64_t b = 0; b < NR * 9 * (int64_t)sizeof(uint16_t); b += 64) __builtin_prefetch(later + b);
                }
                int64_t rel[9];
                const float *run = widen_run(wc, off + a * sa, sb, nb, toff, tlo, thi, wide, rel);
                for (int64_t b = 0; b < nb; b++) {
                    float *dst = rows_first ? &tap[a][b] : &tap[b][a];
                    if (run) gather9(run + b * sb, rel, dst);
                    else
                        for (int64_t t = 0; t < 9; t++)
                            dst[t * NR] = nconv__load_f32(w->data, w->dt, off + a * sa + b * sb + toff[t]);
                }
            }
        }
        for (int64_t q = 0; q < kb; q++)
            for (int64_t l = nl; l < NR; l++)
                for (int64_t t = 0; t < 9; t++) tap[q][t * NR + l] = 0.0f;
        for (int64_t q = 0; q < kb; q++, r++) {
            wc->k->wino_w(tap[q], wc->u + r * NR, xs);
            /* U[1][1] is the mean of the nine taps: Inf or NaN once one of them is (or they
             * overflow), so lanes turn NaN exactly then (igemm takes over). */
            const float *u11 = wc->u + 7 * xs + r * NR;
            for (int64_t l = 0; l < NR; l++) poison[l] += u11[l] - u11[l];
        }
    }
    int finite = 1;
    for (int64_t l = 0; l < NR; l++) finite &= poison[l] == 0.0f;
    wc->finite[tid] = finite;
}

/* ------------------------------------------------------ tile pipeline */

typedef struct pipe_ctx {
    const nconv_core *c;
    const wgeo *g;
    const nconv_kernels *k;
    const float *src;      /* NULL when src16 is read instead */
    float *dst;            /* NULL when dst16 is written instead */
    const uint16_t *src16; /* 16-bit channels-last operands, read and written in place */
    uint16_t *dst16;
    nconv_convert16_fn cv; /* dst16's narrowing */
    int bf16;              /* src16 is bf16, else f16 */
    const float *u, *zero, *init; /* init: bias of dst's channels, or NULL; zero: also 16-bit zeros */
    const int64_t *org_h, *org_w;
    int64_t o0, on;               /* the chunk's columns */
    int relu;
    nconv_share *shares; /* per thread: its units, claimed by nconv__share_claim */
    char *scratch;
    size_t scratch_stride;
} pipe_ctx;

/* Tile t: its image n, output plane od and origin (oh0, ow0). */
typedef struct tile {
    int64_t n, od, oh0, ow0;
} tile;

static tile tile_at(const wgeo *g, const int64_t *org_h, const int64_t *org_w, int64_t t) {
    const int64_t per_plane = g->nh * g->nw, plane = t / per_plane, q = t % per_plane;
    return (tile){plane / g->dst[0], plane % g->dst[0], org_h[q / g->nw], org_w[q % g->nw]};
}

/* The tile's 4 x 4 output pixels: the offset of channel 0 of each from the first pixel's, pixels
 * pitch apart; -1 for those outside dst. */
static void tile_offsets(const wgeo *g, const tile *tl, int64_t pitch, int64_t *off) {
    const int64_t plane = (tl->n * g->dst[0] + tl->od) * g->dst[1] * g->dst[2] * pitch;
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 4; j++) {
            const int64_t oh = tl->oh0 + i * g->dil[1], ow = tl->ow0 + j * g->dil[2];
            off[i * 4 + j] = oh < g->dst[1] && ow < g->dst[2] ? plane + (oh * g->dst[2] + ow) * pitch : -1;
        }
}

/* The same as pointers from `first`; NULL for pixels outside dst. */
static void tile_pixels(const wgeo *g, const tile *tl, float *first, int64_t pitch, float **px) {
    int64_t off[16];
    tile_offsets(g, tl, pitch, off);
    for (int i = 0; i < 16; i++) px[i] = off[i] < 0 ? NULL : first + off[i];
}

/* The 6 x 6 input patch of the tile's depth tap kd in src (channels-last, K channels): the
 * offset of each pixel, -1 for pixels in padding; 0 when the whole depth plane is. */
static int patch_offsets(const nconv_core *c, const wgeo *g, const tile *tl, int64_t kd, int64_t *off) {
    const int64_t id = nconv__map_index(tl->od - g->pad[0] + kd * g->dil[0], g->src[0], c->mode);
    if (id < 0) return 0;
    const int64_t plane = (tl->n * g->src[0] + id) * g->src[1] * g->src[2] * g->K;
    for (int64_t i = 0; i < 6; i++) {
        const int64_t ih = nconv__map_index(tl->oh0 - g->pad[1] + i * g->dil[1], g->src[1], c->mode);
        for (int64_t j = 0; j < 6; j++) {
            const int64_t iw = nconv__map_index(tl->ow0 - g->pad[2] + j * g->dil[2], g->src[2], c->mode);
            off[i * 6 + j] = ih < 0 || iw < 0 ? -1 : plane + (ih * g->src[2] + iw) * g->K;
        }
    }
    return 1;
}

/* The patch as pointers into src (zero for pixels in padding); 0 when the whole depth plane is. */
static int patch_of(const nconv_core *c, const wgeo *g, const float *src, const float *zero, const tile *tl,
                    int64_t kd, const float **patch) {
    int64_t off[XI];
    if (!patch_offsets(c, g, tl, kd, off)) return 0;
    for (int i = 0; i < XI; i++) patch[i] = off[i] < 0 ? zero : src + off[i];
    return 1;
}

/* The 16-bit patch at offsets off of src (-1: in padding, zero). */
static void patch16_of(const uint16_t *src, const int64_t *off, const uint16_t *zero, const uint16_t **patch) {
    for (int i = 0; i < XI; i++) patch[i] = off[i] < 0 ? zero : src + off[i];
}

/* Block b's input transform: V[kd][xi][tile][k], and the kernel's A pointers
 * per row tile, a[(rt * KD + kd) * MR + r] (rows past the block repeat its first). */
static void block_in(const pipe_ctx *pc, int64_t b, float *V, const float **vrow, const float **a, float *poison) {
    const nconv_core *c = pc->c;
    const wgeo *g = pc->g;
    const int64_t T = g->T, t0 = b * T, nt = t0 + T <= g->tiles ? T : g->tiles - t0;
    const float *patch[XI];
    const uint16_t *patch16[XI];
    int64_t off[XI];
    /* Input transform: V[kd][xi][tile][k]; vrow[kd * T + tile] is NULL for a depth tap in padding. */
    for (int64_t tl = 0; tl < nt; tl++) {
        const tile ti = tile_at(g, pc->org_h, pc->org_w, t0 + tl);
        for (int64_t kd = 0; kd < g->KD; kd++) {
            float *v = V + (kd * XI * T + tl) * g->ldv;
            vrow[kd * T + tl] = NULL;
            if (pc->src16) {
                if (!patch_offsets(c, g, &ti, kd, off)) continue;
                patch16_of(pc->src16, off, (const uint16_t *)pc->zero, patch16);
                pc->k->wino_in16(g->K, patch16, pc->bf16, v, T * g->ldv, poison);
            } else {
                if (!patch_of(c, g, pc->src, pc->zero, &ti, kd, patch)) continue;
                pc->k->wino_in(g->K, patch, v, T * g->ldv, poison);
            }
            vrow[kd * T + tl] = v;
        }
    }
    const int64_t rts = nconv__div_up(nt, MR);
    for (int64_t rt = 0; rt < rts; rt++)
        for (int64_t kd = 0; kd < g->KD; kd++)
            for (int64_t r = 0; r < MR; r++) {
                const int64_t tl = rt * MR + r < nt ? rt * MR + r : rt * MR;
                const float *v = vrow[kd * T + tl];
                a[(rt * g->KD + kd) * MR + r] = v ? v : pc->zero;
            }
}

/* Block b's GEMMs and output transform for the chunk's panels [p0, p1). */
static void block_out(const pipe_ctx *pc, int64_t b, int64_t p0, int64_t p1, float *M, const float *const *a,
                      float *wide) {
    const wgeo *g = pc->g;
    const int64_t T = g->T, t0 = b * T, nt = t0 + T <= g->tiles ? T : g->tiles - t0, rts = nconv__div_up(nt, MR);
    /* The GEMMs: M[xi][tile][col] for the chunk's columns; two panels of U stay in cache over the
     * row tiles (the AVX-512 kernels share each load of A between two). */
    const int64_t uxs = g->cpanels * g->KD * g->K * NR, ws = g->KD * g->K * NR;
    float *crow[MR];
    for (int64_t xi = 0; xi < XI; xi++)
        for (int64_t p = p0; p < p1; p += 2) {
            const float *up = pc->u + xi * uxs + p * ws;
            const int64_t np = p1 - p < 2 ? 1 : 2, pl = p + np - 1;
            const int64_t nc_last = pc->on - pl * NR < NR ? pc->on - pl * NR : NR;
            for (int64_t rt = 0; rt < rts; rt++) {
                const int64_t mr = nt - rt * MR < MR ? nt - rt * MR : MR;
                for (int64_t r = 0; r < MR; r++) crow[r] = M + (xi * T + rt * MR + (r < mr ? r : 0)) * g->ldm + p * NR;
                pc->k->igemm_np(mr, np, nc_last, g->K, g->KD, a + rt * g->KD * MR, xi * T * g->ldv, pc->zero, up, ws,
                                crow, pc->zero + g->K, 0);
            }
        }
    /* Output transform into dst (pixels outside the image skipped); 16-bit pixels through `wide`,
     * then narrowed. */
    const int64_t j0 = p0 * NR, jn = (p1 * NR < pc->on ? p1 * NR : pc->on) - j0;
    float *out[16];
    int64_t off[16];
    for (int64_t tl = 0; tl < nt; tl++) {
        const tile ti = tile_at(g, pc->org_h, pc->org_w, t0 + tl);
        if (pc->dst16) {
            tile_offsets(g, &ti, g->cols, off);
            for (int i = 0; i < 16; i++) out[i] = off[i] < 0 ? NULL : wide + i * jn;
        } else {
            tile_pixels(g, &ti, pc->dst + pc->o0 + j0, g->cols, out);
        }
        pc->k->wino_out(jn, M + tl * g->ldm + j0, T * g->ldm, pc->init ? pc->init + pc->o0 + j0 : NULL, out, pc->relu);
        for (int i = 0; pc->dst16 && i < 16; i++)
            if (off[i] >= 0) pc->cv(jn, wide + i * jn, pc->dst16 + pc->o0 + j0 + off[i], 0);
    }
}

/* Thread tid's scratch: V, M, then its 8 poison lanes (and pointers). */
static float *pipe_poison(const pipe_ctx *pc, int tid) {
    const wgeo *g = pc->g;
    return (float *)(pc->scratch + (size_t)tid * pc->scratch_stride) + XI * g->T * (g->KD * g->ldv + g->ldm);
}

static void pipe_task(void *arg, int tid, int nthreads) {
    const pipe_ctx *pc = arg;
    const wgeo *g = pc->g;
    float *V = (float *)(pc->scratch + (size_t)tid * pc->scratch_stride), *M = V + XI * g->T * g->KD * g->ldv;
    float *poison = pipe_poison(pc, tid);
    const float **vrow = (const float **)(poison + 8), **a = vrow + g->KD * g->T;
    /* 16-bit output: 16 pixels before narrowing */
    float *wide_out = (float *)(a + nconv__div_up(g->T, MR) * g->KD * MR + XI + 16);
    const int64_t np = nconv__div_up(pc->on, NR);
    int64_t have = -1;
    for (int64_t u; (u = nconv__share_claim(pc->shares, tid, nthreads)) >= 0;) {
        const int64_t b = u / g->pgroups, q = u % g->pgroups;
        /* a thread's consecutive units of one block share V */
        if (b != have) block_in(pc, b, V, vrow, a, poison);
        have = b;
        int64_t p0, p1;
        nconv__split(np, (int)q, (int)g->pgroups, &p0, &p1);
        if (p0 < p1) block_out(pc, b, p0, p1, M, a, wide_out);
    }
}

static nconv_status fwd_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    const int bwd = e->dir == NCONV_DIR_BWD_D, threads = e->threads;
    wgeo g;
    geometry(c, e->dir, threads, &g);
    ws_sizes s;
    const nconv_view *in = bwd ? e->y : e->x, *out = bwd ? e->x : e->y;
    const unsigned acts = nconv__view_is_nxc(e->x) && nconv__view_is_nxc(e->y) ? NCONV_ACTS_NXC : 0u;
    sizes(c, e->dir, threads, nconv__exec_copies(e) | acts, &s);
    const float *packed = e->packed; /* every chunk's U, see wino_pack */
    float *srcb = nconv__arena_take(e->ws, s.src), *dstb = nconv__arena_take(e->ws, s.dst);
    float *u = nconv__arena_take(e->ws, s.u), *zero = nconv__arena_take(e->ws, s.zero);
    float *init = nconv__arena_take(e->ws, s.init);
    int64_t *org = nconv__arena_take(e->ws, s.org);
    nconv_share *shares = nconv__arena_take(e->ws, s.shares);
    char *scratch = nconv__arena_take(e->ws, (size_t)threads * nconv__ws_round(s.scratch));
    if (!srcb || !dstb || !u || !zero || !init || !org || !shares || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm winograd");
    memset(zero, 0, s.zero);
    axis_tiles(g.dst[1], g.dil[1], org);
    axis_tiles(g.dst[2], g.dil[2], org + g.nh);
    const nconv_kernels *k = e->k;

    /* 16-bit channels-last operands are read and written in place (an output with z is not) */
    const int src16 = nconv__is_16bit(c->dt) && acts;
    const int dst16 = src16 && !(e->epi && e->epi->z);
    const float *src = src16 ? NULL : nconv__nxc_input(e, in, srcb);
    int fuse = dst16;
    float *dst = dst16 ? NULL : nconv__nxc_output(out, e->epi, dstb, &fuse);
    const int bias = fuse && e->epi && e->epi->bias;
    if (bias) nconv__epi_init(e->epi, init, g.cols);

    int finite[NCONV_MAX_THREADS];
    pipe_ctx pc = {.c = c,
                   .g = &g,
                   .k = k,
                   .src = src,
                   .dst = dst,
                   .src16 = src16 ? in->data : NULL,
                   .dst16 = dst16 ? out->data : NULL,
                   .cv = nconv__convert16(k, c->dt),
                   .bf16 = c->dt == NCONV_BF16,
                   .u = u,
                   .zero = zero,
                   .init = bias ? init : NULL,
                   .org_h = org,
                   .org_w = org + g.nh,
                   .relu = fuse && e->epi && e->epi->relu,
                   .shares = shares,
                   .scratch = scratch,
                   .scratch_stride = nconv__ws_round(s.scratch)};
    for (int64_t ch = 0; ch < g.chunks; ch++) {
        pc.o0 = ch * g.cpanels * NR;
        if (pc.o0 >= g.cols) break;
        pc.on = g.cols - pc.o0 < g.cpanels * NR ? g.cols - pc.o0 : g.cpanels * NR;
        int ok = 1;
        if (packed) {
            pc.u = packed + ch * (int64_t)(s.u / sizeof(float));
        } else {
            for (int i = 0; i < NCONV_MAX_THREADS; i++) finite[i] = 1;
            wt_ctx wc = {&g, k, e->w, bwd, ch * g.cpanels, u, finite, scratch, pc.scratch_stride};
            nconv__parallel(e, wt_task, &wc);
            for (int i = 0; i < threads && i < NCONV_MAX_THREADS; i++) ok &= finite[i];
            if (!ok) return (nconv_status)NCONV__DECLINE_W;
        }
        for (int i = 0; ch == 0 && i < threads; i++) memset(pipe_poison(&pc, i), 0, 8 * sizeof(float));
        nconv__share_split(shares, g.blocks * g.pgroups, nconv__parallel_width(e));
        nconv__parallel(e, pipe_task, &pc);
        /* The first chunk transformed every input patch: its poison tells whether the input is finite. */
        for (int i = 0; ch == 0 && i < threads; i++)
            for (int l = 0; l < 8; l++) ok &= pipe_poison(&pc, i)[l] == 0.0f;
        if (!ok) return (nconv_status)NCONV__DECLINE_DATA;
    }
    if (!fuse) nconv__scatter_nxc_f32(e, out, dst, e->epi);
    return NCONV_OK;
}

/* ------------------------------------------------------ backward-weights */

/*
 * dw = G^T S G with S[kd][xi][o][c] = sum over tiles of Z[xi][tile][o] * V[kd][xi][tile][c],
 * Z = A dY A^T the transformed 4 x 4 dy tile, V = B^T d B the forward's input patch
 * transform: the gradient of the forward's tile product. Output channels go in
 * chunks whose S fits U_BUDGET; per chunk, blocks of T tiles are transformed
 * (threads claim the tiles), then their 36 x KD GEMMs accumulate into S (threads
 * claim (kd, xi): every S element adds its blocks in block order, whatever the
 * thread count), then S is transformed into dw. Enough tiles make two slices,
 * each with its own V, Z and S, added before dw's transform: on two threads
 * each thread keeps to its slice's blocks, which otherwise go from one core's
 * cache to the other's between the two phases.
 */
enum { BW_BYTES = 4 << 20, BW_MAX_T = 192 }; /* V and Z of a block, each at most; tiles per block */
/* Two slices of the tiles when each has at least BW_SLICE_TILES: a slice costs a pass over its S,
 * which a few dozen tiles do not repay. */
enum { BW_SLICES = 2, BW_SLICE_TILES = 96 };

typedef struct bgeo {
    wgeo g;           /* tiles of dy (the forward's output), patches of x */
    int64_t CP, ldc;  /* panels of NR input channels; S row pitch (CP * NR) */
    int64_t ob;       /* output channels per chunk (a multiple of MR) */
    int64_t sl, tps;  /* slices of the tiles, each with its own V, Z and S; tiles per slice */
    int64_t T, steps; /* tiles per block; blocks per slice */
} bgeo;

static void bw_geometry(const nconv_core *c, int threads, bgeo *b) {
    geometry(c, NCONV_DIR_FWD, threads, &b->g);
    const int64_t KD = b->g.KD;
    b->CP = nconv__div_up(c->C, NR), b->ldc = b->CP * NR;
    int64_t ob = U_BUDGET / ((int64_t)sizeof(float) * KD * XI * b->ldc);
    ob -= ob % MR;
    if (ob < MR) ob = MR;
    const int64_t chunks = nconv__div_up(c->O, ob);
    b->ob = nconv__div_up(nconv__div_up(c->O, chunks > 0 ? chunks : 1), MR) * MR;
    int64_t T = BW_BYTES / ((int64_t)sizeof(float) * KD * XI * b->ldc);
    const int64_t tz = BW_BYTES / ((int64_t)sizeof(float) * XI * b->ob);
    if (tz < T) T = tz;
    if (T > BW_MAX_T) T = BW_MAX_T;
    b->sl = b->g.tiles >= BW_SLICES * BW_SLICE_TILES ? BW_SLICES : 1;
    b->tps = nconv__div_up(b->g.tiles, b->sl);
    if (T < 1) T = 1;
    b->steps = nconv__div_up(b->tps, T);
    /* Sliced, even blocks (a short last block per slice costs more than its share); one slice
     * keeps the full first blocks. */
    if (b->sl > 1) T = nconv__div_up(b->tps, b->steps);
    else if (T > b->tps) T = b->tps;
    b->T = T > 1 ? T : 1;
}

struct bw_sizes {
    size_t x, dy, s, v, z, zero, org, shares, scratch; /* scratch: per thread */
};

static size_t bw_sizes(const nconv_core *c, int threads, unsigned copies, struct bw_sizes *s) {
    bgeo b;
    bw_geometry(c, threads, &b);
    /* 16-bit channels-last x and dy are read in place (see bw_transform_task) */
    if (nconv__is_16bit(c->dt) && (copies & NCONV_ACTS_NXC)) copies &= ~(unsigned)NCONV_COPY_BOTH;
    s->x = copies & NCONV_COPY_X ? sizeof(float) * (size_t)(c->N * nconv__core_in_spatial(c) * c->C) : 0;
    s->dy = copies & NCONV_COPY_Y ? sizeof(float) * (size_t)(c->N * nconv__core_out_spatial(c) * c->O) : 0;
    s->s = sizeof(float) * (size_t)(b.g.KD * XI * b.ob * b.ldc); /* each, per slice */
    s->v = sizeof(float) * (size_t)(b.g.KD * XI * b.ldc * b.T);
    s->z = sizeof(float) * (size_t)(XI * b.T * b.ob);
    s->zero = sizeof(float) * (size_t)(b.ldc + NR);
    s->org = sizeof(int64_t) * (size_t)(b.g.nh + b.g.nw);
    s->shares = sizeof(nconv_share) * (size_t)threads;
    /* dw's transform of a row (16-bit OIHW: and its transpose, see bw_out_task), then the poison
     * lanes */
    s->scratch = sizeof(float) * (size_t)((nconv__is_16bit(c->dt) ? 18 : 9) * c->C + 8);
    return nconv__ws_round(s->x) + nconv__ws_round(s->dy) +
           (size_t)b.sl * (nconv__ws_round(s->s) + nconv__ws_round(s->v) + nconv__ws_round(s->z)) +
           nconv__ws_round(s->zero) + nconv__ws_round(s->org) + nconv__ws_round(s->shares) +
           (size_t)threads * nconv__ws_round(s->scratch);
}

typedef struct bw_ctx {
    const nconv_core *c;
    const bgeo *b;
    const nconv_kernels *k;
    const float *x, *dy, *zero;    /* x, dy NULL when x16, dy16 are read instead; zero: also 16-bit zeros */
    const uint16_t *x16, *dy16;    /* 16-bit channels-last operands, read as they lie */
    int bf16;                      /* they are bf16, else f16 */
    nconv_convert16_fn cv;         /* a 16-bit dw's narrowing */
    const int64_t *org_h, *org_w;
    float *S[BW_SLICES], *V[BW_SLICES], *Z[BW_SLICES];
    const nconv_view *w;
    int64_t o0, on;                         /* the chunk's output channels */
    int64_t t0[BW_SLICES], nt[BW_SLICES];  /* each slice's block of tiles (nt 0: the slice is done) */
    int first;                              /* the chunk's first blocks: S starts from zero */
    int accumulate;                         /* dw += (see nconv_exec) */
    nconv_share *shares;    /* per thread: its tiles (transforms) or (kd, xi) units (GEMMs) */
    char *scratch;
    size_t scratch_stride;
} bw_ctx;

static float *bw_poison(const bw_ctx *bc, int tid) {
    return (float *)(bc->scratch + (size_t)tid * bc->scratch_stride + bc->scratch_stride) - 8;
}

/* The block's transforms: Z[xi][tile][o] for the chunk (the GEMMs read it in place, lda ob),
 * and V[kd][xi][panel][tile][NR] (zeros for a depth tap in padding). */
static void bw_transform_task(void *arg, int tid, int nthreads) {
    const bw_ctx *bc = arg;
    const nconv_core *c = bc->c;
    const wgeo *g = &bc->b->g;
    const int64_t T = bc->b->T, CP = bc->b->CP, ob = bc->b->ob;
    float *poison = bw_poison(bc, tid);
    const float *patch[XI], *pp[XI];
    const uint16_t *patch16[XI], *pp16[XI], *y16[16];
    float *ysrc[16];
    const float *yrows[16]; /* the tile's dy pixels as wino_dy reads them */
    int64_t off[XI];
    const uint16_t *zero16 = (const uint16_t *)bc->zero;
    for (int64_t it; (it = nconv__share_claim(bc->shares, tid, nthreads)) >= 0;) {
        const int p = it >= bc->nt[0];
        const int64_t tl = it - (p ? bc->nt[0] : 0);
        float *Z = bc->Z[p], *V = bc->V[p];
        const tile ti = tile_at(g, bc->org_h, bc->org_w, bc->t0[p] + tl);
        /* The next tile's patch is requested now: its loads would stall the input transform. */
        if (tl + 1 < bc->nt[p]) {
            const tile tn = tile_at(g, bc->org_h, bc->org_w, bc->t0[p] + tl + 1);
            const char *x = bc->x16 ? (const char *)bc->x16 : (const char *)bc->x;
            const int64_t es = bc->x16 ? 2 : 4; /* bytes per element */
            if (patch_offsets(c, g, &tn, 0, off))
                for (int i = 0; i < XI; i++)
                    if (off[i] >= 0)
                        for (int64_t ch = 0; ch < c->C; ch += 64 / es) __builtin_prefetch(x + (off[i] + ch) * es);
        }
        /* Whole rows of ob floats: a copy into MR-row tiles would write partial lines. */
        if (bc->dy16) {
            tile_offsets(g, &ti, c->O, off);
            for (int i = 0; i < 16; i++) y16[i] = off[i] < 0 ? NULL : bc->dy16 + bc->o0 + off[i];
            bc->k->wino_dy16(bc->on, y16, bc->bf16, Z + tl * ob, T * ob, poison);
        } else {
            tile_pixels(g, &ti, (float *)bc->dy + bc->o0, c->O, ysrc); /* read only */
            for (int i = 0; i < 16; i++) yrows[i] = ysrc[i];
            bc->k->wino_dy(bc->on, yrows, Z + tl * ob, T * ob, poison);
        }
        for (int64_t kd = 0; kd < g->KD; kd++) {
            float *v = V + kd * XI * CP * T * NR + tl * NR;
            const int in =
                bc->x16 ? patch_offsets(c, g, &ti, kd, off) : patch_of(c, g, bc->x, bc->zero, &ti, kd, patch);
            if (!in) {
                for (int64_t r = 0; r < XI * CP; r++) memset(v + r * T * NR, 0, sizeof(float) * NR);
                continue;
            }
            if (bc->x16) patch16_of(bc->x16, off, zero16, patch16);
            for (int64_t cp = 0; cp < CP; cp++) { /* the zero row is ldc + NR long: offsets stay inside it */
                const int64_t n16 = c->C - cp * NR < NR ? c->C - cp * NR : NR;
                if (bc->x16) {
                    for (int i = 0; i < XI; i++) pp16[i] = patch16[i] + cp * NR;
                    bc->k->wino_in16(n16, pp16, bc->bf16, v + cp * T * NR, CP * T * NR, poison);
                    continue;
                }
                for (int i = 0; i < XI; i++) pp[i] = patch[i] + cp * NR;
                bc->k->wino_in(n16, pp, v + cp * T * NR, CP * T * NR, poison);
            }
        }
    }
}

/* The block's GEMMs, a (kd, xi) per unit: S[kd][xi][o][c] (+)= sum_tiles Z[xi][tile][o] * V[kd][xi][c-panel][tile][c]. */
static void bw_gemm_task(void *arg, int tid, int nthreads) {
    const bw_ctx *bc = arg;
    const bgeo *b = bc->b;
    const int64_t T = b->T, blocks = nconv__div_up(bc->on, MR), C = bc->c->C, units = b->g.KD * XI;
    for (int64_t u; (u = nconv__share_claim(bc->shares, tid, nthreads)) >= 0;) {
        const int64_t p = u / units, kd = u % units / XI, xi = u % XI, nt = bc->nt[p];
        if (nt == 0) continue;
        const float *ap = bc->Z[p] + xi * T * b->ob; /* [tile][o] */
        for (int64_t cp = 0; cp < b->CP; cp += 2) { /* two column panels per call, as the forward GEMMs */
            const float *v = bc->V[p] + ((kd * XI + xi) * b->CP + cp) * T * NR;
            const int64_t np = b->CP - cp < 2 ? 1 : 2, cl = cp + np - 1;
            const int64_t nc_last = C - cl * NR < NR ? C - cl * NR : NR;
            for (int64_t blk = 0; blk < blocks; blk++) {
                const int64_t mr = bc->on - blk * MR < MR ? bc->on - blk * MR : MR;
                float *s = bc->S[p] + ((kd * XI + xi) * b->ob + blk * MR) * b->ldc + cp * NR;
                bc->k->gemm_np(mr, np, nc_last, nt, ap + blk * MR, b->ob, v, T * NR, s, b->ldc, NULL,
                               bc->first ? 0 : NCONV_GEMM_ACCUMULATE);
            }
        }
    }
}

/* dw[o][c][kd] = G^T S[kd][.][o][c] G, into the caller's layout, S the slices' sum in slice order. */
static void bw_out_task(void *arg, int tid, int nthreads) {
    const bw_ctx *bc = arg;
    const bgeo *b = bc->b;
    const nconv_view *w = bc->w;
    const int64_t C = bc->c->C;
    float *tmp = (float *)(bc->scratch + (size_t)tid * bc->scratch_stride);
    int64_t u0, u1;
    nconv__split(bc->on * b->g.KD, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t o = u / b->g.KD, kd = u % b->g.KD, row = (kd * XI * b->ob + o) * b->ldc, xs = b->ob * b->ldc;
        bc->k->wino_wgrad(C, bc->S[0] + row, b->sl > 1 ? bc->S[1] + row : NULL, xs, tmp, C);
        const int64_t base = (bc->o0 + o) * w->stride[0] + kd * w->stride[2];
        if (bc->accumulate) { /* f32 */
            for (int64_t t = 0; t < 9; t++)
                for (int64_t ch = 0; ch < C; ch++)
                    ((float *)w->data)[base + (t / 3) * w->stride[3] + (t % 3) * w->stride[4] + ch * w->stride[1]] +=
                        tmp[t * C + ch];
            continue;
        }
        if (w->dt == NCONV_F32 && w->stride[3] == 3 && w->stride[4] == 1) { /* taps dense and innermost (OIHW) */
            bc->k->transpose(9, C, tmp, C, (float *)w->data + base, w->stride[1]);
            continue;
        }
        /* 16-bit, the nine taps of every channel dense (OIHW, one depth tap), or the channels of
         * every tap (OHWI): narrowed by one call, after a transpose for OIHW (element by element
         * it cost more than the GEMMs of deep layers) */
        if (nconv__is_16bit(w->dt) && b->g.KD == 1 && w->stride[3] == 3 && w->stride[4] == 1 && w->stride[1] == 9) {
            bc->k->transpose(9, C, tmp, C, tmp + 9 * C, 9);
            bc->cv(9 * C, tmp + 9 * C, (uint16_t *)w->data + base, 0);
            continue;
        }
        if (nconv__is_16bit(w->dt) && b->g.KD == 1 && w->stride[1] == 1 && w->stride[4] == C && w->stride[3] == 3 * C) {
            bc->cv(9 * C, tmp, (uint16_t *)w->data + base, 0);
            continue;
        }
        for (int64_t t = 0; t < 9; t++) {
            const int64_t off = base + (t / 3) * w->stride[3] + (t % 3) * w->stride[4];
            for (int64_t ch = 0; ch < C; ch++) {
                if (w->dt == NCONV_F32) ((float *)w->data)[off + ch * w->stride[1]] = tmp[t * C + ch];
                else nconv__store1(w->data, w->dt, off + ch * w->stride[1], tmp[t * C + ch]);
            }
        }
    }
}

static nconv_status bwd_w_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    const int threads = e->threads;
    bgeo b;
    bw_geometry(c, threads, &b);
    struct bw_sizes s;
    const unsigned acts = nconv__view_is_nxc(e->x) && nconv__view_is_nxc(e->y) ? NCONV_ACTS_NXC : 0u;
    const int in16 = nconv__is_16bit(c->dt) && acts; /* see bw_sizes */
    bw_sizes(c, threads, nconv__exec_copies(e) | acts, &s);
    float *xb = nconv__arena_take(e->ws, s.x), *yb = nconv__arena_take(e->ws, s.dy);
    float *S[BW_SLICES] = {NULL}, *V[BW_SLICES] = {NULL}, *Z[BW_SLICES] = {NULL};
    int got = 1;
    for (int64_t p = 0; p < b.sl; p++) {
        S[p] = nconv__arena_take(e->ws, s.s), V[p] = nconv__arena_take(e->ws, s.v);
        Z[p] = nconv__arena_take(e->ws, s.z);
        got &= S[p] && V[p] && Z[p];
    }
    float *zero = nconv__arena_take(e->ws, s.zero);
    int64_t *org = nconv__arena_take(e->ws, s.org);
    nconv_share *shares = nconv__arena_take(e->ws, s.shares);
    char *scratch = nconv__arena_take(e->ws, (size_t)threads * nconv__ws_round(s.scratch));
    if (!xb || !yb || !got || !zero || !org || !shares || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm winograd");
    memset(zero, 0, s.zero);
    axis_tiles(b.g.dst[1], b.g.dil[1], org);
    axis_tiles(b.g.dst[2], b.g.dil[2], org + b.g.nh);
    bw_ctx bc = {.c = c,
                 .b = &b,
                 .k = e->k,
                 .x = in16 ? NULL : nconv__nxc_input(e, e->x, xb),
                 .dy = in16 ? NULL : nconv__nxc_input(e, e->y, yb),
                 .zero = zero,
                 .x16 = in16 ? e->x->data : NULL,
                 .dy16 = in16 ? e->y->data : NULL,
                 .bf16 = c->dt == NCONV_BF16,
                 .cv = nconv__convert16(e->k, c->dt),
                 .org_h = org,
                 .org_w = org + b.g.nh,
                 .S = {S[0], S[1]},
                 .V = {V[0], V[1]},
                 .Z = {Z[0], Z[1]},
                 .w = e->w,
                 .first = 1,
                 .accumulate = e->accumulate,
                 .shares = shares,
                 .scratch = scratch,
                 .scratch_stride = nconv__ws_round(s.scratch)};
    const int width = nconv__parallel_width(e);
    for (int i = 0; i < threads; i++) memset(bw_poison(&bc, i), 0, 8 * sizeof(float));
    for (bc.o0 = 0; bc.o0 < c->O; bc.o0 += b.ob) {
        bc.on = c->O - bc.o0 < b.ob ? c->O - bc.o0 : b.ob;
        if (b.g.tiles == 0) memset(S[0], 0, s.s); /* no pixels: dw is zero */
        /* Z's lanes past the chunk's channels, which the GEMMs' last MR rows read (and never
         * store) and wino_dy never writes: zeros, not the workspace's old bits. */
        for (int64_t p = 0; p < b.sl && bc.on < b.ob; p++)
            for (int64_t r = 0; r < XI * b.T; r++)
                memset(Z[p] + r * b.ob + bc.on, 0, sizeof(float) * (size_t)(b.ob - bc.on));
        /* Slices side by side when each can have a thread, else one after the other (a slice's
         * S stays in cache); the sums are the same either way. */
        const int64_t together = width >= b.sl ? b.sl : 1, rounds = b.sl / together;
        for (int64_t r = 0; r < rounds * b.steps; r++) {
            const int64_t p0 = r / b.steps * together, step = r % b.steps;
            for (int64_t p = 0; p < BW_SLICES; p++) {
                const int64_t last = (p + 1) * b.tps < b.g.tiles ? (p + 1) * b.tps : b.g.tiles;
                const int64_t end = p >= p0 && p < p0 + together ? last : 0;
                bc.t0[p] = p * b.tps + step * b.T;
                bc.nt[p] = end - bc.t0[p] < 0 ? 0 : end - bc.t0[p] < b.T ? end - bc.t0[p] : b.T;
            }
            bc.first = step == 0;
            nconv__share_split(shares, bc.nt[0] + bc.nt[1], width);
            nconv__parallel(e, bw_transform_task, &bc);
            int ok = 1;
            for (int i = 0; i < threads; i++)
                for (int l = 0; l < 8; l++) ok &= bw_poison(&bc, i)[l] == 0.0f;
            if (!ok) return (nconv_status)NCONV__DECLINE_DATA;
            nconv__share_split(shares, b.sl * b.g.KD * XI, width);
            nconv__parallel(e, bw_gemm_task, &bc);
        }
        nconv__parallel(e, bw_out_task, &bc);
    }
    return NCONV_OK;
}

static size_t wino_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    ws_sizes s;
    struct bw_sizes b;
    return dir == NCONV_DIR_BWD_W ? bw_sizes(c, threads, copies, &b) : sizes(c, dir, threads, copies, &s);
}

static nconv_status wino_run(const nconv_exec *e) { return e->dir == NCONV_DIR_BWD_W ? bwd_w_run(e) : fwd_run(e); }

/* Prepacked weights (fwd, bwd_d): U of every output-channel chunk, one after another. Its
 * layout depends on channels and depth taps only, not on the batch or a split's bands. */
static size_t wino_pack_size(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch) {
    *scratch = 0;
    if (dir == NCONV_DIR_BWD_W) return 0;
    wgeo g;
    geometry(c, dir, threads, &g);
    ws_sizes s;
    sizes(c, dir, threads, 0, &s);
    *scratch = 64 + (size_t)threads * nconv__ws_round(wt_scratch(c->dt)); /* 64: the arena's alignment */
    return (size_t)g.chunks * s.u;
}

static nconv_status wino_pack(const nconv_exec *e, void *dst) {
    wgeo g;
    geometry(e->c, e->dir, e->threads, &g);
    ws_sizes s;
    sizes(e->c, e->dir, e->threads, 0, &s);
    const size_t stride = nconv__ws_round(wt_scratch(e->c->dt));
    char *scratch = nconv__arena_take(e->ws, (size_t)e->threads * stride);
    if (!scratch) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: scratch too small for winograd's packing");
    int finite[NCONV_MAX_THREADS];
    for (int i = 0; i < NCONV_MAX_THREADS; i++) finite[i] = 1;
    for (int64_t ch = 0; ch < g.chunks && ch * g.cpanels * NR < g.cols; ch++) {
        wt_ctx wc = {&g, e->k, e->w, e->dir == NCONV_DIR_BWD_D, ch * g.cpanels,
                     (float *)dst + ch * (int64_t)(s.u / sizeof(float)), finite, scratch, stride};
        nconv__parallel(e, wt_task, &wc);
    }
    for (int i = 0; i < NCONV_MAX_THREADS; i++)
        if (!finite[i]) return (nconv_status)NCONV__DECLINE_W;
    return NCONV_OK;
}

/* Calls with Inf or NaN are declined (see the top of this file). */
const nconv_algo nconv_algo_winograd = {.name = "winograd", .applies = wino_applies, .workspace = wino_workspace,
                                        .run = wino_run, .preferred = wino_preferred, .accumulates = 1,
                                        .pack_size = wino_pack_size, .pack = wino_pack,
                                        .declines = {NCONV__DECLINES_W | NCONV__DECLINES_DATA,
                                                     NCONV__DECLINES_W | NCONV__DECLINES_DATA, NCONV__DECLINES_DATA}};
