/*
 * igemm's row GEMM, for fwd (rows: output pixels) and bwd_d (rows: input
 * pixels of a stride residue class): the weights packed into column panels
 * (or taken from a plan, packed once), A rows decoded into pointers into the
 * channels-last input, row blocks and column panels shared out to threads
 * by their work. See igemm.c for the algorithm.
 */
#include "igemm.h"

#include <math.h>
#include <string.h>

/* --------------------------------------------------- row GEMM (fwd, bwd_d) */

typedef struct row_ctx {
    const nconv_core *c;
    nconv_direction dir;
    geo g;
    const nconv_kernels *k;
    const float *src;  /* x (fwd) or dy (bwd_d), NHWC; NULL when src16 is read instead */
    float *dst;        /* y (fwd) or dx (bwd_d), NHWC; NULL when dst16 is written instead */
    /* 16-bit channels-last operands read and written in place: A rows widened as they are
     * packed, a unit's output rows narrowed from a block of f32 rows (see row_block) */
    const uint16_t *src16;
    uint16_t *dst16;
    int planes16;          /* dst16 is NCHW planes (see pimg below) */
    nconv_convert16_fn cv; /* their conversion */
    const float *init; /* [G][panels][NR] */
    const float *zero;
    int flags;         /* NCONV_IGEMM_RELU, NCONV_IGEMM_STREAM: for the last reduction block's stores */
    int rows;          /* pointwise rows in one reduction block: igemm_rows(16) on each block (see row_block) */
    const seg *segs;   /* the classes of pixels (g.segs of them): a job's rows in their order */
    float *planes;     /* NCHW f32 output written in place (dst unused), see nconv__igemm_rows_run */
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
    const wsrc *w;
    int *finite; /* per thread: every weight it packed was finite */
} row_ctx;

/* Rows are decoded as element offsets into the source and the output (NO_ROW: a row of zeros),
 * then made pointers into f32 operands or, for 16-bit ones, packed widened (see row_block). */
enum { NO_ROW = -1 };
enum { CROSS_PANELS = 8 }; /* panels per kernel call of a plane-store tile across images: a 3 KiB buffer */

/* Input row starts of output row (n, o0, o1), one per (k0, k1): in the
 * W-padded copy when folded, else in x at the group's first channel; NO_ROW
 * for a row of padding. The same for every pixel of the output row. */
static void fwd_row_bases(const row_ctx *rc, const job *j, const pixel *px, int64_t *rb) {
    const nconv_core *c = rc->c;
    const int64_t img = rc->g.wfold ? (j->g * c->N + px->n) * c->in[0] * c->in[1] * rc->g.iw_pad * rc->g.Cg
                                    : px->n * rc->g.IS * c->C + j->g * rc->g.Cg;
    const int64_t row_len = rc->g.wfold ? rc->g.iw_pad * rc->g.Cg : c->in[2] * c->C;
    for (int64_t k0 = 0, t = 0; k0 < c->k[0]; k0++) {
        const int64_t i0 = nconv__map_index(px->o[0] * c->s[0] - c->pb[0] + k0 * c->d[0], c->in[0], c->mode);
        for (int64_t k1 = 0; k1 < c->k[1]; k1++, t++) {
            const int64_t i1 = nconv__map_index(px->o[1] * c->s[1] - c->pb[1] + k1 * c->d[1], c->in[1], c->mode);
            rb[t] = i0 < 0 || i1 < 0 ? NO_ROW : img + (i0 * c->in[1] + i1) * row_len;
        }
    }
}

/* A rows (a[t * MR + r]) and C row for fwd pixel px (index i) of job j, from its row starts rb. */
static void fwd_row(const row_ctx *rc, const job *j, int64_t i, const pixel *px, const int64_t *rb, int64_t *a,
                    int64_t *crow) {
    const nconv_core *c = rc->c;
    const int64_t K01 = c->k[0] * c->k[1];
    if (rc->g.wfold) { /* one run of KW * Cg floats per (kd, kh) in the W-padded copy */
        const int64_t off = px->o[2] * c->s[2] * rc->g.Cg;
        for (int64_t t = 0; t < K01; t++) a[t * MR] = rb[t] != NO_ROW ? rb[t] + off : NO_ROW;
    } else {
        for (int64_t r = 0, t = 0; r < K01; r++)
            for (int64_t k2 = 0; k2 < c->k[2]; k2++, t++) {
                const int64_t i2 = nconv__map_index(px->o[2] * c->s[2] - c->pb[2] + k2 * c->d[2], c->in[2], c->mode);
                a[t * MR] = rb[r] == NO_ROW || i2 < 0 ? NO_ROW : rb[r] + i2 * c->C;
            }
    }
    *crow = i * c->O + j->g * rc->g.Og;
}

/* For the input row (n, i0, i1) of bwd_d row i of job j (a residue class):
 * the dy row start of each (a0, a1) tap pair (NO_ROW: outside dy), and the
 * row's start in dx. The same for every pixel of the row. */
static int64_t bwd_d_row_bases(const row_ctx *rc, const job *j, int64_t i, int64_t *rb) {
    const nconv_core *c = rc->c;
    const int64_t per_n = j->cnt[0] * j->cnt[1] * j->cnt[2];
    const int64_t n = i / per_n, q = i % per_n;
    const int64_t ip0 = j->start[0] + (q / (j->cnt[1] * j->cnt[2])) * c->s[0];
    const int64_t ip1 = j->start[1] + ((q / j->cnt[2]) % j->cnt[1]) * c->s[1];
    const int64_t base = n * rc->g.OS * c->O + j->g * rc->g.Og;
    for (int64_t a0 = 0, r = 0; a0 < j->ntap[0]; a0++) {
        const int64_t n0 = ip0 + c->pb[0] - j->taps[0][a0] * c->d[0], o0 = n0 / c->s[0];
        for (int64_t a1 = 0; a1 < j->ntap[1]; a1++, r++) {
            const int64_t n1 = ip1 + c->pb[1] - j->taps[1][a1] * c->d[1], o1 = n1 / c->s[1];
            const int in = n0 >= 0 && o0 < c->out[0] && n1 >= 0 && o1 < c->out[1];
            rb[r] = in ? base + (o0 * c->out[1] + o1) * c->out[2] * c->O : NO_ROW;
        }
    }
    return (n * rc->g.IS + (ip0 * c->in[1] + ip1) * c->in[2]) * c->C + j->g * rc->g.Cg;
}

/* A rows and C row of bwd_d row i from its row's bases (rb, dx row start rowdst). */
static void bwd_d_row(const row_ctx *rc, const job *j, int64_t i, const int64_t *rb, int64_t rowdst, int64_t *a,
                      int64_t *crow) {
    const nconv_core *c = rc->c;
    const int64_t ip2 = j->start[2] + (i % j->cnt[2]) * c->s[2];
    for (int64_t r = 0, t = 0; r < j->ntap[0] * j->ntap[1]; r++)
        for (int64_t a2 = 0; a2 < j->ntap[2]; a2++, t++) {
            const int64_t n2 = ip2 + c->pb[2] - j->taps[2][a2] * c->d[2], o2 = n2 / c->s[2];
            a[t * MR] = rb[r] != NO_ROW && n2 >= 0 && o2 < c->out[2] ? rb[r] + o2 * c->O : NO_ROW;
        }
    *crow = rowdst + ip2 * c->C;
}

