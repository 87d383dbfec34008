/*
 * Algorithm "depthwise": groups == in_channels == out_channels, on
 * channels-last f32 data with channels as the vector dimension.
 *   fwd:   y[p][c]  = sum_t x[pix(p, t)][c] * w[c][t]
 *   bwd_d: dx[q][c] = sum_t dy[pix'(q, t)][c] * w[c][t]   (a gather: taps whose
 *          output pixel exists; zero padding only)
 *   bwd_w: dw[c][t] = sum_p dy[p][c] * x[pix(p, t)][c]
 * Each row of output pixels (of dx for bwd_d) is one call of a run kernel
 * (dwrun; bwd_w: dwacc, whose tap sums stay in registers along the row): the
 * kernel reads the K0 x K1 input rows the row needs (a row of zeros for rows
 * in padding) and zeros for columns outside them; bwd_d with W stride s, a
 * run per phase (dx columns of one residue mod s). Pixels that padding modes
 * other than zeros map back into the row, and bwd_d with W strides over
 * MAX_PHASES, take tap pointers pixel by pixel (dwconv, vmacc).
 * Threads split rows (fwd, bwd_d) or channel blocks (bwd_w); every output
 * is summed in a fixed order, so results do not depend on the thread count.
 *
 * Data that is not channels-last f32 (NCHW, other dtypes, views) is copied
 * channels-last, or, where planes pay (rows of 28 pixels or more, 9 taps or
 * fewer), takes the plane path instead, with no layout change: one channel
 * at a time, its input (x, or dy for bwd_d) is copied into a small padded volume (padding
 * modes applied, W split into stride phases so every tap reads a contiguous
 * run), and each output row is a sum over taps of shifted rows of it
 * (pixels are the vector dimension). bwd_d takes this path for stride 1
 * only (flipped taps over dy padded by the kernel extent).
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { CBLOCK = 16 }; /* bwd_w: threads take whole blocks of this many channels (a cache line) */

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
    if (nconv__core_kernel_spatial(c) > 65536) { /* per-thread tap pointers */
        if (why_not) *why_not = "kernels of more than 65536 taps";
        return 0;
    }
    return 1;
}

typedef struct dw_sizes {
    size_t x, y, w, init, zero, scratch;
} dw_sizes;

/* bwd_d with W stride s: the dx columns of each residue mod s are one run
 * (dwrun writing every s-th pixel), over the taps of that residue (wph, the
 * taps packed by phase); for strides up to MAX_PHASES. */
enum { MAX_PHASES = 16 };

static int64_t gcd(int64_t a, int64_t b) {
    while (b) {
        const int64_t r = a % b;
        a = b, b = r;
    }
    return a;
}

static int use_phases(const nconv_core *c, nconv_direction dir) {
    return dir == NCONV_DIR_BWD_D && c->s[2] > 1 && c->s[2] <= MAX_PHASES;
}

static size_t sizes(const nconv_core *c, nconv_direction dir, int threads, unsigned copies, dw_sizes *s) {
    const int64_t KS = nconv__core_kernel_spatial(c);
    s->x = copies & NCONV_COPY_X ? sizeof(float) * (size_t)(c->N * nconv__core_in_spatial(c) * c->C) : 0;
    s->y = copies & NCONV_COPY_Y ? sizeof(float) * (size_t)(c->N * nconv__core_out_spatial(c) * c->C) : 0;
    /* wt [KS][C] (then the bwd_w sums), and its taps by phase */
    s->w = sizeof(float) * (size_t)(KS * c->C) * (use_phases(c, dir) ? 2 : 1);
    /* zero: a row of zeros for rows in padding */
    const int64_t cols = c->in[2] > c->out[2] ? c->in[2] : c->out[2];
    s->init = sizeof(float) * (size_t)c->C;
    s->zero = sizeof(float) * (size_t)(cols * c->C);
    /* tap pointers, row bases and runs per (k0, k1), the column of each (pixel column, k2) */
    s->scratch = sizeof(float *) * (size_t)(KS + 2 * c->k[0] * c->k[1]) + sizeof(int64_t) * (size_t)(cols * c->k[2]);
    return nconv__ws_round(s->x) + nconv__ws_round(s->y) + nconv__ws_round(s->w) + nconv__ws_round(s->init) +
           nconv__ws_round(s->zero) + (size_t)threads * nconv__ws_round(s->scratch);
}


