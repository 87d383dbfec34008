/*
 * Algorithm "igemm": indirect GEMM on channels-last (NHWC) f32 data, the
 * fast path for f32 (and f16 / bf16, converted to f32) on every ISA.
 *
 * Activations are used as [pixels][channels] matrices: a row of the input
 * for one pixel and one kernel tap is a contiguous run of C/G channels, so
 * convolution is a GEMM whose A rows are pointers into the input (zero taps
 * point at a zero buffer) and no im2col copy is made.
 *
 *   fwd:   y[p][o]  = sum_{t, c} x[pix(p, t)][c] * w[o][c][t]      rows: output pixels
 *   bwd_d: dx[q][c] = sum_{t, o} dy[pix'(q, t)][o] * w[o][c][t]    rows: input pixels
 *          Input pixels are split into stride residue classes; in each class
 *          a fixed subset of taps reaches the output, so no zero work is done.
 *   bwd_w: dw[o][c][t] = sum_p dy[p][o] * x[pix(p, t)][c]          a GEMM per tap,
 *          reduced over pixels in blocks: dy^T packed, input rows read in
 *          place (for thin input channels the other way round).
 *
 * Framework (this file): operand conversion, weight packing, row decoding,
 * blocking and threading. Micro-kernels: src/kernels (6 x 16 tiles).
 * Threads split rows (fwd, bwd_d; and column panels when rows are few) or dw
 * tiles or pixel chunks (bwd_w); every output element
 * is summed in an order fixed by the problem alone, so results are bitwise
 * identical for any thread count.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h> /* _mm_sfence */
#endif

enum { MR = NCONV_MR, NR = NCONV_NR };
enum { A_BLOCK_BYTES = 192 << 10 }; /* A rows of a row block, kept in L2 across column panels */
enum { K_BLOCK = 2048 };            /* reduction block (taps x channels): a 128 KiB panel of w stays in L2 */
enum { PACK_PAD = 8 };              /* floats after each packed A row: breaks power-of-two strides */
enum { MAX_TAPS = 64 };             /* bwd_d: kernel taps per dim in a residue class */
enum { PGROUP_UNITS = 8 };          /* row GEMM: row blocks per thread, at least, before column panels are split too */
enum { MAX_KERNEL = 65536, MAX_CLASSES = 16384 };