/* Dim a's runs of row coordinates (fwd: output, bwd_d at stride 1: input) whose taps inside the
 * source are the same, [klo, khi]: their first coordinate and count. Returns how many, or -1 (a
 * coordinate reads no tap; more than max). */
static int dim_classes(const nconv_core *c, nconv_direction dir, int a, int max, int64_t *lo, int64_t *cnt,
                       int64_t *klo, int64_t *khi) {
    const int fwd = dir == NCONV_DIR_FWD;
    int n = 0;
    for (int64_t x = 0; x < (fwd ? c->out[a] : c->in[a]); x++) {
        /* tap k reads the source where k * d is in [first, last] */
        const int64_t first = fwd ? c->pb[a] - x * c->s[a] : x + c->pb[a] - (c->out[a] - 1);
        const int64_t last = first + (fwd ? c->in[a] : c->out[a]) - 1;
        const int64_t kl = first <= 0 ? 0 : nconv__div_up(first, c->d[a]);
        const int64_t kh = last < 0 ? -1 : last / c->d[a] < c->k[a] - 1 ? last / c->d[a] : c->k[a] - 1;
        if (kl > kh) return -1;
        if (n > 0 && klo[n - 1] == kl && khi[n - 1] == kh) {
            cnt[n - 1]++;
            continue;
        }
        if (n == max) return -1;
        lo[n] = x, cnt[n] = 1, klo[n] = kl, khi[n] = kh, n++;
    }
    return n;
}

int64_t nconv__igemm_segments(const nconv_core *c, nconv_direction dir, seg *segs, int64_t *rows) {
    int64_t lo[3][MAX_SEGS], cnt[3][MAX_SEGS], klo[3][MAX_SEGS], khi[3][MAX_SEGS];
    int nd[3];
    if (c->mode != NCONV_PAD_ZEROS || (dir == NCONV_DIR_BWD_D && c->s[0] * c->s[1] * c->s[2] != 1)) return 0;
    for (int a = 0; a < 3; a++)
        if ((nd[a] = dim_classes(c, dir, a, MAX_SEGS, lo[a], cnt[a], klo[a], khi[a])) < 0) return 0;
    if (nd[0] * nd[1] * nd[2] > MAX_SEGS) return 0;
    int64_t n = 0, row = 0;
    for (int i0 = 0; i0 < nd[0]; i0++)
        for (int i1 = 0; i1 < nd[1]; i1++)
            for (int i2 = 0; i2 < nd[2]; i2++) {
                seg *s = &segs[n++];
                const int ix[3] = {i0, i1, i2};
                for (int a = 0; a < 3; a++) s->lo[a] = lo[a][ix[a]], s->cnt[a] = cnt[a][ix[a]];
                s->row0 = row, s->rows = c->N * s->cnt[0] * s->cnt[1] * s->cnt[2];
                row += nconv__div_up(s->rows, MR) * MR;
                /* a run per (k0, k1), joined where one ends at the next's first tap */
                s->nrun = 0;
                const int64_t nt = khi[2][i2] - klo[2][i2] + 1;
                for (int64_t k0 = klo[0][i0]; k0 <= khi[0][i0]; k0++)
                    for (int64_t k1 = klo[1][i1]; k1 <= khi[1][i1]; k1++) {
                        const int64_t t0 = (k0 * c->k[1] + k1) * c->k[2] + klo[2][i2];
                        if (s->nrun > 0 && s->t0[s->nrun - 1] + s->nt[s->nrun - 1] == t0) {
                            s->nt[s->nrun - 1] += (int32_t)nt;
                            continue;
                        }
                        if (s->nrun == SEG_RUNS) return 0;
                        s->t0[s->nrun] = (int32_t)t0, s->nt[s->nrun] = (int32_t)nt, s->nrun++;
                    }
            }
    *rows = row;
    return n;
}

/* The pixel (fwd: output, bwd_d: input) of row q of class s (q < s->rows). */
static void seg_pixel(const seg *s, int64_t q, pixel *px) {
    const int64_t per = s->cnt[0] * s->cnt[1] * s->cnt[2], p = q % per;
    px->n = q / per;
    px->o[2] = s->lo[2] + p % s->cnt[2];
    px->o[1] = s->lo[1] + p / s->cnt[2] % s->cnt[1];
    px->o[0] = s->lo[0] + p / (s->cnt[1] * s->cnt[2]);
}

/* The rows of a 1x1 tile into L1, ahead of its kernel call (NCHW outputs; see geo.prefetch_a). */
static void prefetch_tile(const float *const *a, int64_t a_off, int64_t kcc) {
    for (int64_t r = 0; r < MR; r++)
        for (int64_t i = 0; i < kcc; i += 16) __builtin_prefetch(a[r] + a_off + i);
}

/* Panels [q0, q1) of a tile of class sg in one reduction block into the f32 rows cp: the class's
 * runs of taps summed in turn, the rest of the taps skipped: they read only padding. That leaves
 * out their products, which are 0 but where a weight is infinite or NaN: a panel with such a
 * weight (in fwd, where the reference takes them) sums all its taps, on its own. On bf16 pairs
 * (at16 and wq16 not NULL) through bf16_igemm_np, else igemm_np. */
static void seg_tile(const row_ctx *rc, const job *j, const seg *sg, int64_t mr, int64_t q0, int64_t q1,
                     int64_t nc_last, int64_t kcc, const float *const *at, const uint16_t *const *at16, int64_t a_off,
                     const float *wq, const uint16_t *wq16, float *const *cp, int first, int last) {
    const geo *g = &rc->g;
    const int64_t ws = j->ks * g->kc * NR;
    int fin = 1;
    for (int64_t q = q0; q < q1 && rc->dir == NCONV_DIR_FWD; q++) fin &= j->wfin[q] != 0.0f;
    for (int64_t q = q0; q < q1; q++) {
        /* panels from q on that skip: all of them at once; else panel q alone */
        const int skip = fin || j->wfin[q] != 0.0f;
        const int64_t q_end = fin ? q1 : q + 1, np = q_end - q, nc = q_end == q1 ? nc_last : NR;
        float *cq[MR];
        for (int64_t r = 0; r < MR; r++) cq[r] = cp[r] + (q - q0) * NR;
        const float *init = first ? rc->init + (j->g * g->panels + q) * NR : NULL;
        const int nrun = skip ? sg->nrun : 1;
        for (int u = 0; u < nrun; u++) {
            const int64_t t0 = skip ? sg->t0[u] : 0, nt = skip ? sg->nt[u] : j->ks;
            const int flags = last && u + 1 == nrun ? rc->flags : 0;
            if (wq16)
                rc->k->bf16_igemm_np(mr, np, nc, kcc, nt, at16 + t0 * MR, a_off, (const uint16_t *)rc->zero,
                                     wq16 + (q - q0) * 2 * ws + t0 * kcc * NR, 2 * ws, cq, NULL,
                                     u == 0 ? init : NULL, flags);
            else
                rc->k->igemm_np(mr, np, nc, kcc, nt, at + t0 * MR, a_off, rc->zero, wq + (q - q0) * ws + t0 * kcc * NR,
                                ws, cq, u == 0 ? init : NULL, flags);
        }
        q = q_end - 1;
    }
}

