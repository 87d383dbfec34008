/*
 * The igemm family's shared framework (src/algo/igemm*.c): the geometry of
 * each direction, the workspace layout, the weights as the caller laid them
 * out, and the buffers every run starts from. igemm.c is the algorithm and
 * its dispatch, igemm_rows.c the row GEMM of fwd and bwd_d (with the weight
 * packing), igemm_bwd_w.c backward-weights, igemm_cols.c the algorithm for
 * bwd_d with thin input channels, igemm_planes.c the algorithm for NCHW
 * planes.
 */
#ifndef NCONV_IGEMM_H
#define NCONV_IGEMM_H

#include "../internal.h"
#include "../kernels/kernels.h"

enum { MR = NCONV_MR, NR = NCONV_NR };
enum { A_BLOCK_BYTES = 192 << 10 }; /* A rows of a row block, kept in L2 across column panels */
enum { K_BLOCK = 2048 };            /* reduction block (taps x channels): a 128 KiB panel of w stays in L2 */
enum { PACK_PAD = 8 };              /* floats after each packed A row: breaks power-of-two strides */
enum { MAX_TAPS = 64 };             /* bwd_d: kernel taps per dim in a residue class */
enum { PGROUP_UNITS = 8 };          /* row GEMM: row blocks per thread, at least, before column panels are split too */
enum { MAX_KERNEL = 65536, MAX_CLASSES = 16384 };
enum { COL_PANELS = 8 }; /* igemm_cols, NCHW dy: pixels per call in panels of NR (the dy block stays in L2) */

/* ------------------------------------------------------------- geometry */

/* Rows (pixels) and the reduction of the GEMM of one direction. */
typedef struct geo {
    nconv_direction dir;
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
    int64_t bw_mr;      /* bwd_w: rows per tile, MR or (W-folded swapped: the 7 x 16 and 9 x 16 kernels) 7, 9 */
    int pack_a;        /* row GEMM: copy A rows of a block into contiguous scratch first */
    int prefetch_a;    /* row GEMM, 1x1: fetch the next tile's A rows while a tile computes */
    int wfold;         /* fwd, bwd_w: (kw, c) read as one run of a W-padded input copy (thin channels) */
    int64_t ks_rows;   /* taps of the row GEMM: KS, or KD * KH when W-folded */
    int64_t iw_pad;    /* width of the W-padded copy */
    int pointwise;     /* 1x1, stride 1, no padding: row i of A and of C is pixel i (no tap arithmetic) */
    int dcols;         /* bwd_d with thin input channels: column GEMM + scatter-add (see bwd_d_cols) */
    int64_t col_rows;  /* dcols: output pixels per column block */
    int64_t segs;      /* row GEMM: classes of pixels by the taps they read inside the source (see seg), 0: none */
    int64_t seg_rows;  /* segs: rows of a job, each class's padded to whole tiles */
    int dot16;         /* row GEMM of bf16: bf16 A rows and weights packed in pairs of k, the kernel table's
                        * bf16_igemm_np (see nconv__igemm_set_dot16) */
} geo;

/* A class of the row GEMM's pixels (fwd: output pixels; bwd_d at stride 1: input pixels), with
 * zero padding: those of a box of coordinates (in every image) whose taps inside the source are
 * the same box of kernel taps. Its rows in the job are padded to whole tiles, so that every tile
 * skips the taps that read padding only; those it reads are runs of consecutive taps of the
 * packed weights. */
enum { MAX_SEGS = 32, SEG_RUNS = 16 }; /* on the stack of the geometry and of the run: 6.4 KiB */
typedef struct seg {
    int64_t row0, rows;    /* its first row in the job (a multiple of MR), and its pixels */
    int64_t lo[3], cnt[3]; /* pixel coordinates per dim */
    int nrun;
    int32_t t0[SEG_RUNS], nt[SEG_RUNS]; /* runs of taps: first tap, taps */
} seg;
/* The classes of direction dir on c into segs (at most MAX_SEGS) and the rows of a job, padded,
 * into *rows; 0 where they do not apply: padding other than zeros, bwd_d at a stride other than
 * 1, a pixel that reads no tap, too many classes or runs. */
int64_t nconv__igemm_segments(const nconv_core *c, nconv_direction dir, seg *segs, int64_t *rows);

/* Whether the row GEMM runs panel-major (weights of megabytes, few rows; see nconv__igemm_rows_run). */
int nconv__igemm_panel_major(const nconv_core *c, const geo *g);
/* Whether it reads its 16-bit source (x, or dy for bwd_d) in place, with x and y channels-last as
 * `copies` (NCONV_ACTS_NXC) says: then it needs no copy of that source. */
int nconv__igemm_reads16(const nconv_core *c, const geo *g, unsigned copies);
/* `copies` (with x and y channels-last as NCONV_ACTS_NXC says) less the copies igemm does not make
 * of 16-bit operands it reads in place (see nconv__igemm_setup). */