static int igemm_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (c->dt == NCONV_F64) {
        if (why_not) *why_not = "f64 problems run on the reference (f64 accumulation)";
        return 0;
    }
    if (dir == NCONV_DIR_BWD_D && c->mode != NCONV_PAD_ZEROS) {
        if (why_not) *why_not = "bwd_d with a non-zero padding mode needs a scatter (gemm does it)";
        return 0;
    }
    if (dir == NCONV_DIR_BWD_D && (c->k[0] > MAX_TAPS || c->k[1] > MAX_TAPS || c->k[2] > MAX_TAPS)) {
        if (why_not) *why_not = "bwd_d supports kernels of at most 64 taps per dim";
        return 0;
    }
    /* Per-row tap pointers scale with the taps, bwd_d jobs with the stride
     * residue classes: both stay small for any real network. */
    if (nconv__core_kernel_spatial(c) > MAX_KERNEL) {
        if (why_not) *why_not = "kernels of more than 65536 taps";
        return 0;
    }
    if (dir == NCONV_DIR_BWD_D && (double)c->G * (double)c->s[0] * (double)c->s[1] * (double)c->s[2] > MAX_CLASSES) {
        if (why_not) *why_not = "bwd_d with more than 16384 groups x stride residue classes";
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------- geometry */

/* Rows (pixels) and the reduction of the GEMM of one direction. */
typedef struct geo {
    int64_t Cg, Og, KS, IS, OS;
    int64_t rows_cols; /* columns of the row GEMM: Og (fwd) or Cg (bwd_d) */
    int64_t kc;        /* channels per tap in the reduction: Cg (fwd) or Og (bwd_d) */
    int64_t kchunk;    /* channels per reduction block (all taps of the block's channels) */
    int64_t panels;    /* column panels of NR */
    int64_t mc_tiles;  /* row tiles per cache block */
    int64_t bw_kc;     /* bwd_w: pixels per reduction block */
    int64_t bw_chunks; /* bwd_w: pixel chunks reduced separately, then summed in order (see bw_task) */
    int bw_swap;       /* bwd_w: tile rows are input columns (Cg, or KW * Cg when W-folded), else output channels */
    int64_t bw_dy_rows; /* bwd_w, not swapped: leading row tiles whose dy^T is read from dy's rows in place */
    int64_t bw_mr;      /* bwd_w: rows per tile, MR or (7 x 16 kernel, W-folded swapped) 7 */
    int pack_a;        /* row GEMM: copy A rows of a block into contiguous scratch first */
    int prefetch_a;    /* row GEMM, 1x1: fetch the next tile's A rows while a tile computes */
    int wfold;         /* fwd, bwd_w: (kw, c) read as one run of a W-padded input copy (thin channels) */
    int64_t ks_rows;   /* taps of the row GEMM: KS, or KD * KH when W-folded */
    int64_t iw_pad;    /* width of the W-padded copy */
    int pointwise;     /* 1x1, stride 1, no padding: row i of A and of C is pixel i (no tap arithmetic) */
    int dcols;         /* bwd_d with thin input channels: column GEMM + scatter-add (see bwd_d_cols) */
    int64_t col_rows;  /* dcols: output pixels per column block */
} geo;

static void geometry(const nconv_core *c, nconv_direction dir, int threads, geo *g) {
    g->Cg = c->C / c->G, g->Og = c->O / c->G;
    g->KS = nconv__core_kernel_spatial(c);
    g->IS = nconv__core_in_spatial(c), g->OS = nconv__core_out_spatial(c);
    g->rows_cols = dir == NCONV_DIR_BWD_D ? g->Cg : g->Og;
    g->kc = dir == NCONV_DIR_BWD_D ? g->Og : g->Cg;
    g->ks_rows = g->KS;
    g->pointwise = g->KS == 1;
    for (int a = 0; a < 3; a++) g->pointwise &= c->s[a] == 1 && c->pb[a] == 0 && c->out[a] == c->in[a];
    /* Thin input channels: a tap reads only Cg floats, too short a run for
     * the kernel. Along W consecutive taps are adjacent in memory, so with a
     * zero-padded copy of the input each (kd, kh) tap is one run of KW * C. */
    g->wfold = dir != NCONV_DIR_BWD_D && g->Cg <= 8 && c->k[2] > 1 && c->d[2] == 1;
    g->iw_pad = (c->out[2] - 1) * c->s[2] + c->k[2];
    if (g->wfold) g->ks_rows = c->k[0] * c->k[1];
    if (g->wfold && dir == NCONV_DIR_FWD) g->kc = c->k[2] * g->Cg;
    /* bwd_d with few input channels: rows of Cg columns waste most of a tile. */
    g->dcols = dir == NCONV_DIR_BWD_D && c->G == 1 && g->Cg <= 8 && c->d[2] == 1 && g->KS * g->Cg >= 2 * g->Cg;
    /* Column blocks of 2 MiB: each block is two parallel regions (GEMM, scatter), and
     * blocks of 256 KiB made conv1 slower on 2 threads than on 1. */
    g->col_rows = (2 << 20) / ((int64_t)sizeof(float) * g->KS * g->Cg);
    g->col_rows = g->col_rows < MR ? MR : g->col_rows > 32768 ? 32768 : g->col_rows - g->col_rows % MR;
    g->panels = nconv__div_up(g->rows_cols, NR);
    g->kchunk = g->kc;
    if (g->ks_rows * g->kc > K_BLOCK) {
        g->kchunk = K_BLOCK / g->ks_rows;
        if (g->kchunk >= 8) g->kchunk -= g->kchunk % 8;
        if (g->kchunk < 1) g->kchunk = 1;
    }
    /* Rows one pixel apart are C floats apart: with taps, a multiple of 4 KiB
     * maps the six rows of a tile to one L1 set, which copying them (padded)
     * into scratch avoids. 1x1 rows are read in place, each used once per
     * block, so a copy would have nothing to overlap it; from 1 KiB on the
     * next tile's rows are fetched while a tile computes instead (narrower
     * rows gain nothing from either; BENCHMARKS.md, design measurements). */
    const int64_t src_ch = dir == NCONV_DIR_BWD_D ? c->O : c->C;
    g->pack_a = dir != NCONV_DIR_BWD_W && g->panels > 1 && g->ks_rows > 1 && (src_ch * 4) % 4096 == 0;
    g->prefetch_a = dir != NCONV_DIR_BWD_W && g->ks_rows == 1 && src_ch >= 256;
    int64_t row_bytes = (int64_t)sizeof(float) * g->ks_rows * g->kchunk * MR;
    g->mc_tiles = A_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    if (g->mc_tiles < 1) g->mc_tiles = 1;
    if (g->mc_tiles > 64) g->mc_tiles = 64;
    /* bwd_w: pixels per reduction block; the packed dy^T of a block stays in L2. */
    g->bw_kc = (64 << 10) / (g->Og > 0 ? g->Og : 1); /* the packed dy^T block: 256 KiB */
    if (g->bw_kc < 128) g->bw_kc = 128;
    if (g->bw_kc > 512) g->bw_kc = 512;
    /* Up to 512 pixels in all (7 x 7 layers), one block: each block is another pass over the
     * sums, megabytes for deep layers (res5b_reduce: 4 blocks of 128 -> 1 of 392, 2-4%). */
    if (c->N * g->OS <= 512 && c->N * g->OS > g->bw_kc) g->bw_kc = c->N * g->OS;
    /* bwd_w tiles are MR rows x NR columns: put the input columns (Cg, or
     * KW * Cg when W-folded) on the rows when that wastes fewer lanes (input
     * layers: 21 columns fill 2 panels of 16 at 66%, 4 tiles of 6 at 88%). */
    const int64_t width = g->wfold ? c->k[2] * g->Cg : g->Cg;
    const double eff_o = (double)g->Og / (double)(MR * nconv__div_up(g->Og, MR)) * (double)width / (double)(NR * nconv__div_up(width, NR));
    const double eff_c = (double)width / (double)(MR * nconv__div_up(width, MR)) * (double)g->Og / (double)(NR * nconv__div_up(g->Og, NR));
    /* Only for a clear gain: the swapped accumulators [c][o] are written to dw transposed. */
    g->bw_swap = eff_c > 1.1 * eff_o;
    /* With several threads each packs x's column panels for its own dy^T row tiles: all of x,
     * per thread. Swapped, each packs x^T for its own tiles only and reads dy's rows in place,
     * which suits rows shorter than 2 KiB (longer ones fold onto few L1 sets: res5b_reduce's 2 KiB
     * rows ran 1.4x slower swapped, res2b-res4b_reduce's 7-10% faster). Every product and sum is
     * the same either way (a * b = b * a, the same blocks and order): no bit depends on it. */
    if (threads > 1 && !g->wfold && width > g->Og && g->Og * (int64_t)sizeof(float) < 2048) g->bw_swap = 1;
    /* Unswapped, A = dy^T could be read from dy's rows in place (lda O) but for the last partial
     * tile, though at stride O floats each k is another line. Measured it paid only for 1x1
     * (A not reused over taps) with rows of 256 B and x read in place too (see bw_range's pack):
     * res2a_1x1 at 2 threads 1.0 -> 0.75 ms, at 1 thread the same; with C = 256 (res2b_reduce)
     * 5-10% slower at 1 thread. The products and sums are those of the packed tiles. */
    g->bw_dy_rows = !g->bw_swap && g->KS == 1 && c->O * (int64_t)sizeof(float) <= 256 && c->C < 256 ? g->Og / MR : 0;
    /* W-folded swapped rows of 7 taps x 3 channels (the RGB stem) fill 6-row tiles to 21 of 24. */
    const nconv_f32_gemm_ib_np_fn ib7 = nconv__kernels()->gemm_ib7_np;
    g->bw_mr = ib7 && g->wfold && g->bw_swap && nconv__div_up(width, 7) * 7 < nconv__div_up(width, MR) * MR ? 7 : MR;
    /* Small weights (1x1 and input layers) have few units to share out, and every thread
     * would stream all of x and dy: threads take chunks of the pixels instead, each with
     * its own sums (at most 4 MiB in all), added in chunk order afterwards. Chunks depend
     * on the problem alone, so the sums do not depend on the thread count. */
    const int64_t dwf = c->G * g->KS * g->Og * g->Cg, M = c->N * g->OS;
    g->bw_chunks = 1;
    if (dwf <= (64 << 10)) {
        g->bw_chunks = M / (2 * g->bw_kc);
        const int64_t cap = (4 << 20) / ((int64_t)sizeof(float) * (dwf > 0 ? dwf : 1));
        if (g->bw_chunks > cap) g->bw_chunks = cap;
        if (g->bw_chunks > 64) g->bw_chunks = 64;
        if (g->bw_chunks < 1) g->bw_chunks = 1;
    }
}

/* One GEMM of the row form: a group of fwd, or a (group, residue class) of bwd_d. */
typedef struct job {
    int64_t g;
    int64_t rows;
    int64_t ks;           /* taps in this job */
    int64_t taps[3][MAX_TAPS];  /* bwd_d: kernel index per dim of each tap in the class */
    int64_t ntap[3];      /* bwd_d: taps per dim in the class */
    int64_t start[3];     /* bwd_d: first input coordinate of the class per dim */
    int64_t cnt[3];       /* bwd_d: input coordinates of the class per dim */
    const float *w;       /* packed [panel][channel block][tap][channel][NR] */
    int64_t units;        /* row blocks x panel groups (see row_ctx) */
} job;

/* Floats from one packed bwd_w row tile to the next ([KC][MR] each). Tiles
 * KC * MR floats apart were 6 or 12 KiB apart, so the packing's current line
 * of every tile fell into the same one or two L1 sets and each store missed;
 * a line more spreads them. */
static int64_t bw_tile_stride(const geo *g) { return g->bw_kc * MR + 16; }

typedef struct ws_sizes {
    size_t x, y, w, packed, lanes, init, zero, jobs, shares, cols, scratch; /* scratch: per thread */
} ws_sizes;

/* x and y: their channels-last copies where `copies` has them, and x's W-padded copy (wfold: before
 * the NHWC input, with MR floats bw_task may read past it; dcols: after dx's copy). */
static size_t sizes(const nconv_core *c, nconv_direction dir, int threads, unsigned copies, ws_sizes *s) {
    geo g;
    geometry(c, dir, threads, &g);
    s->x = copies & NCONV_COPY_X ? sizeof(float) * (size_t)(c->N * g.IS * c->C) : 0;
    if (g.wfold || g.dcols) s->x += sizeof(float) * (size_t)(c->N * c->in[0] * c->in[1] * g.iw_pad * c->C + MR);
    s->cols = s->lanes = 0;
    s->y = copies & NCONV_COPY_Y ? sizeof(float) * (size_t)(c->N * g.OS * c->O) : 0;
    s->w = sizeof(int64_t) * (size_t)g.KS; /* tap offsets of the weight view */
    if (dir == NCONV_DIR_BWD_W) {
        s->packed = sizeof(float) * (size_t)(c->G * g.KS * g.Og * g.Cg * g.bw_chunks); /* dw sums per chunk, see bw_ctx */
        s->lanes = sizeof(double) * (size_t)(4 * c->O * (g.bw_chunks - 1)); /* db lanes of chunks 1.. */
        s->init = s->jobs = 0;
        const int64_t rows = g.bw_swap ? (g.wfold ? c->k[2] * g.Cg : g.Cg) : g.Og; /* see bw_task */
        s->scratch = sizeof(float) * (size_t)(nconv__div_up(rows, MR) * bw_tile_stride(&g)) +
                     (3 * sizeof(float *) + 4 * sizeof(int64_t)) * (size_t)g.bw_kc +
                     /* packed B panels, see bw_range */
                     sizeof(float) * (size_t)((g.bw_swap ? g.panels : 2) * NR * g.bw_kc);
    } else {
        s->packed = sizeof(float) * (size_t)(c->G * g.panels * g.ks_rows * g.kc * NR);
        s->init = sizeof(float) * (size_t)(c->G * g.panels * NR);
        s->jobs = sizeof(job) * (size_t)(dir == NCONV_DIR_FWD ? c->G : c->G * c->s[0] * c->s[1] * c->s[2]);
        s->scratch = sizeof(float *) * (size_t)(g.mc_tiles * MR * (2 * g.KS + 1) + g.KS) +
                     (g.pack_a ? sizeof(float) * (size_t)(g.mc_tiles * MR * g.KS * (g.kchunk + PACK_PAD)) : 0);
    }
    if (g.dcols) { /* column blocks, and weights packed for them (as B panels, or as A tiles for NCHW dy) */
        s->cols = sizeof(float) * (size_t)(g.col_rows * g.KS * g.Cg);
        const int64_t q = g.KS * g.Cg, wb = nconv__div_up(q, NR) * NR, wa = nconv__div_up(q, MR) * MR;
        const size_t wq = sizeof(float) * (size_t)((wb > wa ? wb : wa) * g.Og);
        if (wq > s->packed) s->packed = wq;
        const size_t rows = sizeof(float *) * (size_t)g.Og; /* NCHW dy: a plane row pointer per output channel */
        if (rows > s->scratch) s->scratch = rows;
    }
    s->zero = sizeof(float) * (size_t)(g.kc + c->k[2] * g.Cg + NR);
    s->shares = sizeof(nconv_share) * (size_t)threads; /* fwd, bwd_d: units of the row GEMM; bwd_w: pixel chunks */
    return nconv__ws_round(s->x) + nconv__ws_round(s->y) + nconv__ws_round(s->w) + nconv__ws_round(s->packed) +
           nconv__ws_round(s->lanes) + nconv__ws_round(s->init) + nconv__ws_round(s->zero) + nconv__ws_round(s->jobs) +
           nconv__ws_round(s->shares) + nconv__ws_round(s->cols) + (size_t)threads * nconv__ws_round(s->scratch);
}

static size_t igemm_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    ws_sizes s;
    size_t own = sizes(c, dir, threads, copies, &s);
    if (nconv__planes_shape(c, dir)) {
        const size_t planes = nconv__planes_workspace(c, dir, threads);
        if (planes > own) own = planes;
    }
    return own;
}

/* --------------------------------------------------- row GEMM (fwd, bwd_d) */

typedef struct row_ctx {
    const nconv_core *c;
    nconv_direction dir;
    geo g;
    const nconv_kernels *k;
    const float *src;  /* x (fwd) or dy (bwd_d), NHWC */
    float *dst;        /* y (fwd) or dx (bwd_d), NHWC */
    const float *init; /* [G][panels][NR] */
    const float *zero;
    int flags;         /* NCONV_IGEMM_RELU, NCONV_IGEMM_STREAM: for the last reduction block's stores */
    float *planes;     /* NCHW f32 output written in place (dst unused), see igemm_run */
    int64_t pimg, pch, S; /* its image and channel strides, pixels per image */
    job *jobs;
    int64_t njobs, total_cost; /* sum of unit_cost over every unit */
    nconv_share *shares;       /* per thread: its units (first_unit), claimed by nconv__share_claim */
    int64_t pgroups;           /* a unit of work: a row block, and one of pgroups ranges of its column panels */
    char *scratch;
    size_t scratch_stride;
    /* Panel-major (weights of megabytes, few rows): a unit is a range of column panels over
     * every row block; it packs those panels itself (w and finite below; w NULL: they are
     * packed already) and uses them at once. */
    int panel_major;
    const struct wsrc *w;
    int *finite; /* per thread: every weight it packed was finite */
} row_ctx;