/* A thread's scratch for row_block, in the layout nconv__igemm_sizes counts. */
typedef struct row_scratch {
    float **crow;     /* C row pointers of the block */
    const float **a;  /* A row pointers, [tile][tap][MR] */
    const float **pa; /* the same, into pbuf */
    int64_t *ao;      /* A rows as offsets (NO_ROW: zeros), in a's memory: each a[i] replaces ao[i] */
    int64_t *co;      /* C rows as offsets */
    int64_t *rb;      /* row starts per (k0, k1) tap pair */
    float *pbuf;      /* A rows of a reduction block packed (pack_a, 16-bit sources) */
    float *cbuf;      /* 16-bit outputs: the block's f32 rows, [mc_tiles * MR][panels * NR] */
} row_scratch;
_Static_assert(sizeof(int64_t) == sizeof(const float *), "row_scratch.ao shares a's memory");

/* Whether a block's tiles (ks x kc values each) run every panel in turn (1), or the panels two at a
 * time over all its tiles (0). A tile that fits in L1 stays there while every panel of w streams
 * past it from L2 (1x1 and thin problems); otherwise one panel of w stays while the tiles stream.
 * So do up to 4 panels longer than L1 holds (a few panels re-read the tiles little; more re-read
 * them more than keeping w costs). */
static int tiles_outer(int64_t ks, int64_t kc, int64_t panels) {
    const int64_t wbytes = (int64_t)sizeof(float) * panels * ks * kc * NR;
    return (int64_t)sizeof(float) * ks * kc * MR <= (16 << 10) && !(panels <= 4 && wbytes > (32 << 10));
}

/* The columns of panel q1 - 1, the last of a kernel call over panels [q0, q1). */
static int64_t last_width(const geo *g, int64_t q1) {
    const int64_t left = g->rows_cols - (q1 - 1) * NR;
    return left < NR ? left : NR;
}