typedef struct dw_ctx {
    const nconv_core *c;
    nconv_direction dir;
    const nconv_kernels *k;
    const float *x, *dy, *wt, *init, *zero;
    float *out; /* y (fwd), dx (bwd_d), dw sums [KS][C] (bwd_w) */
    int relu;
    const float *wph;                                      /* phases: taps by phase, [K01][taps][C] each */
    int64_t ph_tap[MAX_PHASES], ph_taps[MAX_PHASES], ph_off[MAX_PHASES]; /* first tap, taps, offset in wph */
    char *scratch;
    size_t scratch_stride;
} dw_ctx;

/* Element offset of tap t (kernel order) of channel ch in the weights [C, 1, k...]. */
static inline int64_t w_offset(const nconv_core *c, const nconv_view *w, int64_t ch, int64_t t) {
    const int64_t k0 = t / (c->k[1] * c->k[2]), k1 = (t / c->k[2]) % c->k[1], k2 = t % c->k[2];
    return ch * w->stride[0] + k0 * w->stride[2] + k1 * w->stride[3] + k2 * w->stride[4];
}

/* bwd_d: the output coordinate that input coordinate num / s feeds, or -1. */
static inline int64_t out_index(int64_t num, int64_t s, int64_t out) {
    return num >= 0 && num % s == 0 && num / s < out ? num / s : -1;
}

/* Tap pointers of pixel u of image n: input pixels of output pixel u
 * (gather = 1, fwd and bwd_w), or the dy pixels that input pixel u feeds
 * (gather = 0, bwd_d); d->zero where there is none. Split in two tables so
 * that a pixel costs lookups only: row bases per (k0, k1), refreshed when a
 * pixel row starts, and the column of each (u2, k2), built once per task. */
static int64_t axis_index(const dw_ctx *d, int gather, int ax, int64_t u, int64_t k) {
    const nconv_core *c = d->c;
    return gather ? nconv__map_index(u * c->s[ax] - c->pb[ax] + k * c->d[ax], c->in[ax], c->mode)
                  : out_index(u + c->pb[ax] - k * c->d[ax], c->s[ax], c->out[ax]);
}

static void column_table(const dw_ctx *d, int gather, int64_t *col) {
    const nconv_core *c = d->c;
    const int64_t n2 = gather ? c->out[2] : c->in[2];
    for (int64_t u2 = 0; u2 < n2; u2++)
        for (int64_t k2 = 0; k2 < c->k[2]; k2++) col[u2 * c->k[2] + k2] = axis_index(d, gather, 2, u2, k2);
}

static void row_bases(const dw_ctx *d, int gather, int64_t n, const int64_t *u, const float **base) {
    const nconv_core *c = d->c;
    const int64_t C = c->C;
    const int64_t *other = gather ? c->in : c->out;
    const float *img = gather ? d->x + n * nconv__core_in_spatial(c) * C : d->dy + n * nconv__core_out_spatial(c) * C;
    for (int64_t k0 = 0; k0 < c->k[0]; k0++) {
        const int64_t i0 = axis_index(d, gather, 0, u[0], k0);
        for (int64_t k1 = 0; k1 < c->k[1]; k1++) {
            const int64_t i1 = axis_index(d, gather, 1, u[1], k1);
            base[k0 * c->k[1] + k1] = i0 < 0 || i1 < 0 ? NULL : img + (i0 * other[1] + i1) * other[2] * C;
        }
    }
}

static inline void tap_rows(const dw_ctx *d, const float *const *base, const int64_t *col, int64_t u2,
                            const float **rows) {
    const nconv_core *c = d->c;
    const int64_t K01 = c->k[0] * c->k[1], K2 = c->k[2], C = c->C;
    const int64_t *cu = col + u2 * K2;
    for (int64_t r = 0, t = 0; r < K01; r++)
        for (int64_t k2 = 0; k2 < K2; k2++, t++) rows[t] = !base[r] || cu[k2] < 0 ? d->zero : base[r] + cu[k2] * C;
}

/* The run of a row's pixels [*lo, *hi) that one dwrun / dwacc call covers
 * (*g: from pixel *lo); the others take tap pointers one by one. With zero
 * padding that is the whole row (the kernels read zeros outside it); with
 * other padding modes the pixels whose taps all fall inside the row they
 * read (x for fwd and bwd_w, dy for bwd_d). bwd_d with W stride s takes runs
 * by phase (phase_runs), up to MAX_PHASES, pixel by pixel beyond. */