/* Output pixel coordinates of a fwd row, advanced row by row (no division). */
typedef struct pixel {
    int64_t n, o[3];
} pixel;

static void pixel_of(const nconv_core *c, int64_t os, int64_t i, pixel *px) {
    const int64_t p = i % os;
    px->n = i / os;
    px->o[2] = p % c->out[2], px->o[1] = (p / c->out[2]) % c->out[1], px->o[0] = p / (c->out[1] * c->out[2]);
}

static void pixel_next(const nconv_core *c, pixel *px) {
    if (++px->o[2] < c->out[2]) return;
    px->o[2] = 0;
    if (++px->o[1] < c->out[1]) return;
    px->o[1] = 0;
    if (++px->o[0] < c->out[0]) return;
    px->o[0] = 0;
    px->n++;
}

/* Input row starts of output row (n, o0, o1), one per (k0, k1): in the
 * W-padded copy when folded, else in x at the group's first channel; NULL
 * for a row of padding. The same for every pixel of the output row. */
static void fwd_row_bases(const row_ctx *rc, const job *j, const pixel *px, const float **rb) {
    const nconv_core *c = rc->c;
    const float *img = rc->g.wfold ? rc->src + (j->g * c->N + px->n) * c->in[0] * c->in[1] * rc->g.iw_pad * rc->g.Cg
                                   : rc->src + px->n * rc->g.IS * c->C + j->g * rc->g.Cg;
    const int64_t row_len = rc->g.wfold ? rc->g.iw_pad * rc->g.Cg : c->in[2] * c->C;
    for (int64_t k0 = 0, t = 0; k0 < c->k[0]; k0++) {
        const int64_t i0 = nconv__map_index(px->o[0] * c->s[0] - c->pb[0] + k0 * c->d[0], c->in[0], c->mode);
        for (int64_t k1 = 0; k1 < c->k[1]; k1++, t++) {
            const int64_t i1 = nconv__map_index(px->o[1] * c->s[1] - c->pb[1] + k1 * c->d[1], c->in[1], c->mode);
            rb[t] = i0 < 0 || i1 < 0 ? NULL : img + (i0 * c->in[1] + i1) * row_len;
        }
    }
}

/* A pointers (a[t * MR + r]) and C pointer for fwd row i (pixel px) of job j, from its row starts rb. */
static void fwd_row(const row_ctx *rc, const job *j, int64_t i, const pixel *px, const float *const *rb, const float **a,
                    float **crow) {
    const nconv_core *c = rc->c;
    const int64_t K01 = c->k[0] * c->k[1];
    if (rc->g.wfold) { /* one run of KW * Cg floats per (kd, kh) in the W-padded copy */
        const int64_t off = px->o[2] * c->s[2] * rc->g.Cg;
        for (int64_t t = 0; t < K01; t++) a[t * MR] = rb[t] ? rb[t] + off : rc->zero;
    } else {
        for (int64_t r = 0, t = 0; r < K01; r++)
            for (int64_t k2 = 0; k2 < c->k[2]; k2++, t++) {
                const int64_t i2 = nconv__map_index(px->o[2] * c->s[2] - c->pb[2] + k2 * c->d[2], c->in[2], c->mode);
                a[t * MR] = !rb[r] || i2 < 0 ? rc->zero : rb[r] + i2 * c->C;
            }
    }
    *crow = rc->dst + i * c->O + j->g * rc->g.Og;
}

/* For the input row (n, i0, i1) of bwd_d row i of job j (a residue class):
 * the dy row start of each (a0, a1) tap pair (NULL: outside dy), and the
 * row's start in dx. The same for every pixel of the row. */
static float *bwd_d_row_bases(const row_ctx *rc, const job *j, int64_t i, const float **rb) {
    const nconv_core *c = rc->c;
    const int64_t per_n = j->cnt[0] * j->cnt[1] * j->cnt[2];
    const int64_t n = i / per_n, q = i % per_n;
    const int64_t ip0 = j->start[0] + (q / (j->cnt[1] * j->cnt[2])) * c->s[0];
    const int64_t ip1 = j->start[1] + ((q / j->cnt[2]) % j->cnt[1]) * c->s[1];
    const float *base = rc->src + n * rc->g.OS * c->O + j->g * rc->g.Og;
    for (int64_t a0 = 0, r = 0; a0 < j->ntap[0]; a0++) {
        const int64_t n0 = ip0 + c->pb[0] - j->taps[0][a0] * c->d[0], o0 = n0 / c->s[0];
        for (int64_t a1 = 0; a1 < j->ntap[1]; a1++, r++) {
            const int64_t n1 = ip1 + c->pb[1] - j->taps[1][a1] * c->d[1], o1 = n1 / c->s[1];
            const int in = n0 >= 0 && o0 < c->out[0] && n1 >= 0 && o1 < c->out[1];
            rb[r] = in ? base + (o0 * c->out[1] + o1) * c->out[2] * c->O : NULL;
        }
    }
    return rc->dst + (n * rc->g.IS + (ip0 * c->in[1] + ip1) * c->in[2]) * c->C + j->g * rc->g.Cg;
}

/* A pointers and C pointer of bwd_d row i from its row's bases (rb, dx row start rowdst). */
static void bwd_d_row(const row_ctx *rc, const job *j, int64_t i, const float *const *rb, float *rowdst,
                      const float **a, float **crow) {
    const nconv_core *c = rc->c;
    const int64_t ip2 = j->start[2] + (i % j->cnt[2]) * c->s[2];
    for (int64_t r = 0, t = 0; r < j->ntap[0] * j->ntap[1]; r++)
        for (int64_t a2 = 0; a2 < j->ntap[2]; a2++, t++) {
            const int64_t n2 = ip2 + c->pb[2] - j->taps[2][a2] * c->d[2], o2 = n2 / c->s[2];
            a[t * MR] = rb[r] && n2 >= 0 && o2 < c->out[2] ? rb[r] + o2 * c->O : rc->zero;
        }
    *crow = rowdst + ip2 * c->C;
}

/* The rows of a 1x1 tile into L1, ahead of its kernel call (see geo.prefetch_a). */
static void prefetch_tile(const float *const *a, int64_t a_off, int64_t kcc) {
    for (int64_t r = 0; r < MR; r++)
        for (int64_t i = 0; i < kcc; i += 16) __builtin_prefetch(a[r] + a_off + i);
}