/* Unit u of job j: up to mc_tiles row tiles of one cache block, one range of column panels. */
static void row_block(const row_ctx *rc, const job *j, int64_t u, const row_scratch *sc) {
    const float **a = sc->a, **pa = sc->pa;
    float **crow = sc->crow;
    int64_t *ao = sc->ao, *co = sc->co, *rb = sc->rb;
    const geo *g = &rc->g;
    const int64_t b = u / rc->pgroups, pg = u % rc->pgroups;
    const int64_t p0 = pg * g->panels / rc->pgroups, p1 = (pg + 1) * g->panels / rc->pgroups;
    const int64_t r0 = b * g->mc_tiles * MR;
    const int64_t r1 = r0 + g->mc_tiles * MR < j->rows ? r0 + g->mc_tiles * MR : j->rows;
    const int64_t ntiles = nconv__div_up(r1 - r0, MR);
    const int flags16 = rc->flags | (rc->c->dt == NCONV_BF16 ? NCONV_IGEMM_BF16 : 0); /* 16-bit outputs */
    if (rc->rows) { /* rows lda and ldc apart: no row pointers (with short reductions, setting them up
                     * cost half as much as the GEMM) */
        int64_t lda = rc->dir == NCONV_DIR_FWD ? rc->c->C : rc->c->O;
        const int64_t ldc = rc->dir == NCONV_DIR_FWD ? rc->c->O : rc->c->C;
        const int64_t a_at = j->g * g->kc + r0 * lda, c_at = j->g * g->rows_cols + r0 * ldc;
        const float *a0 = rc->src16 ? sc->pbuf : rc->src + a_at;
        if (rc->src16 && lda == g->kc) { /* 16-bit rows widened: at once where they lie end to end */
            rc->cv((r1 - r0) * lda, rc->src16 + a_at, sc->pbuf, 1);
        } else if (rc->src16) {
            for (int64_t i = 0; i < r1 - r0; i++) rc->cv(g->kc, rc->src16 + a_at + i * lda, sc->pbuf + i * g->kc, 1);
            lda = g->kc;
        }
        const float *init = rc->init + j->g * g->panels * NR;
        const int64_t ws = g->kc * NR;
        const int outer = tiles_outer(1, g->kc, p1 - p0);
        const int64_t pstep = outer ? p1 - p0 : 2;
        /* each tile's call fetches the next tile's rows, as in the loop over row pointers below */
        const int next_a = g->prefetch_a && outer ? NCONV_IGEMM_NEXT_A : 0;
        for (int64_t q0 = p0; q0 < p1; q0 += pstep) {
            const int64_t q1 = p1 - q0 < pstep ? p1 : q0 + pstep;
            const int64_t nc_last = last_width(g, q1);
            if (rc->dst16)
                rc->k->igemm_rows16(r1 - r0, q1 - q0, nc_last, g->kc, a0, lda, j->w + q0 * ws, ws,
                                    rc->dst16 + c_at + q0 * NR, ldc, init + q0 * NR, flags16);
            else
                rc->k->igemm_rows(r1 - r0, q1 - q0, nc_last, g->kc, a0, lda, j->w + q0 * ws, ws,
                                  rc->dst + c_at + q0 * NR, ldc, init + q0 * NR,
                                  rc->flags | next_a);
        }
        return;
    }
    pixel px = {0, {0, 0, 0}};
    if (rc->dir == NCONV_DIR_FWD) pixel_of(rc->c, g->OS, r0, &px);
    int64_t rowdst = 0; /* bwd_d: the dx row start of the current input row */
    if (g->pointwise) { /* row i of A and of C is pixel i: ks is 1, ao[i - r0] is row i's */
        const int64_t lda = rc->dir == NCONV_DIR_FWD ? rc->c->C : rc->c->O;
        const int64_t ldc = rc->dir == NCONV_DIR_FWD ? rc->c->O : rc->c->C;
        for (int64_t i = r0; i < r1; i++) ao[i - r0] = j->g * g->kc + i * lda;
        for (int64_t i = r0; i < r1; i++) co[i - r0] = j->g * g->rows_cols + i * ldc;
    }
    const int dot16 = g->dot16;
    const int pack = !dot16 && (g->pack_a || rc->src16);
    /* W-folded f32 forward: a tap's A row steps s * Cg floats from pixel to pixel of an output
     * row, so the row pointers are made a run of pixels at a time from the row's starts rather
     * than decoded pixel by pixel through offsets, which with reductions this short rivals the
     * GEMM itself. */
    const int fold_rows = rc->dir == NCONV_DIR_FWD && g->wfold && !pack && !dot16 && !rc->dst16;
    const nconv_core *c = rc->c;
    for (int64_t i = r0; i < r1 && fold_rows;) {
        const int64_t step = c->s[2] * g->Cg, run = r1 - i < c->out[2] - px.o[2] ? r1 - i : c->out[2] - px.o[2];
        fwd_row_bases(rc, j, &px, rb);
        /* block rows [i - r0, i - r0 + run) of A, tile by tile: n rows from row rt of the tile */
        for (int64_t b = i - r0; b < i - r0 + run;) {
            const int64_t tile = b / MR, rt = b % MR, n = MR - rt < i - r0 + run - b ? MR - rt : i - r0 + run - b;
            for (int64_t t = 0; t < j->ks; t++) {
                const float *p = rb[t] == NO_ROW ? NULL : rc->src + rb[t] + (px.o[2] + b - (i - r0)) * step;
                const float **at = a + (tile * j->ks + t) * MR + rt;
                for (int64_t q = 0; q < n; q++) at[q] = p ? p + q * step : rc->zero;
            }
            b += n;
        }
        float *crow0 = rc->dst + i * c->O + j->g * g->Og;
        for (int64_t q = 0; q < run; q++) crow[i - r0 + q] = crow0 + q * c->O;
        i += run;
        px.o[2] += run - 1; /* to the run's last pixel, then past it */
        pixel_next(c, &px);
    }
    /* Classes of pixels (g->segs): the class and rows of each tile, whose padding rows repeat its
     * first row (read, never written). */
    int64_t tile_seg[64], tile_mr[64]; /* geometry caps mc_tiles at 64 */
    for (int64_t i = r0, si = 0, at_row = -1; i < r1 && g->segs; i++) {
        const int64_t tile = (i - r0) / MR, r = (i - r0) % MR;
        int64_t *at = ao + tile * j->ks * MR + r;
        while (si + 1 < g->segs && i >= rc->segs[si + 1].row0) si++;
        const seg *sg = &rc->segs[si];
        const int64_t q = i - sg->row0;
        if (r == 0) tile_seg[tile] = si, tile_mr[tile] = sg->rows - q < MR ? sg->rows - q : MR;
        if (q >= sg->rows) {
            for (int64_t t = 0; t < j->ks; t++) at[t * MR] = at[t * MR - r];
            co[i - r0] = co[i - r0 - r];
            continue;
        }
        seg_pixel(sg, q, &px);
        const int64_t *sz = rc->dir == NCONV_DIR_FWD ? c->out : c->in;
        const int64_t row = (px.n * sz[0] + px.o[0]) * sz[1] + px.o[1], pix = row * sz[2] + px.o[2];
        if (rc->dir == NCONV_DIR_FWD) {
            if (row != at_row) fwd_row_bases(rc, j, &px, rb), at_row = row;
            fwd_row(rc, j, pix, &px, rb, at, &co[i - r0]);
        } else { /* at stride 1 the job's row of input pixel pix is pix */
            if (row != at_row) rowdst = bwd_d_row_bases(rc, j, pix, rb), at_row = row;
            bwd_d_row(rc, j, pix, rb, rowdst, at, &co[i - r0]);
        }
    }
    for (int64_t i = r0; i < r1 && !g->pointwise && !fold_rows && !g->segs; i++) {
        const int64_t tile = (i - r0) / MR, r = (i - r0) % MR;
        int64_t *at = ao + tile * j->ks * MR + r;
        if (rc->dir == NCONV_DIR_FWD) {
            if (i == r0 || px.o[2] == 0) fwd_row_bases(rc, j, &px, rb);
            fwd_row(rc, j, i, &px, rb, at, &co[i - r0]);
            pixel_next(rc->c, &px);
        } else {
            if (i == r0 || i % j->cnt[2] == 0) rowdst = bwd_d_row_bases(rc, j, i, rb);
            bwd_d_row(rc, j, i, rb, rowdst, at, &co[i - r0]);
        }
    }
    /* Rows past the end of the last tile repeat its first row (read, never written). */
    for (int64_t i = r1; i < r0 + ntiles * MR; i++) {
        const int64_t tile = (i - r0) / MR, r = (i - r0) % MR;
        for (int64_t t = 0; t < j->ks; t++) {
            if (fold_rows) a[(tile * j->ks + t) * MR + r] = a[(tile * j->ks + t) * MR];
            else ao[(tile * j->ks + t) * MR + r] = ao[(tile * j->ks + t) * MR];
        }
    }
    const int64_t na = ntiles * j->ks * MR, ldb = g->panels * NR;
    /* On bf16 pairs (g->dot16) the 16-bit source (channels-last, see nconv__igemm_setup) is read
     * as it lies; else A is packed per reduction block from ao (pack_a, and widened from 16-bit
     * sources) or read through a. */
    const uint16_t **a16 = (const uint16_t **)sc->a;
    const uint16_t *const zero16 = (const uint16_t *)rc->zero;
    for (int64_t i = 0; dot16 && i < na; i++) a16[i] = ao[i] == NO_ROW ? zero16 : rc->src16 + ao[i];
    for (int64_t i = 0; !dot16 && !pack && !fold_rows && i < na; i++)
        a[i] = ao[i] == NO_ROW ? rc->zero : rc->src + ao[i];
    for (int64_t i = r0; i < r1 && !fold_rows; i++)
        crow[i - r0] = rc->dst16 ? sc->cbuf + (i - r0) * ldb : rc->dst + co[i - r0];
    const int64_t c1 = p1 * NR < g->rows_cols ? p1 * NR : g->rows_cols; /* the unit's last column */
    /* 16-bit channels-last outputs: narrowed by the kernel as it stores them when the reduction
     * is one block, else summed in cbuf and narrowed after the block. */
    const int direct16 = rc->dst16 && !rc->planes16 && g->kchunk >= g->kc && !g->segs; /* segs: a call per run */
    /* Reduction blocks outermost: their A rows stay in cache over the panels. */
    for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
        const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
        const int first = k0 == 0, last = k0 + kcc == g->kc;
        const float *const *ap = a;
        const int64_t a_off = pack ? 0 : k0;
        const char *next16 = NULL; /* the next block's rows of the source, see below */
        int64_t next_bytes = 0;
        if (pack && rc->src16 && g->pointwise && ao[na - 1] - ao[0] == (na - 1) * kcc && (kcc * 4) % 4096 != 0) {
            /* The widening waits on memory where the f32 kernel's reads would overlap its
             * arithmetic: the next block's rows (of this job, one reduction block) are fetched a
             * slice per tile while this one computes. */
            const int64_t next = j->rows - r1 < na ? j->rows - r1 : na;
            if (kcc == g->kc && next > 0)
                next16 = (const char *)(rc->src16 + ao[0] + na * kcc), next_bytes = 2 * next * kcc;
            /* Rows one after another in the source (1x1, all channels in one block, no tile
             * past r1, whose rows repeat): widened by one call, as they lie (a call per row of
             * a few vectors cost as much again). */
            rc->cv(na * kcc, rc->src16 + ao[0] + k0, sc->pbuf, 1);
            for (int64_t i = 0; i < na; i++) pa[i] = sc->pbuf + (ao[i] - ao[0]);
            ap = pa;
        } else if (pack) { /* pa[tile][t][r] -> row of pbuf holding A(t, r)[k0, k0 + kcc) */
            const int64_t ld = kcc + PACK_PAD;
            for (int64_t i = 0; i < na; i++) {
                float *dst = sc->pbuf + i * ld;
                if (ao[i] == NO_ROW) memset(dst, 0, sizeof(float) * (size_t)kcc);
                else if (rc->src16) rc->cv(kcc, rc->src16 + ao[i] + k0, dst, 1);
                else memcpy(dst, rc->src + ao[i] + k0, sizeof(float) * (size_t)kcc);
                pa[i] = dst;
            }
            ap = pa;
        }
        const int tile_outer = tiles_outer(j->ks, kcc, p1 - p0);
        const int prefetch = g->prefetch_a && tile_outer && j->ks == 1 && !rc->src16 && !dot16; /* once per block */
        if (!rc->planes) {
            /* A kernel call runs all of a tile's panels, or two while the tiles
             * stream (the AVX-512 kernels share each load of A between two). */
            const int64_t pstep = tile_outer ? p1 - p0 : 2;
            for (int64_t q0 = p0; q0 < p1; q0 += pstep) {
                const int64_t q1 = p1 - q0 < pstep ? p1 : q0 + pstep;
                const int64_t nc_last = last_width(g, q1);
                for (int64_t tile = 0; tile < ntiles; tile++) {
                    const int64_t left = r1 - (r0 + tile * MR), mr = g->segs ? tile_mr[tile] : left < MR ? left : MR;
                    const int next_a = prefetch && tile + 1 < ntiles ? NCONV_IGEMM_NEXT_A : 0;
                    if (next16 && q0 == p0) {
                        const int64_t b0 = next_bytes * tile / ntiles, b1 = next_bytes * (tile + 1) / ntiles;
                        for (int64_t o = b0 - b0 % 64; o < b1; o += 64) __builtin_prefetch(next16 + o);
                    }
                    const float *const *at = ap + tile * j->ks * MR;
                    const float *wq = j->w + (q0 * j->ks * g->kc + j->ks * k0) * NR;
                    if (dot16) { /* panels in pairs where their f32 form began (pair_rows) */
                        const uint16_t *const *at16 = a16 + tile * j->ks * MR;
                        const uint16_t *wq16 = (const uint16_t *)(j->w + q0 * j->ks * g->kc * NR) + j->ks * k0 * NR;
                        const int64_t ws16 = 2 * j->ks * g->kc * NR;
                        const float *init = rc->init + (j->g * g->panels + q0) * NR;
                        uint16_t *cp16[MR];
                        float *cp[MR];
                        for (int64_t r = 0; r < MR; r++) {
                            const int64_t rr = tile * MR + (r < mr ? r : 0);
                            if (direct16) cp16[r] = rc->dst16 + co[rr] + q0 * NR;
                            else cp[r] = crow[rr] + q0 * NR;
                        }
                        if (g->segs)
                            seg_tile(rc, j, &rc->segs[tile_seg[tile]], mr, q0, q1, nc_last, kcc, NULL, at16, a_off,
                                     NULL, wq16, cp, first, last);
                        else if (direct16)
                            rc->k->bf16_igemm_np(mr, q1 - q0, nc_last, kcc, j->ks, at16, a_off, zero16, wq16, ws16,
                                                 NULL, cp16, init, rc->flags);
                        else
                            rc->k->bf16_igemm_np(mr, q1 - q0, nc_last, kcc, j->ks, at16, a_off, zero16, wq16, ws16,
                                                 cp, NULL, first ? init : NULL, last ? rc->flags : 0);
                        continue;
                    }
                    if (direct16) {
                        uint16_t *cp[MR];
                        for (int64_t r = 0; r < MR; r++) cp[r] = rc->dst16 + co[tile * MR + (r < mr ? r : 0)] + q0 * NR;
                        rc->k->igemm_np16(mr, q1 - q0, nc_last, kcc, j->ks, at, a_off, rc->zero, wq, j->ks * g->kc * NR,
                                          cp, rc->init + (j->g * g->panels + q0) * NR, flags16);
                        continue;
                    }
                    float *cp[MR];
                    for (int64_t r = 0; r < MR; r++) cp[r] = crow[tile * MR + (r < mr ? r : 0)] + q0 * NR;
                    if (g->segs) {
                        seg_tile(rc, j, &rc->segs[tile_seg[tile]], mr, q0, q1, nc_last, kcc, at, NULL, a_off, wq,
                                 NULL, cp, first, last);
                        continue;
                    }
                    rc->k->igemm_np(mr, q1 - q0, nc_last, kcc, j->ks, at, a_off, rc->zero, wq, j->ks * g->kc * NR, cp,
                                    first ? rc->init + (j->g * g->panels + q0) * NR : NULL, (last ? rc->flags : 0) | next_a);
                }
            }
            continue;
        }
        /* NCHW output in place: one reduction block, so init is set and this is the last.
         * Panels in the same steps as above. */
        const int64_t pstep = tile_outer ? p1 - p0 : 2;
        for (int64_t q0 = p0; q0 < p1; q0 += pstep) {
            const int64_t q1 = p1 - q0 < pstep ? p1 : q0 + pstep;
            const int64_t nc_last = last_width(g, q1);
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
                /* A tile across images, or the last: its panels into a small buffer, a few at a
                 * time by the kernel of whole tiles (one panel per call read A once per panel),
                 * then each row into its image's planes. */
                for (int64_t qa = q0; qa < q1; qa += CROSS_PANELS) {
                    const int64_t qb = q1 - qa < CROSS_PANELS ? q1 : qa + CROSS_PANELS;
                    float tbuf[MR * CROSS_PANELS * NR], *tp[MR];
                    for (int64_t r = 0; r < MR; r++) tp[r] = tbuf + r * CROSS_PANELS * NR;
                    rc->k->igemm_np(mr, qb - qa, qb == q1 ? nc_last : NR, kcc, j->ks, at, a_off, rc->zero,
                                    wq + (qa - q0) * j->ks * g->kc * NR, j->ks * g->kc * NR, tp, init + (qa - q0) * NR,
                                    rc->flags & NCONV_IGEMM_RELU);
                    const int64_t nc = (qb - qa - 1) * NR + (qb == q1 ? nc_last : NR);
                    for (int64_t r = 0; r < mr; r++) {
                        float *d = rc->planes + ((i0 + r) / rc->S) * rc->pimg + (ch0 + (qa - q0) * NR) * rc->pch +
                                   (i0 + r) % rc->S;
                        for (int64_t jj = 0; jj < nc; jj++) d[jj * rc->pch] = tp[r][jj];
                    }
                }
            }
        }
    }
    if (rc->planes16) { /* the block's columns [c0, c1) transposed and narrowed, a run of an image at a time */
        const int64_t c0 = p0 * NR;
        const nconv_transpose16_fn t16 = nconv__transpose16(rc->k, rc->c->dt);
        for (int64_t i = r0; i < r1;) {
            const int64_t img = i / rc->S, px = i % rc->S, run = r1 - i < rc->S - px ? r1 - i : rc->S - px;
            t16(run, c1 - c0, sc->cbuf + (i - r0) * ldb + c0, ldb,
                rc->dst16 + img * rc->pimg + (j->g * g->rows_cols + c0) * rc->pch + px, rc->pch, 0);
            i += run;
        }
    } else if (rc->dst16 && !direct16) { /* the block's rows, its columns [c0, c1), narrowed into the output */
        const int64_t c0 = p0 * NR, n = r1 - r0;
        /* Rows ldb apart in the output, each at least one row after the last: with the first
         * and last (n - 1) * ldb apart, all of them one after another, narrowed by one call. */
        const int64_t row_step = rc->dir == NCONV_DIR_FWD ? rc->c->O : rc->c->C;
        if (!g->segs && c1 - c0 == ldb && row_step == ldb && co[n - 1] - co[0] == (n - 1) * ldb)
            rc->cv(n * ldb, sc->cbuf, rc->dst16 + co[0], 0);
        else /* classes' rows: in no order, and those padding a class to whole tiles hold nothing */
            for (int64_t i = r0; i < r1; i++)
                if (!g->segs || (i - r0) % MR < tile_mr[(i - r0) / MR])
                    rc->cv(c1 - c0, sc->cbuf + (i - r0) * ldb + c0, rc->dst16 + co[i - r0] + c0, 0);
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

static int pack_panels(const nconv_core *c, const geo *g, nconv_direction dir, const wsrc *w, const job *j,
                       int64_t p0, int64_t p1);

static void row_task(void *arg, int tid, int nthreads) {
    const row_ctx *rc = arg;
    char *scratch = rc->scratch + (size_t)tid * rc->scratch_stride;
    const int64_t rows = rc->g.mc_tiles * MR, KS = rc->g.KS;
    row_scratch sc;
    sc.crow = (float **)scratch;
    sc.a = (const float **)(sc.crow + rows);
    sc.pa = sc.a + rows * KS;
    sc.ao = (int64_t *)sc.a;
    sc.co = (int64_t *)(sc.pa + rows * KS);
    sc.rb = sc.co + rows;
    sc.pbuf = (float *)(sc.rb + KS);
    sc.cbuf = sc.pbuf + nconv__igemm_pack_floats(&rc->g, rc->c->dt);
    int64_t jb = 0, first = 0; /* the job of the last unit, and its first global unit */
    for (int64_t u; (u = nconv__share_claim(rc->shares, tid, nthreads)) >= 0;) {
        if (u < first) jb = first = 0; /* a unit stolen from an earlier share */
        while (first + rc->jobs[jb].units <= u) first += rc->jobs[jb++].units;
        const job *j = &rc->jobs[jb];
        if (!rc->panel_major) {
            row_block(rc, j, u - first, &sc);
            continue;
        }
        const int64_t pg = u - first, p0 = pg * rc->g.panels / rc->pgroups, p1 = (pg + 1) * rc->g.panels / rc->pgroups;
        if (rc->w) rc->finite[tid] &= pack_panels(rc->c, &rc->g, rc->dir, rc->w, j, p0, p1);
        for (int64_t b = 0; b < row_blocks(j, &rc->g); b++)
            row_block(rc, j, b * rc->pgroups + pg, &sc);
    }
    if (rc->flags & NCONV_IGEMM_STREAM) nconv__stream_fence();
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
 * index computed outside it. Returns whether every value packed is finite (where it reads them
 * one at a time; the other fwd paths return 1: pack_panels checks the panel itself). */
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
    if (fwd && nconv__is_16bit(v->dt) && !g->wfold && v->stride[1] == 1) {
        /* The same for 16-bit weights, each column's run widened first (one element at a time
         * this packing cost a third of a deep layer's GEMM). */
        enum { RUN = 256 };
        float wide[NR * RUN];
        const nconv_kernels *k = nconv__kernels();
        const nconv_convert16_fn cv = nconv__convert16(k, v->dt);
        for (int64_t tr = 0; tr < j->ks; tr++)
            for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
                const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
                float *dst = packed + (k0 * j->ks + tr * kcc) * NR;
                for (int64_t r0 = 0; r0 < kcc; r0 += RUN) {
                    const int64_t len = kcc - r0 < RUN ? kcc - r0 : RUN;
                    const uint16_t *run = (const uint16_t *)v->data + col0 + k0 + r0 + w->toff[tr];
                    for (int64_t jj = 0; jj < nc; jj++) cv(len, run + jj * cstride, wide + jj * RUN, 1);
                    k->transpose(nc, len, wide, RUN, dst + r0 * NR, NR);
                }
                if (nc < NR)
                    for (int64_t kk = 0; kk < kcc; kk++)
                        memset(dst + kk * NR + nc, 0, sizeof(float) * (size_t)(NR - nc));
            }
        return 1;
    }
    int oihw16 = fwd && nconv__is_16bit(v->dt) && !g->wfold && j->ks > 1 && v->stride[1] == j->ks;
    for (int64_t t = 0; t < j->ks && oihw16; t++) oihw16 = w->toff[t] == t;
    if (oihw16) {
        /* 16-bit, taps innermost and dense (OIHW): each column's runs of whole channels widened
         * at once, then each tap's 16 columns written as one cache line (element by element,
         * this packing cost a fifth of a deep layer's forward). */
        enum { RUN = 512 };
        float wide[NR * RUN];
        const nconv_kernels *k = nconv__kernels();
        const nconv_convert16_fn cv = nconv__convert16(k, v->dt);
        const int64_t per = RUN / j->ks > 0 ? RUN / j->ks : 1; /* channels per widening */
        for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
            const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
            for (int64_t kb = k0; kb < k0 + kcc; kb += per) {
                const int64_t kn = k0 + kcc - kb < per ? k0 + kcc - kb : per, len = kn * j->ks;
                for (int64_t jj = 0; jj < nc; jj++)
                    cv(len, (const uint16_t *)v->data + col0 + jj * cstride + kb * j->ks, wide + jj * RUN, 1);
                for (int64_t kk = 0; kk < kn; kk++)
                    for (int64_t tr = 0; tr < j->ks; tr++) {
                        float *dst = packed + (k0 * j->ks + tr * kcc + kb + kk - k0) * NR;
                        for (int64_t jj = 0; jj < nc; jj++) dst[jj] = wide[jj * RUN + kk * j->ks + tr];
                        for (int64_t jj = nc; jj < NR; jj++) dst[jj] = 0.0f;
                    }
            }
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
                        const float x = nconv__load_f32(v->data, v->dt, off + jj * cstride);
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

/* Panels [p0, p1) of bwd_d job j, in pack_panel's layout, for f32 and 16-bit weights:
 * KROWS rows of w (output channels) are walked along their length, panel
 * after panel, with all of a row's taps at once. Panel by panel and tap by
 * tap, each run of 16 loads would start in another row of w, kilobytes
 * apart (often a page apart): no prefetcher follows that, and deep layers'
 * megabytes of weights would come at memory latency.
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
    const int64_t base = j->g * g->Og * v->stride[0];
    const size_t esz = nconv_dtype_size(v->dt);
    /* 16-bit weights: a row of channels-last ones widened at once; of dense OIHW ones, a panel's
     * channels with all their taps (one run) widened once per output channel; others element by
     * element */
    const nconv_kernels *kern = nconv__kernels();
    const nconv_convert16_fn cv = nconv__convert16(kern, v->dt);
    int oihw16 = nconv__is_16bit(v->dt) && cs == g->KS && g->KS > 1;
    for (int64_t t = 0; t < g->KS && oihw16; t++) oihw16 = w->toff[t] == t;
    float wide[NR * MAX_TAPS]; /* a panel's channels x taps, when they fit */
    oihw16 = oihw16 && g->KS <= MAX_TAPS;
    float *const packed = (float *)j->w;
    int finite = 1;
    for (int64_t t0 = 0; t0 < j->ks; t0 += TCHUNK) {
        const int64_t nt = j->ks - t0 < TCHUNK ? j->ks - t0 : TCHUNK;
        int64_t toff[TCHUNK]; /* offsets of the class's taps t0 .. t0 + nt */
        for (int64_t t = 0; t < nt; t++) toff[t] = w->toff[class_tap(c, j, t0 + t)];
        /* f32 weights whose taps lie one after another in each channel (OIHW at stride 1): a
         * panel's [channel][tap] block per output channel moved by the transpose kernel in
         * vectors, not gathered a tap at a time by 16 scalar loads (a tile costs about as much
         * for one tap as for 16: short runs keep the gather) */
        int rows_of_taps = v->dt == NCONV_F32 && cs > 1 && nt >= 4;
        for (int64_t t = 0; t < nt && rows_of_taps; t++) rows_of_taps = toff[t] == toff[0] + t;
        for (int64_t k0 = 0; k0 < g->kc; k0 += g->kchunk) {
            const int64_t kcc = g->kc - k0 < g->kchunk ? g->kc - k0 : g->kchunk;
            for (int64_t kb = k0; kb < k0 + kcc; kb += KROWS) {
                const int64_t ke = kb + KROWS < k0 + kcc ? kb + KROWS : k0 + kcc;
                for (int64_t p = p0; p < p1; p++) {
                    const int64_t nc = g->Cg - p * NR < NR ? g->Cg - p * NR : NR;
                    float *const pp = packed + p * j->ks * g->kc * NR + k0 * j->ks * NR;
                    for (int64_t k = kb; k < ke; k++) {
                        const int64_t row = base + k * v->stride[0] + p * NR * cs; /* the panel's first channel */
                        if (rows_of_taps) {
                            const float *src = (const float *)v->data + row + toff[0];
                            float *dst = pp + (t0 * kcc + k - k0) * NR;
                            kern->transpose(nc, nt, src, cs, dst, kcc * NR);
                            for (int64_t jj = 0; jj < nc; jj++) finite &= nconv__f32_all_finite(src + jj * cs, nt);
                            for (int64_t t = 0; t < nt && nc < NR; t++)
                                memset(dst + t * kcc * NR + nc, 0, sizeof(float) * (size_t)(NR - nc));
                            continue;
                        }
                        if (oihw16) cv(nc * g->KS, (const uint16_t *)v->data + row, wide, 1);
                        for (int64_t t = 0; t < nt; t++) {
                            float *dst = pp + ((t0 + t) * kcc + k - k0) * NR;
                            const int64_t off = row + toff[t];
                            if (ahead && k + ahead < g->Og)
                                __builtin_prefetch((const char *)v->data + esz * (size_t)(off + ahead * v->stride[0]));
                            if (oihw16) {
                                for (int64_t jj = 0; jj < nc; jj++) dst[jj] = wide[jj * g->KS + toff[t]];
                            } else if (v->dt == NCONV_F32) {
                                const float *src = (const float *)v->data + off;
                                for (int64_t jj = 0; jj < nc; jj++) dst[jj] = src[jj * cs];
                            } else if (cs == 1) {
                                cv(nc, (const uint16_t *)v->data + off, dst, 1);
                            } else {
                                for (int64_t jj = 0; jj < nc; jj++)
                                    dst[jj] = nconv__load_f32(v->data, v->dt, off + jj * cs);
                            }
                            for (int64_t jj = 0; jj < nc; jj++) finite &= isfinite(dst[jj]) != 0;
                            for (int64_t jj = nc; jj < NR; jj++) dst[jj] = 0.0f;
                        }
                    }
                }
            }
        }
    }
    return finite;
}

/* A packed panel's rows (NR floats each, bf16 values, rows 2i and 2i + 1 a pair of k) narrowed in
 * place into bf16_igemm_np's pairs: row 2i's column jj and row 2i + 1's side by side. Each pair's
 * floats are read before its bf16 values, which lie at or before them, are written. */
static void pair_rows(float *panel, int64_t rows) {
    uint16_t *d = (uint16_t *)panel;
    for (int64_t i = 0; i < rows; i += 2) {
        float lo[NR], hi[NR];
        memcpy(lo, panel + i * NR, sizeof lo);
        memcpy(hi, panel + (i + 1) * NR, sizeof hi);
        for (int64_t jj = 0; jj < NR; jj++)
            d[i * NR + 2 * jj] = nconv__f32_to_bf16(lo[jj]), d[i * NR + 2 * jj + 1] = nconv__f32_to_bf16(hi[jj]);
    }
}

/* Panels [p0, p1) of job j; returns whether every value packed is finite. */
static int pack_panels(const nconv_core *c, const geo *g, nconv_direction dir, const wsrc *w, const job *j, int64_t p0,
                       int64_t p1) {
    int finite = 1;
    if (dir == NCONV_DIR_BWD_D && (w->v->dt == NCONV_F32 || nconv__is_16bit(w->v->dt)))
        finite = pack_bwd_d_rows(c, g, w, j, p0, p1);
    else
        for (int64_t p = p0; p < p1; p++) {
            finite &= pack_panel(c, g, dir, w, j, p, (float *)j->w);
            /* fwd: its flag from the packed panel, in f32 still (before bf16 pairs) */
            const int64_t n = j->ks * g->kc * NR;
            if (j->wfin) j->wfin[p] = (float)nconv__f32_all_finite(j->w + p * n, n);
        }
    for (int64_t p = p0; g->dot16 && p < p1; p++) pair_rows((float *)j->w + p * j->ks * g->kc * NR, j->ks * g->kc);
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
            j->rows = g->segs ? g->seg_rows : c->N * j->cnt[0] * j->cnt[1] * j->cnt[2];
            j->w = packed;
            packed += g->panels * j->ks * g->Og * NR;
        }
    return n;
}