static void row_run(const nconv_core *c, nconv_direction dir, int64_t *lo, int64_t *hi, nconv_dw_run *g) {
    const int bwd_d = dir == NCONV_DIR_BWD_D;
    const int64_t n = bwd_d ? c->in[2] : c->out[2];
    /* pixels s (dy: 1) columns apart, taps d (dy: -d) apart, from pixel 0's tap 0 */
    *g = (nconv_dw_run){bwd_d ? c->pb[2] : -c->pb[2], bwd_d ? 1 : c->s[2], bwd_d ? -c->d[2] : c->d[2],
                        bwd_d ? c->out[2] : c->in[2], 1};
    *lo = 0, *hi = n;
    if (bwd_d && c->s[2] != 1) *hi = 0;
    else if (c->mode != NCONV_PAD_ZEROS) nconv__dw_inside_range(g, n, c->k[2], lo, hi);
    g->first += *lo * g->step;
}

/* Tap k of a row feeds dx column i where i + pb - k d is a multiple of s:
 * phase (k d) mod s. A phase's taps are evenly spaced, s / gcd(s, d) apart,
 * their dy columns d / gcd(s, d) apart. wph holds each phase's taps, rows
 * (k0, k1) outer. */
static void pack_phases(const nconv_core *c, const float *wt, float *wph, dw_ctx *d) {
    const int64_t s = c->s[2], K01 = c->k[0] * c->k[1], K2 = c->k[2], C = c->C;
    int64_t off = 0;
    for (int64_t ph = 0; ph < s; ph++) {
        d->ph_tap[ph] = -1, d->ph_taps[ph] = 0, d->ph_off[ph] = off;
        for (int64_t k = 0; k < K2; k++) {
            if ((k * c->d[2]) % s != ph) continue;
            if (d->ph_tap[ph] < 0) d->ph_tap[ph] = k;
            d->ph_taps[ph]++;
        }
        const int64_t spacing = s / gcd(s, c->d[2]);
        for (int64_t r = 0; r < K01; r++)
            for (int64_t m = 0; m < d->ph_taps[ph]; m++)
                memcpy(wph + off + (r * d->ph_taps[ph] + m) * C, wt + (r * K2 + d->ph_tap[ph] + m * spacing) * C,
                       sizeof(float) * (size_t)C);
        off += K01 * d->ph_taps[ph] * C;
    }
    d->wph = wph;
}

/* One dx row of bwd_d with W stride s > 1: a run per phase. */
static void phase_runs(const dw_ctx *d, const float *const *runs, float *out) {
    const nconv_core *c = d->c;
    const int64_t s = c->s[2], C = c->C, K01 = c->k[0] * c->k[1], g = gcd(s, c->d[2]);
    for (int64_t ph = 0; ph < s; ph++) {
        /* the dx columns i with (i + pb) mod s = ph: the first, and how many */
        const int64_t i0 = ((ph - c->pb[2]) % s + s) % s;
        if (i0 >= c->in[2]) continue;
        const int64_t n = (c->in[2] - i0 + s - 1) / s, k = d->ph_tap[ph] < 0 ? 0 : d->ph_tap[ph];
        const nconv_dw_run run = {(i0 + c->pb[2] - k * c->d[2]) / s, 1, -(c->d[2] / g), c->out[2], s};
        d->k->dwrun(C, C, n, K01, d->ph_taps[ph], runs, &run, d->wph + d->ph_off[ph], d->init, out + i0 * C, d->relu);
    }
}