/* Unit u of job j: up to mc_tiles row tiles of one cache block, one range of column panels. */
static void row_block(const row_ctx *rc, const job *j, int64_t u, const float **a, float **crow, const float **pa,
                      const float **rb, float *pbuf) {
    const geo *g = &rc->g;
    const int64_t b = u / rc->pgroups, pg = u % rc->pgroups;
    const int64_t p0 = pg * g->panels / rc->pgroups, p1 = (pg + 1) * g->panels / rc->pgroups;
    const int64_t r0 = b * g->mc_tiles * MR;
    const int64_t r1 = r0 + g->mc_tiles * MR < j->rows ? r0 + g->mc_tiles * MR : j->rows;
    const int64_t ntiles = nconv__div_up(r1 - r0, MR);
    pixel px = {0, {0, 0, 0}};
    if (rc->dir == NCONV_DIR_FWD) pixel_of(rc->c, g->OS, r0, &px);
    float *rowdst = NULL; /* bwd_d: the dx row start of the current input row */
    if (g->pointwise) { /* row i of A and of C is pixel i: ks is 1, a[i - r0] is row i's pointer */
        const int64_t lda = rc->dir == NCONV_DIR_FWD ? rc->c->C : rc->c->O;
        const int64_t ldc = rc->dir == NCONV_DIR_FWD ? rc->c->O : rc->c->C;
        const float *src = rc->src + j->g * g->kc;
        float *dst = rc->dst + j->g * g->rows_cols;
        for (int64_t i = r0; i < r1; i++) a[i - r0] = src + i * lda, crow[i - r0] = dst + i * ldc;
    }
    for (int64_t i = r0; i < r1 && !g->pointwise; i++) {
        const int64_t tile = (i - r0) / MR, r = (i - r0) % MR;
        const float **at = a + tile * j->ks * MR + r;
        if (rc->dir == NCONV_DIR_FWD) {
            if (i == r0 || px.o[2] == 0) fwd_row_bases(rc, j, &px, rb);
            fwd_row(rc, j, i, &px, rb, at, &crow[i - r0]);
            pixel_next(rc->c, &px);
        } else {
            if (i == r0 || i % j->cnt[2] == 0) rowdst = bwd_d_row_bases(rc, j, i, rb);
            bwd_d_row(rc, j, i, rb, rowdst, at, &crow[i - r0]);
        }
    }
    /* Rows past the end of the last tile repeat its first row (read, never written). */
    for (int64_t i = r1; i < r0 + ntiles * MR; i++) {
        const int64_t tile = (i - r0) / MR, r = (i - r0) % MR;
        for (int64_t t = 0; t < j->ks; t++) a[(tile * j->ks + t) * MR + r] = a[(tile * j->ks + t) * MR];
    }
    /* Reduction blocks outermost: their A rows stay in cache over the panels. */
    for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
        const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
        const int first = k0 == 0, last = k0 + kcc == g->kc;
        const float *const *ap = a;
        int64_t a_off = k0;
        if (g->pack_a) { /* pa[tile][t][r] -> row of pbuf holding A(t, r)[k0, k0 + kcc) */
            const int64_t n = ntiles * j->ks * MR, ld = kcc + PACK_PAD;
            for (int64_t i = 0; i < n; i++) {
                float *dst = pbuf + i * ld;
                if (a[i] == rc->zero) memset(dst, 0, sizeof(float) * (size_t)kcc);
                else memcpy(dst, a[i] + k0, sizeof(float) * (size_t)kcc);
                pa[i] = dst;
            }
            ap = pa, a_off = 0;
        }
        /* A tile that fits in L1 stays there while every panel of w streams
         * past it from L2 (1x1 and thin problems); otherwise one panel of w
         * stays while the tiles stream. So do up to 4 panels longer than
         * L1 holds (a few panels re-read the tiles little; more re-read them
         * more than keeping w costs). */
        const int64_t wbytes = (int64_t)sizeof(float) * (p1 - p0) * j->ks * kcc * NR;
        const int tile_outer = (int64_t)sizeof(float) * j->ks * kcc * MR <= (16 << 10) &&
                               !(p1 - p0 <= 4 && wbytes > (32 << 10));
        const int prefetch = g->prefetch_a && tile_outer && j->ks == 1; /* each tile once per block */
        if (!rc->planes) {
            /* A kernel call runs all of a tile's panels, or two while the tiles
             * stream (the AVX-512 kernels share each load of A between two). */
            const int64_t pstep = tile_outer ? p1 - p0 : 2;
            for (int64_t q0 = p0; q0 < p1; q0 += pstep) {
                const int64_t q1 = p1 - q0 < pstep ? p1 : q0 + pstep;
                const int64_t nc_last = g->rows_cols - (q1 - 1) * NR < NR ? g->rows_cols - (q1 - 1) * NR : NR;
                for (int64_t tile = 0; tile < ntiles; tile++) {
                    const int64_t mr = r1 - (r0 + tile * MR) < MR ? r1 - (r0 + tile * MR) : MR;
                    if (prefetch && tile + 1 < ntiles) prefetch_tile(ap + (tile + 1) * MR, a_off, kcc);
                    float *cp[MR];
                    for (int64_t r = 0; r < MR; r++) cp[r] = crow[tile * MR + (r < mr ? r : 0)] + q0 * NR;
                    rc->k->igemm_np(mr, q1 - q0, nc_last, kcc, j->ks, ap + tile * j->ks * MR, a_off, rc->zero,
                                    j->w + (q0 * j->ks * g->kc + j->ks * k0) * NR, j->ks * g->kc * NR, cp,
                                    first ? rc->init + (j->g * g->panels + q0) * NR : NULL, last ? rc->flags : 0);
                }
            }
            continue;
        }
        /* NCHW output in place: one reduction block, so init is set and this is the last.
         * Panels in the same steps as above. */
        const int64_t pstep = tile_outer ? p1 - p0 : 2;
        for (int64_t q0 = p0; q0 < p1; q0 += pstep) {
            const int64_t q1 = p1 - q0 < pstep ? p1 : q0 + pstep;
            const int64_t nc_last = g->rows_cols - (q1 - 1) * NR < NR ? g->rows_cols - (q1 - 1) * NR : NR;
            const float *wq = j->w + q0 * j->ks * g->kc * NR, *init = rc->init + (j->g * g->panels + q0) * NR;
            for (int64_t tile = 0; tile < ntiles; tile++) {
                const int64_t mr = r1 - (r0 + tile * MR) < MR ? r1 - (r0 + tile * MR) : MR;
                const int64_t i0 = r0 + tile * MR, ch0 = j->g * g->rows_cols + q0 * NR;
                if (prefetch && tile + 1 < ntiles) prefetch_tile(ap + (tile + 1) * MR, a_off, kcc);
                const float *const *at = ap + tile * j->ks * MR;
                if (mr == MR && i0 % rc->S + MR <= rc->S) {
                    float *base = rc->planes + (i0 / rc->S) * rc->pimg + ch0 * rc->pch + i0 % rc->S;
                    rc->k->igemm_planes(q1 - q0, nc_last, kcc, j->ks, at, a_off, rc->zero, wq, j->ks * g->kc * NR, base,
                                        rc->pch, init, rc->flags);
                    continue;
                }
                /* A tile across images, or the last: through a small buffer, a panel at a time. */
                for (int64_t q = q0; q < q1; q++) {
                    const int64_t nc = q + 1 < q1 ? NR : nc_last;
                    float tbuf[MR][NR], *tp[MR];
                    for (int64_t r = 0; r < MR; r++) tp[r] = tbuf[r];
                    rc->k->igemm(mr, nc, kcc, j->ks, at, a_off, rc->zero, wq + (q - q0) * j->ks * g->kc * NR, tp,
                                 init + (q - q0) * NR, rc->flags);
                    for (int64_t r = 0; r < mr; r++) {
                        float *d = rc->planes + ((i0 + r) / rc->S) * rc->pimg + (ch0 + (q - q0) * NR) * rc->pch +
                                   (i0 + r) % rc->S;
                        for (int64_t jj = 0; jj < nc; jj++) d[jj * rc->pch] = tbuf[r][jj];
                    }
                }
            }
        }
    }
}

/* The work of a row and column panel: a reduction of ks * kc, and the store, counted as 16. */
static int64_t row_cost(const job *j, const geo *g) { return j->ks * g->kc + 16; }

/* Row blocks (of mc_tiles tiles) of job j. */
static int64_t row_blocks(const job *j, const geo *g) { return nconv__div_up(nconv__div_up(j->rows, MR), g->mc_tiles); }

/* The work of job j: every row and column panel (the sum of its units' unit_cost). */
static int64_t job_cost(const job *j, const geo *g) { return j->rows * g->panels * row_cost(j, g); }

/* The work of unit u of job j: its rows (the last block of a job may be
 * short) times its column panels. */
static int64_t unit_cost(const row_ctx *rc, const job *j, int64_t u) {
    const int64_t b = u / rc->pgroups, pg = u % rc->pgroups, r0 = b * rc->g.mc_tiles * MR;
    const int64_t rows = rc->panel_major ? j->rows : j->rows - r0 < rc->g.mc_tiles * MR ? j->rows - r0 : rc->g.mc_tiles * MR;
    const int64_t panels = (pg + 1) * rc->g.panels / rc->pgroups - pg * rc->g.panels / rc->pgroups;
    return rows * panels * row_cost(j, &rc->g);
}

/* The first global unit of thread tid: units are shared out by their work
 * (bwd_d's residue classes differ: 4, 2, 2 and 1 taps for a 3x3 kernel at
 * stride 2, none for three of the four of a 1x1 at stride 2; a job's last
 * row block may be short: by count, 2 threads took 40 and 26 tiles of a
 * 7 x 7 layer), not by count; a unit goes to the thread whose share holds
 * its middle. Each unit is computed whole by one thread. */
static int64_t first_unit(const row_ctx *rc, int tid, int nthreads) {
    const int64_t total = rc->total_cost;
    const int64_t target = total / nthreads * tid + total % nthreads * tid / nthreads;
    int64_t u = 0, cost = 0;
    for (int64_t j = 0; j < rc->njobs; j++) {
        const job *jb = &rc->jobs[j];
        const int64_t whole = job_cost(jb, &rc->g);
        if (cost + whole < target) {
            cost += whole, u += jb->units;
            continue;
        }
        for (int64_t v = 0; v < jb->units; v++) { /* v goes to the thread that holds most of it */
            const int64_t cv = unit_cost(rc, jb, v);
            if (2 * cost + cv >= 2 * target) return u + v;
            cost += cv;
        }
        return u + jb->units;
    }
    return u;
}

static int pack_panels(const nconv_core *c, const geo *g, nconv_direction dir, const struct wsrc *w, const job *j,
                       int64_t p0, int64_t p1);

static void row_task(void *arg, int tid, int nthreads) {
    const row_ctx *rc = arg;
    char *scratch = rc->scratch + (size_t)tid * rc->scratch_stride;
    float **crow = (float **)scratch;
    const float **a = (const float **)(crow + rc->g.mc_tiles * MR);
    const float **pa = a + rc->g.mc_tiles * MR * rc->g.KS;
    const float **rb = pa + rc->g.mc_tiles * MR * rc->g.KS; /* row starts per (k0, k1) tap pair */
    float *pbuf = (float *)(rb + rc->g.KS);
    int64_t jb = 0, first = 0; /* the job of the last unit, and its first global unit */
    for (int64_t u; (u = nconv__share_claim(rc->shares, tid, nthreads)) >= 0;) {
        if (u < first) jb = first = 0; /* a unit stolen from an earlier share */
        while (first + rc->jobs[jb].units <= u) first += rc->jobs[jb++].units;
        const job *j = &rc->jobs[jb];
        if (!rc->panel_major) {
            row_block(rc, j, u - first, a, crow, pa, rb, pbuf);
            continue;
        }
        const int64_t pg = u - first, p0 = pg * rc->g.panels / rc->pgroups, p1 = (pg + 1) * rc->g.panels / rc->pgroups;
        if (rc->w) rc->finite[tid] &= pack_panels(rc->c, &rc->g, rc->dir, rc->w, j, p0, p1);
        for (int64_t b = 0; b < row_blocks(j, &rc->g); b++)
            row_block(rc, j, b * rc->pgroups + pg, a, crow, pa, rb, pbuf);
    }
#if defined(__x86_64__) || defined(__i386__)
    if (rc->flags & NCONV_IGEMM_STREAM) _mm_sfence(); /* the non-temporal stores land before the region ends */
#endif
}

/* The weights as the caller laid them out: w[o][ci][t] through the view's
 * strides, with toff[t] the offset of tap t. */
typedef struct wsrc {
    const nconv_view *v;
    const int64_t *toff;
} wsrc;

static inline float wload(const wsrc *w, int64_t o, int64_t ci, int64_t t) {
    const int64_t off = o * w->v->stride[0] + ci * w->v->stride[1] + w->toff[t];
    return w->v->dt == NCONV_F32 ? ((const float *)w->v->data)[off] : (float)nconv__load(w->v->data, w->v->dt, off);
}

/* The kernel tap (index into the weights' taps) of bwd_d job j's tap row tr. */
static int64_t class_tap(const nconv_core *c, const job *j, int64_t tr) {
    const int64_t a2 = tr % j->ntap[2], a1 = tr / j->ntap[2] % j->ntap[1], a0 = tr / (j->ntap[2] * j->ntap[1]);
    return (j->taps[0][a0] * c->k[1] + j->taps[1][a1]) * c->k[2] + j->taps[2][a2];
}