int64_t nconv__igemm_make_jobs(const nconv_core *c, const geo *g, nconv_direction dir, float *packed, int wfin,
                               job *jobs) {
    if (dir == NCONV_DIR_BWD_D) return make_bwd_d_jobs(c, g, packed, jobs);
    for (int64_t gi = 0; gi < c->G; gi++) {
        job *j = &jobs[gi];
        memset(j, 0, sizeof *j);
        j->g = gi, j->rows = g->segs ? g->seg_rows : c->N * g->OS, j->ks = g->ks_rows;
        j->w = packed + gi * g->panels * g->ks_rows * g->kc * NR;
        j->wfin = wfin ? packed + c->G * g->panels * g->ks_rows * g->kc * NR + gi * g->panels : NULL;
    }
    return c->G;
}

void nconv__igemm_pack_jobs(const nconv_exec *e, const geo *g, const wsrc *w, const job *jobs, int64_t njobs,
                            int *finite) {
    for (int i = 0; i < NCONV_MAX_THREADS; i++) finite[i] = 1;
    pack_ctx pc = {e->c, g, e->dir, w, jobs, njobs, finite};
    nconv__parallel(e, pack_task, &pc);
}

nconv_status nconv__igemm_rows_run(const nconv_exec *e, const geo *gp, const igemm_bufs *b) {
    const nconv_core *c = e->c;
    const nconv_direction dir = e->dir;
    const int threads = e->threads;
    geo g = *gp;
    const ws_sizes s = b->s;
    const nconv_kernels *k = e->k;
    const int prepacked = b->prepacked;
    float *xb = b->xb, *yb = b->yb, *packed = b->packed, *init = b->init, *zero = b->zero;
    char *scratch = b->scratch;
    const float *src = dir == NCONV_DIR_FWD ? b->x : b->y;
    const uint16_t *src16 = b->src16;
    /* Row GEMM: fwd writes y, bwd_d writes dx; the epilogue goes to that output. */
    const nconv_view *out = dir == NCONV_DIR_FWD ? e->y : e->x;
    const nconv_epi *epi = e->epi;
    const wsrc ws_ = {e->w, b->toff};
    /* NCHW outputs with dense planes whose tile rows are consecutive pixels (every stride for fwd,
     * stride 1 for bwd_d): f32 ones of one reduction block are written in place by the
     * plane-store kernel, 16-bit ones narrowed from a row block's f32 rows through a transpose;
     * 16-bit channels-last ones narrowed from those rows as they are. No buffer of the output,
     * no pass over it afterwards. */
    const int64_t *osz = dir == NCONV_DIR_FWD ? c->out : c->in;
    const int planar = !(epi && epi->z) && (dir == NCONV_DIR_FWD || (c->s[0] == 1 && c->s[1] == 1 && c->s[2] == 1)) &&
                       nconv__view_is_planar(out) && !nconv__view_is_nxc(out);
    const int planes16 = planar && nconv__is_16bit(out->dt);
    if (planes16) g.segs = 0; /* its transposes take a block's rows as runs of pixels */
    const int dst16 = planes16 || (nconv__is_16bit(out->dt) && nconv__view_is_nxc(out) && !(epi && epi->z));
    int fuse = 0;
    float *dst = dst16 ? NULL : nconv__nxc_output(out, epi, dir == NCONV_DIR_FWD ? yb : xb, &fuse);
    const int planes = !fuse && planar && out->dt == NCONV_F32 && g.kchunk == g.kc && !g.dot16 && !g.segs;
    const int in_kernel = fuse || planes || dst16; /* bias and relu applied by the kernel */
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
    const int64_t njobs = nconv__igemm_make_jobs(c, &g, dir, packed, g.segs != 0, jobs);
    /* Weights of megabytes with few rows (deep layers): packed all at once they would go out
     * to memory and every row block would read them back. Panel-major, a unit packs a range
     * of panels (or, prepacked, reads it) and runs every row over them while they are in L2. */
    const int64_t panel_bytes = (int64_t)sizeof(float) * g.ks_rows * g.kc * NR;
    const int panel_major = nconv__igemm_panel_major(c, &g);
    int finite[NCONV_MAX_THREADS]; /* nconv__parallel runs at most this many threads */
    for (int i = 0; i < NCONV_MAX_THREADS; i++) finite[i] = 1;
    if (!panel_major && !prepacked) {
        nconv__igemm_pack_jobs(e, &g, &ws_, jobs, njobs, finite);
        if (dir == NCONV_DIR_BWD_D && !nconv__igemm_all_set(finite)) return (nconv_status)NCONV__DECLINE_W;
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
    /* Large outputs (NCONV_STREAM_OUTPUT_BYTES) go out with non-temporal stores, unless each
     * kernel call is a short reduction whose stores would outpace the write combining. Those get
     * their lines prefetched for writing. */
    const size_t out_floats = (size_t)(c->N * (dir == NCONV_DIR_FWD ? g.OS * c->O : g.IS * c->C));
    const int big = !planes && !dst16 && out_floats * sizeof(float) >= NCONV_STREAM_OUTPUT_BYTES;
    const int stream = big && g.ks_rows * g.kc >= 32 && g.rows_cols % 8 == 0 &&
                       (dir == NCONV_DIR_FWD ? c->O : c->C) % 8 == 0 && (uintptr_t)dst % 32 == 0;
    const int store_flag = stream ? NCONV_IGEMM_STREAM : big ? NCONV_IGEMM_PREFETCH : 0;
    nconv_share *shares = nconv__arena_take(e->ws, s.shares);
    if (!shares) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    /* channels-last rows of a pointwise layer in one reduction block: f32 ones read and written
     * in place, rows of 256 channels and more with the next tile fetched by the kernel
     * (prefetch_a); 16-bit ones widened a block at a time and narrowed by the kernel (not on bf16
     * pairs; NCHW 16-bit outputs go through a transpose), from 256 channels on through the row
     * pointers and their packing (see row_block) */
    seg segs[MAX_SEGS];
    int64_t seg_rows;
    if (g.segs) nconv__igemm_segments(c, dir, segs, &seg_rows);
    const int rows = g.pointwise && !g.dot16 && !planes16 && !planes && g.kchunk >= g.kc &&
                     (!g.prefetch_a || (!src16 && !dst16));
    row_ctx rc = {.c = c,
                  .dir = dir,
                  .g = g,
                  .k = k,
                  .src = src16 ? NULL : src,
                  .dst = dst,
                  .src16 = src16,
                  .dst16 = dst16 ? out->data : NULL,
                  .planes16 = planes16,
                  .cv = nconv__convert16(k, c->dt),
                  .init = init,
                  .zero = zero,
                  .flags = (in_kernel && epi && epi->relu ? NCONV_IGEMM_RELU : 0) | store_flag,
                  .rows = rows,
                  .segs = segs,
                  .planes = planes ? (float *)out->data : NULL,
                  .pimg = out->stride[0],
                  .pch = out->stride[1],
                  .S = osz[0] * osz[1] * osz[2],
                  .jobs = jobs,
                  .njobs = njobs,
                  .total_cost = total,
                  .shares = shares,
                  .pgroups = pgroups,
                  .scratch = scratch,
                  .scratch_stride = nconv__ws_round(s.scratch),
                  .panel_major = panel_major,
                  .w = prepacked ? NULL : &ws_,
                  .finite = finite};
    const int width = nconv__parallel_width(e);
    int64_t u0 = 0; /* each share ends where the next begins: first_unit once per boundary */
    for (int t = 0; t < width; t++) {
        atomic_init(&shares[t].next, u0);
        shares[t].end = u0 = first_unit(&rc, t + 1, width);
    }
    nconv__parallel(e, row_task, &rc);
    if (g.dot16 && e->path) *e->path = g.segs ? "bf16 pairs, tap classes" : "bf16 pairs";
    if (rows && e->path) *e->path = "pointwise rows";
    if (g.segs && !g.dot16 && e->path) *e->path = "tap classes";
    /* found while packing: the next algorithm writes every output again (z may not alias it) */
    if (dir == NCONV_DIR_BWD_D && panel_major && !nconv__igemm_all_set(finite)) return (nconv_status)NCONV__DECLINE_W;
    if (!in_kernel) nconv__scatter_nxc_f32(e, out, dst, epi);
    return NCONV_OK;
}