static void dw_task(void *arg, int tid, int nthreads) {
    const dw_ctx *d = arg;
    const nconv_core *c = d->c;
    const int64_t C = c->C, KS = nconv__core_kernel_spatial(c), K01 = c->k[0] * c->k[1], K2 = c->k[2];
    const float **rows = (const float **)(d->scratch + (size_t)tid * d->scratch_stride);
    const float **base = rows + KS, **runs = base + K01;
    int64_t *col = (int64_t *)(runs + K01);
    const int bwd_d = d->dir == NCONV_DIR_BWD_D;
    column_table(d, !bwd_d, col);
    const int64_t *sz = bwd_d ? c->in : c->out; /* the pixels computed: dx (bwd_d), else y / dy */
    const int64_t W = sz[2], R = c->N * sz[0] * sz[1];
    int64_t lo, hi;
    nconv_dw_run g;
    row_run(c, d->dir, &lo, &hi, &g);
    int64_t b, e, c0 = 0, c1 = C;
    if (d->dir == NCONV_DIR_BWD_W) { /* channel blocks: each channel sums its pixels in one order */
        nconv__split(nconv__div_up(C, CBLOCK), tid, nthreads, &b, &e);
        c0 = b * CBLOCK, c1 = e * CBLOCK < C ? e * CBLOCK : C;
        if (c0 >= c1) return;
        for (int64_t t = 0; t < KS; t++) memset(d->out + t * C + c0, 0, sizeof(float) * (size_t)(c1 - c0));
        b = 0, e = R;
    } else {
        nconv__split(R, tid, nthreads, &b, &e);
    }
    for (int64_t q = b; q < e; q++) {
        const int64_t n = q / (sz[0] * sz[1]), u[3] = {(q / sz[1]) % sz[0], q % sz[1], 0};
        row_bases(d, !bwd_d, n, u, base);
        for (int64_t r = 0; r < K01; r++) runs[r] = (base[r] ? base[r] : d->zero) + c0;
        if (d->dir == NCONV_DIR_BWD_W) {
            /* Taps in padding add dy * 0 too: an Inf or NaN in dy makes dw NaN, as in PyTorch. */
            const float *dy = d->dy + q * W * C + c0;
            for (int64_t j = 0; j < W; j++) {
                if (j == lo && hi > lo) { /* the run */
                    j = hi - 1;
                    continue;
                }
                tap_rows(d, base, col, j, rows);
                for (int64_t t = 0; t < KS; t++) d->k->vmacc(c1 - c0, dy + j * C, rows[t] + c0, d->out + t * C + c0);
            }
            if (hi > lo) d->k->dwacc(c1 - c0, C, hi - lo, K01, K2, dy + lo * C, runs, &g, d->out + c0);
            continue;
        }
        float *out = d->out + q * W * C;
        if (d->wph) {
            phase_runs(d, runs, out);
            continue;
        }
        for (int64_t j = 0; j < W; j++) {
            if (j == lo && hi > lo) {
                j = hi - 1;
                continue;
            }
            tap_rows(d, base, col, j, rows);
            d->k->dwconv(C, KS, rows, d->wt, d->init, out + j * C, d->relu);
        }
        if (hi > lo) d->k->dwrun(C, C, hi - lo, K01, K2, runs, &g, d->wt, d->init, out + lo * C, d->relu);
    }
}

/* ------------------------------------------------------------ plane path */

typedef struct plane_geo {
    int64_t P[3];   /* padded volume: the coordinates the windows sweep */
    int64_t lo[3];  /* input coordinate of padded index 0 */
    int64_t src[3]; /* size of the padded input (x, or dy for bwd_d) */
    int64_t ph, Wq; /* W stride phases and the width of each */
    int64_t rows[2], rowlen; /* output rows (dims 0, 1) and their length */
    size_t vol, scratch; /* floats of the volume; bytes of per-thread scratch */
} plane_geo;

static int plane_applies(const nconv_core *c, nconv_direction dir) {
    if (dir != NCONV_DIR_BWD_D) return 1;
    return c->s[0] == 1 && c->s[1] == 1 && c->s[2] == 1 && c->mode == NCONV_PAD_ZEROS;
}

static void plane_geometry(const nconv_core *c, nconv_direction dir, plane_geo *g) {
    const int bwd_d = dir == NCONV_DIR_BWD_D;
    for (int a = 0; a < 3; a++) {
        const int64_t ext = (c->k[a] - 1) * c->d[a];
        if (bwd_d) { /* dx[i] = sum_k w[k] * dy[i + pb - k d]: dy rows pb - ext .. in - 1 + pb */
            g->lo[a] = c->pb[a] - ext, g->P[a] = c->in[a] + ext, g->src[a] = c->out[a];
        } else {
            g->lo[a] = -c->pb[a], g->P[a] = (c->out[a] - 1) * c->s[a] + ext + 1, g->src[a] = c->in[a];
        }
    }
    g->ph = bwd_d ? 1 : c->s[2];
    g->Wq = nconv__div_up(g->P[2], g->ph);
    const int64_t *o = bwd_d ? c->in : c->out;
    g->rows[0] = o[0], g->rows[1] = o[1], g->rowlen = o[2];
    g->vol = (size_t)(g->ph * g->P[0] * g->P[1] * g->Wq);
    const int64_t KS = nconv__core_kernel_spatial(c), OS = o[0] * o[1] * o[2];
    /* volume, tap pointers and offsets, W index map, the output rows of one r0 (at the volume's pitch when
     * flat), a dense dy plane (bwd_w), taps or tap sums */
    g->scratch = nconv__ws_round(sizeof(float) * g->vol) + 2 * nconv__ws_round(sizeof(float *) * (size_t)KS) +
                 nconv__ws_round(sizeof(int64_t) * (size_t)g->P[2]) + nconv__ws_round(sizeof(float) * (size_t)(g->rows[1] * g->Wq)) +
                 nconv__ws_round(sizeof(float) * (size_t)(dir == NCONV_DIR_BWD_W ? OS : 0)) +
                 nconv__ws_round(sizeof(float) * (size_t)KS);
}