unsigned nconv__igemm_copies16(const nconv_core *c, const geo *g, unsigned copies);
/* Floats of the row GEMM's packed A rows per thread (pack_a, and 16-bit sources). */
int64_t nconv__igemm_pack_floats(const geo *g, nconv_dtype dt);
/* The geometry of (c, dir) at `threads` (bwd_w's blocking depends on it; the rest does not). */
void nconv__igemm_geometry(const nconv_core *c, nconv_direction dir, int threads, geo *g);
/* Sets g->dot16 where the row GEMM of bf16 can run on bf16 pairs: kernel table k has
 * bf16_igemm_np, every reduction block is of whole pairs, no W-folded copy. The weights are
 * then packed in pairs, with plans too: it depends on the problem and the table alone. */
void nconv__igemm_set_dot16(const nconv_core *c, geo *g, const nconv_kernels *k);
/* bwd_d with one group and thin input channels: the shape igemm_cols computes (g->dcols). */
int nconv__igemm_cols_shape(const nconv_core *c, nconv_direction dir);

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
    float *wfin;          /* fwd (NULL: not kept): per column panel, 1 where every weight packed into it is
                           * finite, else 0 */
    int64_t units;        /* row blocks x panel groups (see row_ctx) */
} job;

/* Floats from one packed bwd_w row tile to the next ([KC][MR] each). Tiles
 * KC * MR floats apart were 6 or 12 KiB apart, so the packing's current line
 * of every tile fell into the same one or two L1 sets and each store missed;
 * a line more spreads them. */
static inline int64_t bw_tile_stride(const geo *g) { return g->bw_kc * MR + 16; }

/* Output pixel coordinates of a row (fwd, bwd_w), advanced row by row (no division). */
typedef struct pixel {
    int64_t n, o[3];
} pixel;

static inline void pixel_of(const nconv_core *c, int64_t os, int64_t i, pixel *px) {
    const int64_t p = i % os;
    px->n = i / os;
    px->o[2] = p % c->out[2], px->o[1] = (p / c->out[2]) % c->out[1], px->o[0] = p / (c->out[1] * c->out[2]);
}

static inline void pixel_next(const nconv_core *c, pixel *px) {
    if (++px->o[2] < c->out[2]) return;
    px->o[2] = 0;
    if (++px->o[1] < c->out[1]) return;
    px->o[1] = 0;
    if (++px->o[0] < c->out[0]) return;
    px->o[0] = 0;
    px->n++;
}

typedef struct ws_sizes {
    size_t x, y, w, packed, lanes, init, zero, jobs, shares, cols, scratch; /* scratch: per thread */
} ws_sizes;
/* Bytes of the run's workspace for geometry g, with their parts in *s. */
size_t nconv__igemm_sizes(const nconv_core *c, const geo *g, int threads, unsigned copies, ws_sizes *s);

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

/* Whether every thread's flag is set (nconv__parallel runs at most NCONV_MAX_THREADS). */
static inline int nconv__igemm_all_set(const int *flags) {
    for (int i = 0; i < NCONV_MAX_THREADS; i++)
        if (!flags[i]) return 0;
    return 1;
}

/* The buffers of a run, taken from its workspace in the layout of nconv__igemm_sizes, and
 * the activations it reads: x channels-last (or its W-padded copy), dy channels-last unless
 * it is read from its NCHW planes. */
typedef struct igemm_bufs {
    ws_sizes s;
    unsigned copies;
    float *xb, *yb, *packed, *init, *zero;
    int64_t *toff; /* offsets of the kernel taps in the weights' layout */
    double *lanes_more;
    char *scratch;
    size_t scratch_stride;
    int prepacked; /* packed is the plan's (nconv_exec.packed) */
    const float *x, *y;
    const uint16_t *src16; /* row GEMM: its 16-bit channels-last source (x or dy), read in place (x, y NULL) */
    const uint16_t *x16, *dy16; /* bwd_w: 16-bit channels-last x and dy, widened a block at a time (x, y NULL) */
    int dy_planes;         /* dy read from NCHW planes (f32 or 16-bit): dyv, the caller's view */
    nconv_view dyv;
} igemm_bufs;
nconv_status nconv__igemm_setup(const nconv_exec *e, const geo *g, const char *name, igemm_bufs *b);

/* The row GEMM (igemm_rows.c): its jobs over the packed weights (fwd, wfin: with the flags of
 * job.wfin), the packing of all of them (*finite per thread: every value packed was finite), and
 * the run of fwd or bwd_d. */
int64_t nconv__igemm_make_jobs(const nconv_core *c, const geo *g, nconv_direction dir, float *packed, int wfin,
                               job *jobs);
void nconv__igemm_pack_jobs(const nconv_exec *e, const geo *g, const wsrc *w, const job *jobs, int64_t njobs,
                            int *finite);
nconv_status nconv__igemm_rows_run(const nconv_exec *e, const geo *g, const igemm_bufs *b);

/* Backward-weights (igemm_bwd_w.c). */
nconv_status nconv__igemm_bwd_w_run(const nconv_exec *e, const geo *g, const igemm_bufs *b);

#endif