/* Packs column panel p of job j: [channel block][tap][k][NR].
 * fwd: columns o = p * NR + jj; k runs over the channels, or over (kw, c)
 * when W-folded. bwd_d: columns c = p * NR + jj; taps are the job's residue
 * class; k runs over the output channels. Weights of deep layers are
 * megabytes, as much work to pack as the GEMM of a 7x7 image does with
 * them: each (tap, k) row is a strided run of at most NR loads, with every
 * index computed outside it. Returns whether every value packed is finite. */
static int pack_panel(const nconv_core *c, const geo *g, nconv_direction dir, const wsrc *w, const job *j, int64_t p,
                      float *packed) {
    packed += p * j->ks * g->kc * NR;
    const nconv_view *v = w->v;
    const float *wf = v->dt == NCONV_F32 ? (const float *)v->data : NULL;
    const int fwd = dir == NCONV_DIR_FWD;
    const int64_t ncols = fwd ? g->Og : g->Cg;
    const int64_t nc = ncols - p * NR < NR ? ncols - p * NR : NR;
    /* Offset of column p * NR + jj is col0 + jj * cstride. */
    const int64_t cstride = fwd ? v->stride[0] : v->stride[1];
    const int64_t col0 = fwd ? (j->g * g->Og + p * NR) * v->stride[0] : j->g * g->Og * v->stride[0] + p * NR * v->stride[1];
    if (fwd && wf && !g->wfold && v->stride[1] == 1) {
        /* Channels contiguous (1x1, or channels-last weights): per tap and
         * channel block, a [nc][kcc] -> [kcc][NR] transpose. */
        const nconv_f32_transpose_fn transpose = nconv__kernels()->transpose;
        for (int64_t tr = 0; tr < j->ks; tr++)
            for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
                const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
                float *dst = packed + (k0 * j->ks + tr * kcc) * NR;
                transpose(nc, kcc, wf + col0 + k0 + w->toff[tr], cstride, dst, NR);
                if (nc < NR)
                    for (int64_t k = 0; k < kcc; k++) memset(dst + k * NR + nc, 0, sizeof(float) * (size_t)(NR - nc));
            }
        return 1;
    }
    if (fwd && wf && !g->wfold && c->k[2] > 1 && v->stride[1] > v->stride[4]) {
        /* Taps innermost (OIHW): per channel, the panel's 16 runs of taps are
         * read (16 streams in order) and each tap's 16 columns written as one
         * cache line. */
        for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
            const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
            for (int64_t k = k0; k < k0 + kcc; k++) {
                const float *src = wf + col0 + k * v->stride[1];
                for (int64_t tr = 0; tr < j->ks; tr++) {
                    float *dst = packed + (k0 * j->ks + tr * kcc + k - k0) * NR;
                    for (int64_t jj = 0; jj < nc; jj++) dst[jj] = src[jj * cstride + w->toff[tr]];
                    for (int64_t jj = nc; jj < NR; jj++) dst[jj] = 0.0f;
                }
            }
        }
        return 1;
    }
    int finite = 1;
    /* tap rows: fwd, the taps (or (kd, kh) when W-folded); bwd_d, the class's taps */
    for (int64_t tr = 0; tr < j->ks; tr++) {
        const int64_t t = fwd ? (g->wfold ? tr * c->k[2] : tr) : class_tap(c, j, tr);
        for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
            const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
            float *dst = packed + (k0 * j->ks + tr * kcc) * NR;
            for (int64_t k = k0; k < k0 + kcc; k++, dst += NR) {
                int64_t off = col0;
                if (fwd) off += (g->wfold ? k % g->Cg : k) * v->stride[1] + w->toff[g->wfold ? t + k / g->Cg : t];
                else off += k * v->stride[0] + w->toff[t];
                if (wf) {
                    for (int64_t jj = 0; jj < nc; jj++) {
                        const float x = wf[off + jj * cstride];
                        finite &= isfinite(x) != 0;
                        dst[jj] = x;
                    }
                } else {
                    for (int64_t jj = 0; jj < nc; jj++) {
                        const float x = (float)nconv__load(v->data, v->dt, off + jj * cstride);
                        finite &= isfinite(x) != 0;
                        dst[jj] = x;
                    }
                }
                for (int64_t jj = nc; jj < NR; jj++) dst[jj] = 0.0f;
            }
        }
    }
    return finite;
}

typedef struct pack_ctx {
    const nconv_core *c;
    const geo *g;
    nconv_direction dir;
    const wsrc *w;
    const job *jobs;
    int64_t njobs;
    int *finite; /* per thread: every value it packed was finite */
} pack_ctx;

/* Panels [p0, p1) of bwd_d job j, in pack_panel's layout, for f32 weights:
 * KROWS rows of w (output channels) are walked along their length, panel
 * after panel, with all of a row's taps at once. Panel by panel and tap by
 * tap, each run of 16 loads would start in another row of w, kilobytes
 * apart (often a page apart): no prefetcher follows that, and deep layers'
 * megabytes of weights came at memory latency (14% of res5b_reduce bwd_d).
 * Returns whether every value packed is finite. */
static int pack_bwd_d_rows(const nconv_core *c, const geo *g, const wsrc *w, const job *j, int64_t p0, int64_t p1) {
    enum { KROWS = 16, TCHUNK = 64 };
    const nconv_view *v = w->v;
    const int64_t cs = v->stride[1];
    /* Channels-last weights (OHWI) give each (row, tap) its own line, 2 KiB apart for 512
     * channels: no hardware prefetcher follows that across pages, and weights of megabytes
     * come from L3 or memory. The next block of rows is fetched while this one is copied
     * (OIHW rows read runs of taps, which the prefetchers follow). */
    const int64_t ahead = cs == 1 && g->Og * g->KS * g->Cg >= (512 << 10) ? KROWS : 0;
    const float *wf = (const float *)v->data + j->g * g->Og * v->stride[0];
    float *const packed = (float *)j->w;
    int finite = 1;
    for (int64_t t0 = 0; t0 < j->ks; t0 += TCHUNK) {
        const int64_t nt = j->ks - t0 < TCHUNK ? j->ks - t0 : TCHUNK;
        int64_t toff[TCHUNK]; /* offsets of the class's taps t0 .. t0 + nt */
        for (int64_t t = 0; t < nt; t++) toff[t] = w->toff[class_tap(c, j, t0 + t)];
        for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
            const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
            for (int64_t kb = k0; kb < k0 + kcc; kb += KROWS) {
                const int64_t ke = kb + KROWS < k0 + kcc ? kb + KROWS : k0 + kcc;
                for (int64_t p = p0; p < p1; p++) {
                    const int64_t nc = g->Cg - p * NR < NR ? g->Cg - p * NR : NR;
                    float *const pp = packed + p * j->ks * g->kc * NR + k0 * j->ks * NR;
                    for (int64_t k = kb; k < ke; k++)
                        for (int64_t t = 0; t < nt; t++) {
                            float *dst = pp + ((t0 + t) * kcc + k - k0) * NR;
                            const float *src = wf + k * v->stride[0] + toff[t] + p * NR * cs;
                            if (ahead && k + ahead < g->Og) __builtin_prefetch(src + ahead * v->stride[0]);
                            for (int64_t jj = 0; jj < nc; jj++) {
                                finite &= isfinite(src[jj * cs]) != 0;
                                dst[jj] = src[jj * cs];
                            }
                            for (int64_t jj = nc; jj < NR; jj++) dst[jj] = 0.0f;
                        }
                }
            }
        }
    }
    return finite;
}

/* Panels [p0, p1) of job j; returns whether every value packed is finite. */
static int pack_panels(const nconv_core *c, const geo *g, nconv_direction dir, const wsrc *w, const job *j, int64_t p0,
                       int64_t p1) {
    if (dir == NCONV_DIR_BWD_D && w->v->dt == NCONV_F32) return pack_bwd_d_rows(c, g, w, j, p0, p1);
    int finite = 1;
    for (int64_t p = p0; p < p1; p++) finite &= pack_panel(c, g, dir, w, j, p, (float *)j->w);
    return finite;
}

/* Threads split the (job, panel) pairs: packing is O(weights) but serial it
 * would cap the speedup of the GEMMs that follow. */
static void pack_task(void *arg, int tid, int nthreads) {
    const pack_ctx *pc = arg;
    const int64_t panels = pc->g->panels;
    int64_t u0, u1;
    nconv__split(pc->njobs * panels, tid, nthreads, &u0, &u1);
    int finite = 1;
    for (int64_t u = u0; u < u1;) {
        const job *j = &pc->jobs[u / panels];
        const int64_t p0 = u % panels, p1 = p0 + (u1 - u) < panels ? p0 + (u1 - u) : panels;
        finite &= pack_panels(pc->c, pc->g, pc->dir, pc->w, j, p0, p1);
        u += p1 - p0;
    }
    pc->finite[tid] = finite;
}

/* For bwd_d one job per (group, residue class): its taps, and where its
 * packed weights go ([panel][channel block][tap][o][NR]). Returns the number
 * of jobs (at most G * prod(stride)). */
static int64_t make_bwd_d_jobs(const nconv_core *c, const geo *g, float *packed, job *jobs) {
    int64_t n = 0;
    const int64_t classes = c->s[0] * c->s[1] * c->s[2];
    for (int64_t gi = 0; gi < c->G; gi++)
        for (int64_t q = 0; q < classes; q++) {
            job *j = &jobs[n++];
            memset(j, 0, sizeof *j);
            j->g = gi;
            const int64_t qq[3] = {q / (c->s[1] * c->s[2]), (q / c->s[2]) % c->s[1], q % c->s[2]};
            for (int a = 0; a < 3; a++) {
                /* Input coordinates i with (i + pb) % s == q; taps k with (k * d) % s == q. */
                j->start[a] = ((qq[a] - c->pb[a]) % c->s[a] + c->s[a]) % c->s[a];
                j->cnt[a] = c->in[a] > j->start[a] ? nconv__div_up(c->in[a] - j->start[a], c->s[a]) : 0;
                for (int64_t k = 0; k < c->k[a]; k++)
                    if ((k * c->d[a]) % c->s[a] == qq[a]) j->taps[a][j->ntap[a]++] = k;
            }
            j->ks = j->ntap[0] * j->ntap[1] * j->ntap[2];
            j->rows = c->N * j->cnt[0] * j->cnt[1] * j->cnt[2];
            j->w = packed;
            packed += g->panels * j->ks * g->Og * NR;
        }
    return n;
}