typedef struct plane_ctx {
    const nconv_core *c;
    nconv_direction dir;
    const nconv_kernels *k;
    const plane_geo *g;
    const nconv_view *in, *out, *dy; /* in: read into the volume; out: written; dy: bwd_w's other operand */
    const nconv_view *w;             /* weights [C, 1, k...] */
    const nconv_epi *epi;
    char *scratch;
    size_t stride;
} plane_ctx;

static inline double view_at(const nconv_view *v, int64_t n, int64_t ch, int64_t i, int64_t j, int64_t k) {
    return nconv__load(v->data, v->dt, n * v->stride[0] + ch * v->stride[1] + i * v->stride[2] + j * v->stride[3] +
                                           k * v->stride[4]);
}

/* Short runs (a plane row): fixed-size pieces the compiler inlines, where a loop became a
 * call to memmove that cost more than the copy. */
static inline void copy_run(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) memcpy(dst + i, src + i, 8 * sizeof(float));
    for (; i < n; i++) dst[i] = src[i];
}

/* The padded volume of channel ch of image n: vol[phase][i][j][q] holds
 * padded coordinate (i, j, q * ph + phase). wmap: the input column of each
 * padded column (-1: zero), the same for every row. */
static void fill_volume(const plane_ctx *pc, int64_t n, int64_t ch, float *vol, const int64_t *wmap, int64_t run_lo,
                        int64_t run_hi) {
    const plane_geo *g = pc->g;
    const nconv_view *v = pc->in;
    const nconv_padding_mode mode = pc->dir == NCONV_DIR_BWD_D ? NCONV_PAD_ZEROS : pc->c->mode;
    const int fast = v->dt == NCONV_F32 && (v->stride[4] == 1 || g->src[2] == 1);
    const size_t phase_stride = (size_t)(g->P[0] * g->P[1] * g->Wq);
    const int64_t P2 = g->P[2], ph = g->ph;
    for (int64_t i = 0; i < g->P[0]; i++) {
        const int64_t si = nconv__map_index(i + g->lo[0], g->src[0], mode);
        for (int64_t j = 0; j < g->P[1]; j++) {
            const int64_t sj = nconv__map_index(j + g->lo[1], g->src[1], mode);
            float *row = vol + (i * g->P[1] + j) * g->Wq;
            if (si < 0 || sj < 0) {
                for (int64_t p = 0; p < ph; p++) memset(row + p * phase_stride, 0, sizeof(float) * (size_t)g->Wq);
                continue;
            }
            const int64_t off = n * v->stride[0] + ch * v->stride[1] + si * v->stride[2] + sj * v->stride[3];
            if (!fast) {
                for (int64_t q = 0; q < P2; q++)
                    row[(q % ph) * phase_stride + q / ph] =
                        wmap[q] < 0 ? 0.0f : (float)nconv__load(v->data, v->dt, off + wmap[q] * v->stride[4]);
                continue;
            }
            const float *src = (const float *)v->data + off;
            if (ph == 1) { /* the columns that read the row in order are one copy (a loop: rows are short,
                            * and a call to memcpy per row cost more than the copy) */
                for (int64_t q = 0; q < run_lo; q++) row[q] = wmap[q] < 0 ? 0.0f : src[wmap[q]];
                if (run_hi > run_lo) copy_run(row + run_lo, src + wmap[run_lo], run_hi - run_lo);
                for (int64_t q = run_hi; q < P2; q++) row[q] = wmap[q] < 0 ? 0.0f : src[wmap[q]];
                continue;
            }
            /* Stride phases: columns q -> phase q % ph, slot q / ph. Inside [run_lo, run_hi)
             * the columns read the row in order, so there the copy needs no map. */
            for (int64_t q = 0; q < run_lo; q++) row[(q % ph) * phase_stride + q / ph] = wmap[q] < 0 ? 0.0f : src[wmap[q]];
            for (int64_t q = run_hi > run_lo ? run_hi : run_lo; q < P2; q++)
                row[(q % ph) * phase_stride + q / ph] = wmap[q] < 0 ? 0.0f : src[wmap[q]];
            if (run_hi > run_lo) {
                const float *s0 = src + wmap[run_lo] - run_lo; /* column q reads s0[q] */
                if (ph == 2) {
                    float *d0 = row, *d1 = row + phase_stride;
                    int64_t q = run_lo;
                    if (q & 1) d1[q / 2] = s0[q], q++;
                    for (; q + 1 < run_hi; q += 2) d0[q / 2] = s0[q], d1[q / 2] = s0[q + 1];
                    if (q < run_hi) d0[q / 2] = s0[q];
                } else {
                    for (int64_t q = run_lo; q < run_hi; q++) row[(q % ph) * phase_stride + q / ph] = s0[q];
                }
            }
        }
    }
}

/* Offset of each tap's run from the start of an output row's window. */
static void plane_tap_offsets(const nconv_core *c, nconv_direction dir, const plane_geo *g, int64_t *toff) {
    const int bwd_d = dir == NCONV_DIR_BWD_D;
    const int64_t phase_stride = g->P[0] * g->P[1] * g->Wq;
    int64_t t = 0;
    for (int64_t k0 = 0; k0 < c->k[0]; k0++)
        for (int64_t k1 = 0; k1 < c->k[1]; k1++)
            for (int64_t k2 = 0; k2 < c->k[2]; k2++, t++) {
                /* fwd, bwd_w: padded coordinate r s + k d; bwd_d: i + (k_max - k) d (flipped taps) */
                const int64_t i = (bwd_d ? c->k[0] - 1 - k0 : k0) * c->d[0];
                const int64_t j = (bwd_d ? c->k[1] - 1 - k1 : k1) * c->d[1];
                const int64_t q = (bwd_d ? c->k[2] - 1 - k2 : k2) * c->d[2];
                toff[t] = (q % g->ph) * phase_stride + (i * g->P[1] + j) * g->Wq + q / g->ph;
            }
}

static inline void plane_taps(const plane_geo *g, const nconv_core *c, int bwd_d, const float *vol, const int64_t *toff,
                              int64_t KS, int64_t r0, int64_t r1, const float **src) {
    const int64_t i = bwd_d ? r0 : r0 * c->s[0], j = bwd_d ? r1 : r1 * c->s[1];
    const float *base = vol + (i * g->P[1] + j) * g->Wq;
    for (int64_t t = 0; t < KS; t++) src[t] = base + toff[t];
}