/* The row GEMM's jobs (one per group for fwd, see make_bwd_d_jobs for bwd_d) over the
 * packed weights at packed; returns their number. */
static int64_t make_jobs(const nconv_core *c, const geo *g, nconv_direction dir, float *packed, job *jobs) {
    if (dir == NCONV_DIR_BWD_D) return make_bwd_d_jobs(c, g, packed, jobs);
    for (int64_t gi = 0; gi < c->G; gi++) {
        job *j = &jobs[gi];
        memset(j, 0, sizeof *j);
        j->g = gi, j->rows = c->N * g->OS, j->ks = g->ks_rows;
        j->w = packed + gi * g->panels * g->ks_rows * g->kc * NR;
    }
    return c->G;
}

/* Offsets of each kernel tap in the caller's weight layout (read by wload, written by bwd_w). */
static void tap_offsets(const nconv_core *c, const nconv_view *w, int64_t *toff) {
    for (int64_t t = 0; t < nconv__core_kernel_spatial(c); t++)
        toff[t] = (t / (c->k[1] * c->k[2])) * w->stride[2] + ((t / c->k[2]) % c->k[1]) * w->stride[3] +
                  (t % c->k[2]) * w->stride[4];
}

/* ------------------------------------------------------------- bwd_w */

typedef struct bw_ctx {
    const nconv_core *c;
    geo g;
    const nconv_kernels *k;
    const float *x, *dy, *zero;
    const nconv_view *dy_planes; /* with bw_swap: dy read from its NCHW planes (dy NULL), see bw_task */
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
 * [ch0, ch0 + nch): a dy block that packing has just brought to L2 (summing
 * dy apart read it from memory again: 15% of a 1x1 bwd_w). */
static void bias_lanes(const bw_ctx *bc, double *lane, int64_t p0, int64_t n, int64_t ch0, int64_t nch) {
    const int64_t O = bc->c->O, OS = bc->g.OS;
    for (int64_t p = p0; p < p0 + n;) {
        const int64_t op = p % OS, run = p0 + n - p < OS - op ? p0 + n - p : OS - op; /* within one image */
        lanes_add(bc->k, lane + ch0, O, bc->dy + p * O + ch0, O, op, run, nch);
        p += run;
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
    const int64_t ts = bw_tile_stride(g);
    float *apack = (float *)scratch;                                /* [tiles][KC][MR], ts floats apart */
    const float **xrows = (const float **)(apack + bc->tiles * ts); /* [KC] */
    const float **dyrows = xrows + KC;                              /* [KC] */
    int64_t *pix = (int64_t *)(dyrows + KC);                        /* [4][KC]: image offset, o0, o1, o2 */
    const float **brows = (const float **)(pix + 4 * KC);           /* [KC] rows of bpack */
    float *bpack = (float *)(brows + KC);                           /* [2][KC][NR], or [panels][KC][NR] */
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
        const int add = !fresh || p0 > m0;
        /* Pixels advanced one by one: five divisions each cost conv1's bwd_w about 10%.
         * Pointwise problems need none: input pixel p is output pixel p. */
        pixel px;
        if (!g->pointwise) pixel_of(c, g->OS, p0, &px);
        for (int64_t k = 0; k < kc && !g->pointwise; k++, pixel_next(c, &px)) {
            pix[k] = g->wfold ? px.n : px.n * g->IS * c->C; /* the image, or its offset */
            pix[KC + k] = px.o[0], pix[2 * KC + k] = px.o[1], pix[3 * KC + k] = px.o[2];
        }
        for (int64_t k = 0; k < kc; k++) dyrows[k] = bc->dy ? bc->dy + (p0 + k) * c->O : NULL;
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
                    /* dy streams from memory (megabytes, read once per block): the misses
                     * of its rows were 60% of this copy in res2a_1x1's bwd_w. */
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
                bias_lanes(bc, lanes, p0, kc, gi * g->Og + ch0, (ch1 < g->Og ? ch1 : g->Og) - ch0);
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
                for (int64_t k = 0; k < kc; k++) xrows[k] = bc->x + (p0 + k) * c->C + gi * g->Cg;
            } else {
                const int64_t k0 = t / (c->k[1] * c->k[2]), k1 = (t / c->k[2]) % c->k[1], k2 = t % c->k[2];
                const float *xg = bc->x + gi * g->Cg;
                for (int64_t k = 0; k < kc; k++) {
                    const int64_t i0 = nconv__map_index(pix[KC + k] * c->s[0] - c->pb[0] + k0 * c->d[0], c->in[0], c->mode);
                    const int64_t i1 = nconv__map_index(pix[2 * KC + k] * c->s[1] - c->pb[1] + k1 * c->d[1], c->in[1], c->mode);
                    const int64_t i2 = nconv__map_index(pix[3 * KC + k] * c->s[2] - c->pb[2] + k2 * c->d[2], c->in[2], c->mode);
                    xrows[k] = (i0 < 0 || i1 < 0 || i2 < 0) ? bc->zero
                                                             : xg + pix[k] + ((i0 * c->in[1] + i1) * c->in[2] + i2) * c->C;
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
                            /* Each row gives one line per panel, a miss at memory latency (this copy
                             * was 20% of res2b_reduce's bwd_w): the next pair's is fetched now. */
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
                                          cols_n, add);
                    }
                }
            } else {
                /* x^T of the run's tiles: apack[ot][k][r] = x row of pixel p0 + k at column ot * MR + r
                 * (W-folded rows need none, see below). */
                const int64_t o0 = u % bc->tiles, o1 = (run_end - 1) % bc->tiles + 1;
                const int64_t full = rows_n / MR < o1 ? rows_n / MR : o1;
                for (int64_t k = 0; k < kc && !g->wfold; k++) {
                    const float *src = xrows[k];
                    for (int64_t o = o0; o < full; o++)
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
                    const float *dyf = (const float *)v->data + gi * g->Og * v->stride[1];
                    /* db by the thread of the group's first unit (which zeroed its lanes) */
                    const int64_t first = gi * taps * bc->tiles;
                    const int db = lanes && u0 <= first && first < u1;
                    for (int64_t k = 0; k < kc;) {
                        const int64_t p = p0 + k, op = p % g->OS, run = kc - k < g->OS - op ? kc - k : g->OS - op;
                        for (int64_t j0 = 0; j0 < cols_n; j0 += NR) {
                            const int64_t nc = cols_n - j0 < NR ? cols_n - j0 : NR;
                            float *panel = bpack + (j0 / NR * KC + k) * NR;
                            bc->k->transpose(nc, run, dyf + (p / g->OS) * v->stride[0] + j0 * v->stride[1] + op,
                                             v->stride[1], panel, NR);
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
                 * calls go row by row; a row of padding (the zero row) adds nothing. Tiles read up
                 * to bw_mr - 1 <= MR floats past a run's end (the copy has MR floats of slack):
                 * rows past rows_n, never stored. */
                const int64_t lda = g->wfold ? c->s[2] * g->Cg : MR;
                const nconv_f32_gemm_ib_np_fn ib = g->bw_mr == 7 ? bc->k->gemm_ib7_np : bc->k->gemm_ib_np;
                for (int64_t k = 0; k < kc;) {
                    int64_t e = kc;
                    if (g->wfold) {
                        for (e = k + 1; e < kc && pix[3 * KC + e] != 0;) e++;
                        if (e < kc && xrows[e] != bc->zero) { /* the next row's run, while this one computes */
                            const int64_t n = (e - k < kc - e ? e - k : kc - e) * lda + rows_n;
                            for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(xrows[e] + i);
                        }
                    }
                    for (int64_t v = u; v < run_end && (!g->wfold || xrows[k] != bc->zero); v++) {
                        const int64_t ot = v % bc->tiles, r0 = ot * g->bw_mr;
                        const int64_t mr = rows_n - r0 < g->bw_mr ? rows_n - r0 : g->bw_mr;
                        ib(mr, np, nc_last, e - k, g->wfold ? xrows[k] + r0 : apack + ot * ts, lda, brow + k, boff, bs,
                           acc + (gt * rows_n + r0) * cols_n, cols_n, add);
                    }
                    k = e;
                }
                /* The block's dy rows, read in place by every unit, summed once for db while in cache
                 * after the group's first unit (a separate pass over dy took as long as this GEMM
                 * for wav2vec2's first layer; before the GEMM, the misses were this sum's). */
                if (lanes && !bc->dy_planes && t == 0 && u % bc->tiles == 0)
                    bias_lanes(bc, lanes, p0, kc, gi * g->Og, g->Og);
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
    int accumulate; /* dw += (see nconv_exec) */
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
     * (the scalar loop was a fifth of res5b_3x3's bwd_w). */
    int dense_taps = wf && !g->bw_swap && !g->wfold && g->KS > 1 && !d->accumulate;
    for (int64_t t = 0; t < g->KS && dense_taps; t++) dense_taps = d->toff[t] == t;
    for (int64_t row = r0; row < r1 && dense_taps; row++) {
        const int64_t gi = row / g->Og, o = row % g->Og;
        transpose(g->KS, g->Cg, d->acc + gi * taps * g->Og * d->width + o * d->width, g->Og * d->width,
                  wf + row * wv->stride[0], wv->stride[1]);
    }
    for (int64_t row = r0; row < r1 && !dense_taps; row++) {
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

/* ------------------------------------------- bwd_d for thin input channels */

/* col[p][t][c] = sum_o dy[p][o] * w[o][c][t] for a block of output pixels
 * (a GEMM whose KS * Cg columns fill the tiles), then each pixel's (kd, kh)
 * runs of KW * Cg are added into a W-padded dx, in pixel order (see
 * scatter_task), so the sums do not depend on the thread count. */
typedef struct cols_ctx {
    const nconv_core *c;
    const geo *g;
    const nconv_kernels *k;
    const float *dy, *wq, *zero;
    const nconv_view *dyv; /* NCHW dy planes (dy NULL): col is then transposed, see planes_cols_task */
    float *col;
    int64_t m0, rows;
    char *scratch;
    size_t scratch_stride;
} cols_ctx;

enum { COL_PANELS = 8 }; /* NCHW dy: pixels per call in panels of NR; the dy block (Og rows) stays in L2 for every q tile */

/* col^T[q][i] = sum_o w[o][q] * dy[o][m0 + i] from dy's planes: A = w^T in tiles of MR columns q
 * ([tile][o][MR]), B = plane rows in place (one pointer per o, per image). Threads take runs of
 * pixels, each element written by one call: the result does not depend on the thread count. */
static void planes_cols_task(void *arg, int tid, int nthreads) {
    const cols_ctx *cc = arg;
    const nconv_view *v = cc->dyv;
    const int64_t Q = cc->g->KS * cc->g->Cg, Og = cc->g->Og, OS = cc->g->OS, step = COL_PANELS * NR;
    const float **b = (const float **)(cc->scratch + (size_t)tid * cc->scratch_stride);
    int64_t u0, u1;
    nconv__split(nconv__div_up(cc->rows, step), tid, nthreads, &u0, &u1);
    int64_t img = -1;
    for (int64_t i = u0 * step, end = u1 * step < cc->rows ? u1 * step : cc->rows; i < end;) {
        const int64_t p = cc->m0 + i, n = p / OS, op = p % OS;
        int64_t len = end - i; /* within one unit and one image */
        if (len > step - i % step) len = step - i % step;
        if (len > OS - op) len = OS - op;
        if (n != img) {
            for (int64_t o = 0; o < Og; o++) b[o] = (const float *)v->data + n * v->stride[0] + o * v->stride[1];
            img = n;
        }
        const int64_t np = nconv__div_up(len, NR), nc_last = len - (np - 1) * NR;
        for (int64_t q0 = 0; q0 < Q; q0 += MR)
            cc->k->gemm_ib_np(Q - q0 < MR ? Q - q0 : MR, np, nc_last, Og, cc->wq + q0 * Og, MR, b, op, NR,
                              cc->col + q0 * cc->rows + i, cc->rows, 0);
        i += len;
    }
}

static void cols_task(void *arg, int tid, int nthreads) {
    const cols_ctx *cc = arg;
    const int64_t Q = cc->g->KS * cc->g->Cg, Og = cc->g->Og;
    int64_t t0, t1;
    nconv__split(nconv__div_up(cc->rows, MR), tid, nthreads, &t0, &t1);
    const float **a = (const float **)(cc->scratch + (size_t)tid * cc->scratch_stride);
    for (int64_t tile = t0; tile < t1; tile++) {
        const int64_t r0 = tile * MR, mr = cc->rows - r0 < MR ? cc->rows - r0 : MR;
        float *cp[MR];
        for (int64_t r = 0; r < MR; r++) a[r] = cc->dy + (cc->m0 + r0 + (r < mr ? r : 0)) * cc->c->O;
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

static void bwd_d_cols(const nconv_exec *e, const geo *g, const nconv_kernels *k, const float *dy, const nconv_view *dyv,
                       const wsrc *w, float *wq, float *pad, float *col, const float *zero, char *scratch,
                       size_t scratch_stride, float *dst) {
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
     * sums go there directly (the copy after was 4% of wav2vec2's first layer). */
    const int direct = c->G == 1 && c->pb[2] == 0 && g->iw_pad == c->in[2];
    if (direct) pad = dst;
    memset(pad, 0, sizeof(float) * (size_t)(c->N * c->in[0] * c->in[1] * g->iw_pad * g->Cg));
    for (int64_t m0 = 0; m0 < M; m0 += g->col_rows) {
        const int64_t rows = M - m0 < g->col_rows ? M - m0 : g->col_rows;
        cols_ctx cc = {c, g, k, dy, wq, zero, dyv, col, m0, rows, scratch, scratch_stride};
        nconv__parallel(e, dyv ? planes_cols_task : cols_task, &cc);
        scatter_ctx sc = {c, g, col, dyv ? 1 : Q, dyv ? rows : 1, pad, dst, m0, rows, 0};
        nconv__parallel(e, scatter_task, &sc);
    }
    if (direct) return;
    scatter_ctx sc = {c, g, NULL, 0, 0, pad, dst, 0, 0, 1};
    nconv__parallel(e, scatter_task, &sc);
}

/* ------------------------------------------------------------------ run */

/* The W-padded copy of the thin-channel input, rows (group, n, i0, i1) per thread. */
typedef struct wpad_ctx {
    const nconv_core *c;
    const geo *g;
    const float *x; /* NHWC */
    float *xb;
} wpad_ctx;

static void wpad_task(void *arg, int tid, int nthreads) {
    const wpad_ctx *wc = arg;
    const nconv_core *c = wc->c;
    const int64_t rows = c->N * c->in[0] * c->in[1], Cg = wc->g->Cg, iw_pad = wc->g->iw_pad, IW = c->in[2];
    /* Padded columns [lo, hi) read input columns jw - pb in order: with one group, one copy. */
    const int64_t lo = c->pb[2] < iw_pad ? c->pb[2] : iw_pad, hi = IW + c->pb[2] < iw_pad ? IW + c->pb[2] : iw_pad;
    int64_t u0, u1;
    nconv__split(c->G * rows, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t gi = u / rows, r = u % rows;
        const float *src = wc->x + r * IW * c->C + gi * Cg;
        float *dst = wc->xb + u * iw_pad * Cg;
        for (int64_t jw = 0; jw < iw_pad; jw++) {
            if (c->G == 1 && jw == lo && hi > lo) {
                memcpy(dst + lo * Cg, src + (lo - c->pb[2]) * c->C, sizeof(float) * (size_t)((hi - lo) * Cg));
                jw = hi - 1;
                continue;
            }
            const int64_t iw = nconv__map_index(jw - c->pb[2], IW, c->mode);
            for (int64_t q = 0; q < Cg; q++) dst[jw * Cg + q] = iw < 0 ? 0.0f : src[iw * c->C + q];
        }
    }
}

/* Whether every thread's flag is set (nconv__parallel runs at most NCONV_MAX_THREADS). */
static int all_set(const int *flags) {
    for (int i = 0; i < NCONV_MAX_THREADS; i++)
        if (!flags[i]) return 0;
    return 1;
}

static nconv_status igemm_run(const nconv_exec *e) {
    if (nconv__planes_applies(e)) return nconv__planes_run(e);
    const nconv_core *c = e->c;
    const nconv_direction dir = e->dir;
    const int threads = e->threads;
    geo g;
    geometry(c, dir, threads, &g);
    /* bwd_d with non-finite weights is declined (see nconv__view_all_finite); the row GEMM
     * finds out while packing the weights, which reads them all anyway. */
    if (g.dcols && !nconv__view_all_finite(e->w)) return (nconv_status)NCONV__DECLINE_W;
    /* w as igemm_pack made it: the row GEMM's panels */
    const int prepacked = e->packed && dir != NCONV_DIR_BWD_W && !g.dcols;
    ws_sizes s;
    const unsigned copies = nconv__exec_copies(e);
    sizes(c, dir, threads, copies, &s);
    float *xb = nconv__arena_take(e->ws, s.x), *yb = nconv__arena_take(e->ws, s.y);
    int64_t *toff = nconv__arena_take(e->ws, s.w);
    float *packed = prepacked ? (float *)e->packed : nconv__arena_take(e->ws, s.packed);
    double *lanes_more = nconv__arena_take(e->ws, s.lanes);
    float *init = nconv__arena_take(e->ws, s.init), *zero = nconv__arena_take(e->ws, s.zero);
    char *scratch = nconv__arena_take(e->ws, (size_t)threads * nconv__ws_round(s.scratch));
    if (!xb || !yb || !toff || !packed || !lanes_more || !init || !zero || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    memset(zero, 0, s.zero);
    const nconv_kernels *k = e->k;
    tap_offsets(c, e->w, toff);

    const float *x = NULL;
    if (g.wfold) { /* xb[g][n][i0][i1][jw][c] = x at W index jw - pb (padding mode applied), zero outside */
        const int64_t rows = c->N * c->in[0] * c->in[1];
        wpad_ctx wc = {c, &g, nconv__nxc_input(e, e->x, xb + rows * g.iw_pad * c->C), xb};
        nconv__parallel(e, wpad_task, &wc);
        x = xb;
    } else if (dir != NCONV_DIR_BWD_D) {
        x = nconv__nxc_input(e, e->x, xb);
    }
    /* bwd_w with the swapped tiles, and bwd_d's column GEMM, read dy in f32 NCHW planes where it is
     * (see bw_task, bwd_d_cols). */
    const nconv_view *yv = e->y;
    const int dy_planes = ((dir == NCONV_DIR_BWD_W && g.bw_swap) || g.dcols) && nconv__view_is_planar_f32(yv) &&
                          !nconv__view_is_nxc_f32(yv);
    const float *y = dir != NCONV_DIR_FWD && !dy_planes ? nconv__nxc_input(e, e->y, yb) : NULL;

    if (dir == NCONV_DIR_BWD_W) {
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
        bw_ctx bc = {c, g, k, x, y, zero, dy_planes ? yv : NULL, direct ? (float *)wv->data : packed, lanes, lanes_more,
                     c->G * taps * tiles, tiles, c->G * g.KS * g.Og * g.Cg, shares, scratch, nconv__ws_round(s.scratch)};
        nconv__parallel(e, bw_task, &bc);
        if (g.bw_chunks > 1) nconv__parallel(e, chunk_sum_task, &bc);
        if (lanes) *e->db_done = 1;
        dw_ctx dc = {c, &g, wv, toff, packed, width, e->accumulate};
        if (!direct) nconv__parallel(e, dw_task, &dc);
        return NCONV_OK;
    }

    /* Row GEMM: fwd writes y, bwd_d writes dx; the epilogue goes to that output. */
    const nconv_view *out = dir == NCONV_DIR_FWD ? e->y : e->x;
    const nconv_epi *epi = e->epi;
    int fuse;
    float *dst = nconv__nxc_output(out, epi, dir == NCONV_DIR_FWD ? yb : xb, &fuse);
    const wsrc ws_ = {e->w, toff};
    if (g.dcols) {
        float *col = nconv__arena_take(e->ws, s.cols);
        /* The padded dx lives after the NHWC dx in xb, where it is copied (see sizes()). */
        float *pad = xb + (copies & NCONV_COPY_X ? c->N * g.IS * c->C : 0);
        if (!col) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
        float *dxb = fuse ? dst : xb;
        bwd_d_cols(e, &g, k, y, dy_planes ? yv : NULL, &ws_, packed, pad, col, zero, scratch, nconv__ws_round(s.scratch),
                   dxb);
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
    /* NCHW f32 outputs with dense planes, of one reduction block (every stride for fwd,
     * stride 1 for bwd_d: tile rows are then consecutive pixels), are written in place by the
     * plane-store kernel: no NHWC buffer and no transpose afterwards. */
    const int64_t *osz = dir == NCONV_DIR_FWD ? c->out : c->in;
    const int planes = !fuse && out->dt == NCONV_F32 && !(epi && epi->z) && g.kchunk == g.kc &&
                       (dir == NCONV_DIR_FWD || (c->s[0] == 1 && c->s[1] == 1 && c->s[2] == 1)) &&
                       (osz[2] == 1 || out->stride[4] == 1) && (osz[1] == 1 || out->stride[3] == osz[2]) &&
                       (osz[0] == 1 || out->stride[2] == osz[1] * osz[2]);
    const int in_kernel = fuse || planes; /* bias and relu applied by the kernel */
    /* Per group, the bias of its columns padded to whole panels. */
    for (int64_t gi = 0; gi < c->G; gi++) {
        memset(init + gi * g.panels * NR, 0, sizeof(float) * (size_t)(g.panels * NR));
        if (in_kernel && epi && epi->bias) {
            nconv_view gb = *epi->bias;
            gb.data = (char *)gb.data + nconv_dtype_size(gb.dt) * (size_t)(gi * g.rows_cols * gb.stride[0]);
            nconv_epi ge = {&gb, NULL, 1.0, 0};
            nconv__epi_init(&ge, init + gi * g.panels * NR, g.rows_cols);
        }
    }
    job *jobs = nconv__arena_take(e->ws, s.jobs);
    if (!jobs) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    const int64_t njobs = make_jobs(c, &g, dir, packed, jobs);
    /* Weights of megabytes with few rows (deep layers): packed all at once they would go out
     * to memory and every row block would read them back. Panel-major, a unit packs a range
     * of panels (or, prepacked, reads it) and runs every row over them while they are in L2. */
    const int64_t panel_bytes = (int64_t)sizeof(float) * g.ks_rows * g.kc * NR;
    int64_t max_rows = 0;
    for (int64_t i = 0; i < njobs; i++) max_rows = jobs[i].rows > max_rows ? jobs[i].rows : max_rows;
    const int panel_major = c->G * g.panels * panel_bytes >= (2 << 20) &&
                            max_rows * g.kc * (int64_t)sizeof(float) <= (4 << 20);
    int finite[NCONV_MAX_THREADS]; /* nconv__parallel runs at most this many threads */
    for (int i = 0; i < NCONV_MAX_THREADS; i++) finite[i] = 1;
    if (!panel_major && !prepacked) {
        pack_ctx pc = {c, &g, dir, &ws_, jobs, njobs, finite};
        nconv__parallel(e, pack_task, &pc);
        if (dir == NCONV_DIR_BWD_D && !all_set(finite)) return (nconv_status)NCONV__DECLINE_W;
    }
    /* Few row blocks (small images, deep layers) leave threads idle or unevenly loaded, and
     * each thread would stream all of w: their column panels are then shared out as well.
     * Panel-major, a unit's panels are about 256 KiB, with 4 units per thread at least. */
    int64_t blocks = 0, total = 0;
    for (int64_t i = 0; i < njobs; i++) blocks += jobs[i].units = row_blocks(&jobs[i], &g);
    int64_t pgroups = 1;
    if (panel_major) {
        int64_t per = (256 << 10) / panel_bytes, most = g.panels * njobs / (4 * threads);
        per = per > most ? most : per;
        pgroups = nconv__div_up(g.panels, per < 2 ? 2 : per);
        for (int64_t i = 0; i < njobs; i++) jobs[i].units = 1;
    } else if (threads > 1 && blocks < PGROUP_UNITS * threads) {
        pgroups = nconv__div_up(PGROUP_UNITS * threads, blocks > 0 ? blocks : 1);
    }
    if (pgroups > g.panels) pgroups = g.panels;
    for (int64_t i = 0; i < njobs; i++) {
        jobs[i].units *= pgroups;
        total += job_cost(&jobs[i], &g);
    }
    if (panel_major) g.pack_a = 0; /* each unit would copy all of A again */
    /* Outputs of 4 MiB and more are not read again soon: their rows go out with non-temporal
     * stores (measured 10-15% on 1x1 and 3x3 layers of 56 x 56 and more), unless each
     * kernel call is a short reduction whose stores would outpace the write combining
     * (wav2vec2's first layer: 35% slower). Those get their lines prefetched for writing. */
    const size_t out_floats = (size_t)(c->N * (dir == NCONV_DIR_FWD ? g.OS * c->O : g.IS * c->C));
    const int big = !planes && out_floats * sizeof(float) >= (4u << 20);
    const int stream = big && g.ks_rows * g.kc >= 32 && g.rows_cols % 8 == 0 &&
                       (dir == NCONV_DIR_FWD ? c->O : c->C) % 8 == 0 && (uintptr_t)dst % 32 == 0;
    const int store_flag = stream ? NCONV_IGEMM_STREAM : big ? NCONV_IGEMM_PREFETCH : 0;
    nconv_share *shares = nconv__arena_take(e->ws, s.shares);
    if (!shares) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    row_ctx rc = {c, dir, g, k, dir == NCONV_DIR_FWD ? x : y, dst, init, zero,
                  (in_kernel && epi && epi->relu ? NCONV_IGEMM_RELU : 0) | store_flag,
                  planes ? (float *)out->data : NULL, out->stride[0], out->stride[1], osz[0] * osz[1] * osz[2],
                  jobs, njobs, total, shares, pgroups, scratch, nconv__ws_round(s.scratch), panel_major,
                  prepacked ? NULL : &ws_, finite};
    const int width = nconv__parallel_width(e);
    int64_t u0 = 0; /* each share ends where the next begins: first_unit once per boundary */
    for (int t = 0; t < width; t++) {
        atomic_init(&shares[t].next, u0);
        shares[t].end = u0 = first_unit(&rc, t + 1, width);
    }
    nconv__parallel(e, row_task, &rc);
    /* found while packing: the next algorithm writes every output again (z may not alias it) */
    if (dir == NCONV_DIR_BWD_D && panel_major && !all_set(finite)) return (nconv_status)NCONV__DECLINE_W;
    if (!in_kernel) nconv__scatter_nxc_f32(e, out, dst, epi);
    return NCONV_OK;
}

/* Prepacked weights: the row GEMM's panels (fwd, bwd_d; not the thin-channel columns path).
 * Their layout depends on channels, groups, kernel, stride and dilation only, not on the
 * batch or the bands of a split. */
static size_t igemm_pack_size(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch) {
    (void)threads;
    *scratch = 0;
    if (dir == NCONV_DIR_BWD_W) return 0;
    ws_sizes s;
    sizes(c, dir, 1, 0, &s);
    geo g;
    geometry(c, dir, 1, &g);
    if (g.dcols) return 0;
    *scratch = 64 + nconv__ws_round(s.w) + nconv__ws_round(s.jobs); /* 64: the arena's alignment */
    return s.packed;
}

static nconv_status igemm_pack(const nconv_exec *e, void *dst) {
    const nconv_core *c = e->c;
    geo g;
    geometry(c, e->dir, e->threads, &g);
    ws_sizes s;
    sizes(c, e->dir, 1, 0, &s);
    int64_t *toff = nconv__arena_take(e->ws, s.w);
    job *jobs = nconv__arena_take(e->ws, s.jobs);
    if (!toff || !jobs) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: scratch too small for igemm's packing");
    tap_offsets(c, e->w, toff);
    const int64_t njobs = make_jobs(c, &g, e->dir, dst, jobs);
    const wsrc w = {e->w, toff};
    int finite[NCONV_MAX_THREADS];
    for (int i = 0; i < NCONV_MAX_THREADS; i++) finite[i] = 1;
    pack_ctx pc = {c, &g, e->dir, &w, jobs, njobs, finite};
    nconv__parallel(e, pack_task, &pc);
    return e->dir == NCONV_DIR_BWD_D && !all_set(finite) ? (nconv_status)NCONV__DECLINE_W : NCONV_OK;
}

const nconv_algo nconv_algo_igemm = {.name = "igemm", .applies = igemm_applies, .workspace = igemm_workspace,
                                     .run = igemm_run, .accumulates = 1, .declines = {0, NCONV__DECLINES_W, 0},
                                     .pack_size = igemm_pack_size, .pack = igemm_pack};