static void plane_task(void *arg, int tid, int nthreads) {
    const plane_ctx *pc = arg;
    const nconv_core *c = pc->c;
    const plane_geo *g = pc->g;
    const int64_t C = c->C, KS = nconv__core_kernel_spatial(c);
    char *sp = pc->scratch + (size_t)tid * pc->stride;
    float *vol = (float *)sp;
    sp += nconv__ws_round(sizeof(float) * g->vol);
    const float **src = (const float **)sp;
    sp += nconv__ws_round(sizeof(float *) * (size_t)KS);
    int64_t *toff = (int64_t *)sp;
    sp += nconv__ws_round(sizeof(float *) * (size_t)KS);
    int64_t *wmap = (int64_t *)sp;
    sp += nconv__ws_round(sizeof(int64_t) * (size_t)g->P[2]);
    float *rowbuf = (float *)sp; /* the rows of one r0 */
    sp += nconv__ws_round(sizeof(float) * (size_t)(g->rows[1] * g->Wq));
    float *dyplane = (float *)sp;
    sp += nconv__ws_round(sizeof(float) * (size_t)(pc->dir == NCONV_DIR_BWD_W ? c->out[0] * c->out[1] * c->out[2] : 0));
    float *wt = (float *)sp; /* the channel's taps (fwd, bwd_d) or tap sums (bwd_w) */
    const nconv_view *w = pc->w;
    const int bwd_d = pc->dir == NCONV_DIR_BWD_D;
    plane_tap_offsets(c, pc->dir, g, toff);
    const int64_t pitch = (bwd_d ? 1 : c->s[1]) * g->Wq; /* volume floats between output rows */
    /* wmap and the run of padded columns that read the input in order */
    const nconv_padding_mode mode = bwd_d ? NCONV_PAD_ZEROS : c->mode;
    int64_t run_lo = g->P[2], run_hi = g->P[2];
    for (int64_t q = 0; q < g->P[2]; q++) {
        wmap[q] = nconv__map_index(q + g->lo[2], g->src[2], mode);
        if (q + g->lo[2] >= 0 && q + g->lo[2] < g->src[2]) {
            if (run_lo == g->P[2]) run_lo = q;
            run_hi = q + 1;
        }
    }
    int64_t b, e;
    if (pc->dir == NCONV_DIR_BWD_W) { /* channels: each sums over its images in a fixed order */
        nconv__split(C, tid, nthreads, &b, &e);
        const nconv_view *dy = pc->dy;
        const int64_t OS = c->out[0] * c->out[1] * c->out[2];
        for (int64_t ch = b; ch < e; ch++) {
            for (int64_t t = 0; t < KS; t++) wt[t] = 0.0f;
            for (int64_t n = 0; n < c->N; n++) {
                fill_volume(pc, n, ch, vol, wmap, run_lo, run_hi);
                const float *d = dyplane;
                const int dense = dy->dt == NCONV_F32 && (c->out[2] == 1 || dy->stride[4] == 1) &&
                                  (c->out[1] == 1 || dy->stride[3] == c->out[2]) &&
                                  (c->out[0] == 1 || dy->stride[2] == c->out[1] * c->out[2]);
                if (dense) {
                    d = (const float *)dy->data + n * dy->stride[0] + ch * dy->stride[1];
                } else {
                    for (int64_t p = 0; p < OS; p++)
                        dyplane[p] = (float)view_at(dy, n, ch, p / (c->out[1] * c->out[2]),
                                                    (p / c->out[2]) % c->out[1], p % c->out[2]);
                }
                for (int64_t r0 = 0; r0 < g->rows[0]; r0++) {
                    plane_taps(g, c, bwd_d, vol, toff, KS, r0, 0, src);
                    pc->k->dwdot(g->rows[1], g->rowlen, KS, d + r0 * g->rows[1] * g->rowlen, g->rowlen, src, pitch, wt);
                }
            }
            for (int64_t t = 0; t < KS; t++) {
                if (w->dt == NCONV_F32) ((float *)w->data)[w_offset(c, w, ch, t)] = wt[t];
                else nconv__store1(w->data, w->dt, w_offset(c, w, ch, t), wt[t]);
            }
        }
        return;
    }
    /* fwd, bwd_d: planes (n, ch); the epilogue (bias, alpha z, relu) on store */
    nconv__split(c->N * C, tid, nthreads, &b, &e);
    const nconv_view *out = pc->out;
    const nconv_epi *epi = pc->epi;
    const int direct = out->dt == NCONV_F32 && (out->stride[4] == 1 || g->rowlen == 1) && !(epi && epi->z);
    /* Short rows that follow each other in the volume (H stride 1) are one run: the r0's rows are
     * computed at the volume's pitch, columns past rowlen included, so that vectors are full. */
    const int flat = pitch == g->Wq && g->rowlen < 64 && g->rows[1] > 1;
    const int64_t bp = flat ? g->Wq : g->rowlen; /* rowbuf's pitch */
    for (int64_t pl = b; pl < e; pl++) {
        const int64_t n = pl / C, ch = pl % C;
        for (int64_t t = 0; t < KS; t++) {
            wt[t] = (float)nconv__load(w->data, w->dt, w_offset(c, w, ch, t));
        }
        const float bias = epi && epi->bias ? (float)nconv__load(epi->bias->data, epi->bias->dt, ch * epi->bias->stride[0]) : 0.0f;
        const int relu = epi && epi->relu;
        fill_volume(pc, n, ch, vol, wmap, run_lo, run_hi);
        for (int64_t r0 = 0; r0 < g->rows[0]; r0++) {
            plane_taps(g, c, bwd_d, vol, toff, KS, r0, 0, src);
            const int64_t base = n * out->stride[0] + ch * out->stride[1] + r0 * out->stride[2];
            if (direct && !flat) {
                pc->k->dwrow(g->rows[1], g->rowlen, KS, src, pitch, wt, bias, (float *)out->data + base,
                             out->stride[3], relu);
                continue;
            }
            if (flat)
                pc->k->dwrow(1, (g->rows[1] - 1) * g->Wq + g->rowlen, KS, src, 0, wt, bias, rowbuf, 0, direct && relu);
            else
                pc->k->dwrow(g->rows[1], g->rowlen, KS, src, pitch, wt, bias, rowbuf, g->rowlen, 0);
            if (direct) {
                for (int64_t r1 = 0; r1 < g->rows[1]; r1++)
                    copy_run((float *)out->data + base + r1 * out->stride[3], rowbuf + r1 * bp, g->rowlen);
                continue;
            }
            for (int64_t r1 = 0; r1 < g->rows[1]; r1++)
                for (int64_t q = 0; q < g->rowlen; q++) {
                    double v = rowbuf[r1 * bp + q];
                    if (epi && epi->z) v += epi->alpha * view_at(epi->z, n, ch, r0, r1, q);
                    if (relu && v < 0) v = 0.0; /* NaN stays NaN */
                    nconv__store1(out->data, out->dt, base + r1 * out->stride[3] + q * out->stride[4], v);
                }
        }
    }
}

static nconv_status plane_run(const nconv_exec *e) {
    plane_geo g;
    plane_geometry(e->c, e->dir, &g);
    char *scratch = nconv__arena_take(e->ws, (size_t)e->threads * g.scratch);
    if (!scratch) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm depthwise");
    const int bwd_d = e->dir == NCONV_DIR_BWD_D;
    plane_ctx pc = {e->c, e->dir, e->k, &g, bwd_d ? e->y : e->x, NULL, e->y, e->w, e->epi, scratch, g.scratch};
    pc.out = e->dir == NCONV_DIR_FWD ? e->y : e->x;
    nconv__parallel(e, plane_task, &pc);
    return NCONV_OK;
}

/* Planes pay where their rows fill vectors and the taps are few: with short
 * rows or large kernels, the channels-last run kernels on a channels-last
 * copy of the operands are faster, the copies included. */
static int planes_pay(const nconv_core *c, nconv_direction dir) {
    const int64_t row = dir == NCONV_DIR_BWD_D ? c->in[2] : c->out[2];
    return row >= 28 && nconv__core_kernel_spatial(c) <= 9;
}

/* The plane path serves data that is not channels-last f32 already, where it pays. */
static int use_planes(const nconv_exec *e) {
    if (!plane_applies(e->c, e->dir) || !planes_pay(e->c, e->dir)) return 0;
    switch (e->dir) {
    case NCONV_DIR_FWD: return !nconv__view_is_nxc_f32(e->x);
    case NCONV_DIR_BWD_D: return !nconv__view_is_nxc_f32(e->y);
    default: return !nconv__view_is_nxc_f32(e->x) || !nconv__view_is_nxc_f32(e->y);
    }
}

static nconv_status dw_run(const nconv_exec *e) {
    if (e->dir == NCONV_DIR_BWD_D && !nconv__view_all_finite(e->w)) return (nconv_status)NCONV__DECLINE_W;
    if (use_planes(e)) return plane_run(e);
    const nconv_core *c = e->c;
    const int64_t C = c->C, KS = nconv__core_kernel_spatial(c);
    dw_sizes s;
    sizes(c, e->dir, e->threads, nconv__exec_copies(e), &s);
    float *xb = nconv__arena_take(e->ws, s.x), *yb = nconv__arena_take(e->ws, s.y);
    float *wt = nconv__arena_take(e->ws, s.w), *init = nconv__arena_take(e->ws, s.init);
    float *zero = nconv__arena_take(e->ws, s.zero);
    char *scratch = nconv__arena_take(e->ws, (size_t)e->threads * nconv__ws_round(s.scratch));
    if (!xb || !yb || !wt || !init || !zero || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm depthwise");
    memset(zero, 0, s.zero);
    dw_ctx d = {.c = c, .dir = e->dir, .k = e->k, .wt = wt, .zero = zero, .scratch = scratch,
                .scratch_stride = nconv__ws_round(s.scratch)};
    if (e->dir != NCONV_DIR_BWD_D) d.x = nconv__nxc_input(e, e->x, xb);
    if (e->dir != NCONV_DIR_FWD) d.dy = nconv__nxc_input(e, e->y, yb);
    if (e->dir == NCONV_DIR_BWD_W) {
        d.out = wt;
        nconv__parallel(e, dw_task, &d);
        /* dw[c][0][t] = sums[t][c] */
        const nconv_view *wv = e->w;
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t t = 0; t < KS; t++) {
                nconv__store1(wv->data, wv->dt, w_offset(c, wv, ch, t), wt[t * C + ch]);
            }
        return NCONV_OK;
    }
    /* wt[t][c] = w[c][0][t] */
    const nconv_view *wv = e->w;
    for (int64_t ch = 0; ch < C; ch++)
        for (int64_t t = 0; t < KS; t++) {
            wt[t * C + ch] = (float)nconv__load(wv->data, wv->dt, w_offset(c, wv, ch, t));
        }
    if (use_phases(c, e->dir)) pack_phases(c, wt, wt + KS * C, &d);
    const nconv_view *out = e->dir == NCONV_DIR_FWD ? e->y : e->x;
    int fuse;
    d.out = nconv__nxc_output(out, e->epi, e->dir == NCONV_DIR_FWD ? yb : xb, &fuse);
    nconv__epi_init(fuse ? e->epi : NULL, init, C);
    d.init = init;
    d.relu = fuse && e->epi && e->epi->relu;
    nconv__parallel(e, dw_task, &d);
    if (!fuse) nconv__scatter_nxc_f32(e, out, d.out, e->epi);
    return NCONV_OK;
}

static size_t dw_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    dw_sizes s;
    size_t own = sizes(c, dir, threads, copies, &s);
    plane_geo g;
    plane_geometry(c, dir, &g);
    if ((size_t)threads * g.scratch > own) own = (size_t)threads * g.scratch;
    return own;
}

/* bwd_d with non-finite weights: see nconv__view_all_finite. */
const nconv_algo nconv_algo_depthwise = {.name = "depthwise", .applies = dw_applies, .workspace = dw_workspace,
                                         .run = dw_run, .declines = {0, NCONV__DECLINES_W, 0}};
