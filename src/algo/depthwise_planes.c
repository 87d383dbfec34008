/*
 * Algorithm "depthwise_planes": depthwise (groups == in_channels == out_channels) on f32 planes
 * (NCHW) read and written in place. Each channel's plane is a convolution of its own, computed a
 * vector of output pixels along W at a time in up to 8 output rows at once (the dwrow kernel, each
 * tap one broadcast weight):
 *   fwd:   y[c] = conv(x[c], w[c]) with the layer's strides, dilations and padding mode;
 *   bwd_d: dx[c] = conv(dy[c], w[c] reversed) at stride 1, dy padded by (k - 1) d - p with zeros;
 *          at stride 2 (2D planes) by phases: each parity of dx rows and columns a stride-1
 *          convolution of dy with the taps of that parity, interleaved into dx (see ph_task).
 * At W stride 1 or 2 with zero padding the kernel reads the source rows in place (the padding's
 * columns masked off, pixel step 2 for stride 2), the rows of the next output rows fetched ahead.
 * Otherwise a thread first copies a source plane's rows into a buffer, each row padded along W as
 * the padding mode has it and split into s phases at W stride s (source column x at slot x / s of
 * phase x mod s), so that every tap of an output row reads consecutive floats. Rows of H (and D)
 * padding are a shared row of zeros in zero mode, else the row the mode maps them to. Operands
 * that are not f32 planes, and z, are declined (depthwise computes them).
 *   bwd_w: dw[c] = each tap's products of dy[c] with x[c] summed over the images (the dwrow_bw
 * kernel: a channel's taps summed in registers over its every image, the rows read in place, a
 * call per D slice), at W stride 1 or 2 with zero padding; threads take channels, so the bits do
 * not depend on the thread count.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { ROWS = 8 }; /* output rows per kernel call, at most (the kernel's most) */
enum { PH_TAPS = 4 }; /* bwd_d by phases: a phase's taps along H or W, at most */
/* Source rows read in place are fetched ahead for the next kernel call from this many floats on:
 * narrower planes are a few lines one after another, which the hardware prefetcher follows (the
 * fetches only cost there). */
enum { AHEAD_ROW = 56 };

/* bwd_d at stride 2 by phases (see ph_task): 2D planes, undilated kernels of 2 to 2 PH_TAPS taps a
 * side (each phase at least one tap, at most PH_TAPS). */
static int by_phases(const nconv_core *c) {
    return c->in[0] == 1 && c->out[0] == 1 && c->k[0] == 1 && c->s[1] == 2 && c->s[2] == 2 && c->d[1] == 1 &&
           c->d[2] == 1 && c->k[1] >= 2 && c->k[1] <= 2 * PH_TAPS && c->k[2] >= 2 && c->k[2] <= 2 * PH_TAPS;
}

static int dp_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (c->dt != NCONV_F32 || c->G != c->C || c->G != c->O) {
        if (why_not) *why_not = "f32 depthwise only (groups == in_channels == out_channels)";
        return 0;
    }
    if (dir == NCONV_DIR_BWD_W && (c->s[2] > 2 || c->mode != NCONV_PAD_ZEROS)) {
        if (why_not) *why_not = "bwd_w needs W stride 1 or 2 and zero padding";
        return 0;
    }
    if (dir == NCONV_DIR_BWD_D && (c->mode != NCONV_PAD_ZEROS ||
                                   !((c->s[0] == 1 && c->s[1] == 1 && c->s[2] == 1) || by_phases(c)))) {
        if (why_not)
            *why_not = "bwd_d needs zero padding and stride 1, or stride 2 on 2D planes with undilated kernels of 2 "
                       "to 8 taps a side";
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- geometry */

typedef struct dp_geo {
    int64_t S[3], O[3];       /* the source (x, or dy for bwd_d) and output dims */
    int64_t s[3], d[3], p[3]; /* strides, dilations and the padding before the source, as it is read */
    int mode;
    int direct; /* rows read in place (W stride 1 or 2, zero padding), the padding's columns masked off */
    /* the buffer's rows (not direct): W phases (the W stride), slots before column 0, slots per phase, floats */
    int64_t ph, margin, plen, rowlen;
    int64_t K01, K2, KS;              /* taps of an output row across rows, along W, in all */
    /* The source rows of a slice (o0) of output rows, as the kernel lists them: output row o1's tap
     * row a reads entry o1 rs + a rd of its slice's V. Kernels of depth 1 list each row once (rs,
     * rd: the H stride and dilation); else every (o1, tap row) pair has an entry of its own. */
    int64_t nr, rs, rd, V;
    int64_t mr; /* output rows per kernel call: the fewest calls, rows spread evenly (14 = 7 + 7) */
    int phases;   /* bwd_d by phases (by_phases), mr rows of a row phase per call */
    int64_t pbl;  /* and floats per row of a column phase's buffer */
    size_t rowidx, toff, cmap, zero, wt, init, shared; /* bytes: the shared tables, the weights and init by channel */
    size_t plane, ptrs, thread;                  /* bytes: a thread's scratch */
} dp_geo;

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static void geometry(const nconv_core *c, nconv_direction dir, dp_geo *g) {
    memset(g, 0, sizeof *g);
    const int bwd_d = dir == NCONV_DIR_BWD_D;
    for (int a = 0; a < 3; a++) {
        g->S[a] = bwd_d ? c->out[a] : c->in[a];
        g->O[a] = bwd_d ? c->in[a] : c->out[a];
        g->s[a] = c->s[a], g->d[a] = c->d[a];
        g->p[a] = bwd_d ? (c->k[a] - 1) * c->d[a] - c->pb[a] : c->pb[a];
    }
    g->mode = bwd_d ? NCONV_PAD_ZEROS : c->mode;
    g->direct = g->s[2] <= 2 && g->mode == NCONV_PAD_ZEROS;
    g->ph = g->s[2];
    g->margin = g->p[2] > 0 ? nconv__div_up(g->p[2], g->ph) : 0;
    /* the last tap's run starts this many slots on; runs are read in whole vectors of 16 */
    const int64_t reach = floor_div((c->k[2] - 1) * g->d[2] - g->p[2], g->ph) + g->margin;
    g->plen = nconv__div_up(g->O[2], 16) * 16 + (reach > 0 ? reach : 0);
    g->rowlen = nconv__div_up(g->ph * g->plen, 16) * 16;
    g->K01 = c->k[0] * c->k[1], g->K2 = c->k[2], g->KS = g->K01 * g->K2;
    const int shared = c->k[0] == 1;
    g->nr = shared ? c->k[1] : g->K01;
    g->rs = shared ? g->s[1] : g->K01;
    g->rd = shared ? g->d[1] : 1;
    g->V = shared ? (g->O[1] - 1) * g->rs + (g->nr - 1) * g->rd + 1 : g->O[1] * g->K01;
    g->mr = nconv__div_up(g->O[1], nconv__div_up(g->O[1], ROWS));
    g->rowidx = sizeof(int64_t) * (size_t)(g->O[0] * g->V);
    g->toff = sizeof(int64_t) * (size_t)g->K2;
    g->cmap = sizeof(int64_t) * (size_t)(g->ph * g->plen);
    g->zero = sizeof(float) * (size_t)(g->direct ? nconv__div_up(g->S[2], 16) * 16 : g->rowlen);
    g->wt = sizeof(float) * (size_t)(c->C * g->KS);
    g->init = sizeof(float) * (size_t)c->C;
    g->shared = nconv__ws_round(g->rowidx) + nconv__ws_round(g->toff) + nconv__ws_round(g->cmap) +
                nconv__ws_round(g->zero) + nconv__ws_round(g->wt) + nconv__ws_round(g->init);
    g->plane = g->direct ? 0 : sizeof(float) * (size_t)(g->S[0] * g->S[1] * g->rowlen);
    /* bwd_w's kernel takes a slice's rows at once; the others a group's rows and those it fetches
     * for the next (up to a group's new rows, or the first group's) */
    const int64_t first = (g->mr - 1) * g->rs + (g->nr - 1) * g->rd + 1;
    const int64_t nptrs = dir == NCONV_DIR_BWD_W ? g->V : first + (first > g->mr * g->rs ? first : g->mr * g->rs);
    g->ptrs = sizeof(float *) * (size_t)nptrs;
    g->thread = nconv__thread_stride(nconv__ws_round(g->plane) + nconv__ws_round(g->ptrs));
    if (bwd_d && by_phases(c)) {
        /* dx rows of one parity (half of them, rounded up) in calls of up to ROWS; a call's rows
         * of both column phases in a buffer, then interleaved into dx; tap tables per column phase */
        const int64_t hq = (g->O[1] + 1) / 2;
        g->phases = 1;
        g->mr = nconv__div_up(hq, nconv__div_up(hq, ROWS));
        g->pbl = nconv__div_up((g->O[2] + 1) / 2, 16) * 16;
        g->rowidx = g->toff = g->cmap = 0, g->plane = 0;
        g->zero = sizeof(float) * (size_t)(nconv__div_up(g->S[2], 16) * 16);
        g->shared = nconv__ws_round(g->zero) + nconv__ws_round(g->wt) + nconv__ws_round(g->init);
        g->ptrs = sizeof(float *) * (size_t)(g->mr + PH_TAPS - 1);
        g->thread = nconv__thread_stride(nconv__ws_round(sizeof(float) * (size_t)(2 * g->mr * g->pbl)) +
                                         nconv__ws_round(g->ptrs) + nconv__ws_round(sizeof(int64_t) * 2 * PH_TAPS) +
                                         nconv__ws_round(sizeof(float) * 2 * PH_TAPS * PH_TAPS));
    }
}

static size_t dp_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    (void)copies; /* the operands are read and written in place */
    dp_geo g;
    geometry(c, dir, &g);
    return g.shared + (size_t)threads * g.thread;
}

/* ------------------------------------------------------------------- run */

typedef struct dp_ctx {
    const nconv_exec *e;
    const dp_geo *g;
    const float *src;     /* x or dy */
    float *out;           /* y or dx */
    const nconv_view *sv, *ov;
    const int64_t *rowidx; /* per slice, its V entries (see dp_geo): the source row, or -1 (zeros) */
    const int64_t *toff;   /* per W tap: output pixel 0's position in a source row (direct) or a buffer row */
    const int64_t *cmap;   /* per buffer slot: the source column in [0, S[2]), or -1 (zero) */
    const float *zero, *init, *wt; /* wt: [C][KS], in tap order (reversed for bwd_d) */
    int relu;
    char *scratch;
} dp_ctx;

/* A source row into buffer row dr: columns [0, full * s) by phase, the slots around them as cmap has them. */
static void fill_row(const dp_geo *g, const int64_t *cmap, const float *sr, float *dr) {
    const int64_t s = g->ph, plen = g->plen, m = g->margin < g->plen ? g->margin : g->plen;
    int64_t full = g->S[2] / s;
    if (full > plen - m) full = plen - m;
    if (s == 1) memcpy(dr + m, sr, sizeof(float) * (size_t)full);
    else
        for (int64_t f = 0; f < s; f++)
            for (int64_t i = 0; i < full; i++) dr[f * plen + m + i] = sr[i * s + f];
    for (int64_t f = 0; f < s; f++) {
        float *df = dr + f * plen;
        const int64_t *cf = cmap + f * plen;
        for (int64_t q = 0; q < m; q++) df[q] = cf[q] < 0 ? 0.0f : sr[cf[q]];
        for (int64_t q = m + full; q < plen; q++) df[q] = cf[q] < 0 ? 0.0f : sr[cf[q]];
    }
}

/* Source rows idx[j0 .. j1) of a plane read in place into ptrs (entries of -1, zeros, left out):
 * the rows a kernel call fetches for a later one. Returns how many. */
static int64_t rows_ahead(const float *rows, int64_t rlen, const int64_t *idx, int64_t j0, int64_t j1,
                          const float **ptrs) {
    int64_t n = 0;
    for (int64_t j = j0; j < j1; j++)
        if (idx[j] >= 0) ptrs[n++] = rows + idx[j] * rlen;
    return n;
}

static void dp_task(void *arg, int tid, int nthreads) {
    const dp_ctx *d = arg;
    const nconv_exec *e = d->e;
    const nconv_core *c = e->c;
    const dp_geo *g = d->g;
    char *sc = d->scratch + (size_t)tid * g->thread;
    float *plane = (float *)sc;
    const float **ptrs = (const float **)(sc + nconv__ws_round(g->plane));
    const int64_t srows = g->S[0] * g->S[1], ow = g->O[2];
    /* rows a slice's first group reads */
    const int64_t mr = g->mr, first = (mr - 1) * g->rs + (g->nr - 1) * g->rd + 1;
    int64_t b, end;
    nconv__split(c->N * c->C, tid, nthreads, &b, &end);
    for (int64_t q = b; q < end; q++) {
        const int64_t n = q / c->C, ch = q % c->C;
        const float *wt = d->wt + ch * g->KS;
        const float *sp = d->src + n * d->sv->stride[0] + ch * d->sv->stride[1];
        const float *rows = g->direct ? sp : plane;
        const int64_t rlen = g->direct ? g->S[2] : g->rowlen;
        for (int64_t r = 0; !g->direct && r < srows; r++) fill_row(g, d->cmap, sp + r * g->S[2], plane + r * rlen);
        float *op = d->out + n * d->ov->stride[0] + ch * d->ov->stride[1];
        for (int64_t o0 = 0; o0 < g->O[0]; o0++)
            for (int64_t o1 = 0; o1 < g->O[1]; o1 += mr) {
                const int64_t m = g->O[1] - o1 < mr ? g->O[1] - o1 : mr;
                const int64_t *idx = d->rowidx + o0 * g->V + o1 * g->rs;
                const int64_t nj = (m - 1) * g->rs + (g->nr - 1) * g->rd + 1;
                for (int64_t j = 0; j < nj; j++) ptrs[j] = idx[j] < 0 ? d->zero : rows + idx[j] * rlen;
                /* The next group's new source rows, read in place, fetched by the kernel as this
                 * group computes: the hardware prefetcher alone left the kernel waiting on memory
                 * half the time. After a slice's last group, the next slice's or plane's first. */
                const int64_t left = g->V - o1 * g->rs; /* the slice's entries from idx on */
                const float **next = ptrs + nj;
                int64_t ahead = 0;
                if (!g->direct || rlen < AHEAD_ROW) {
                    /* the buffer holds the whole plane already; or planes of a few lines */
                } else if (o1 + mr < g->O[1]) {
                    ahead = rows_ahead(rows, rlen, idx, nj, nj + mr * g->rs < left ? nj + mr * g->rs : left, next);
                } else if (o0 + 1 < g->O[0]) {
                    ahead = rows_ahead(rows, rlen, idx + left, 0, first, next);
                } else if (q + 1 < end) {
                    const int64_t n1 = (q + 1) / c->C, ch1 = (q + 1) % c->C;
                    ahead = rows_ahead(d->src + n1 * d->sv->stride[0] + ch1 * d->sv->stride[1], rlen, d->rowidx, 0,
                                       first, next);
                }
                e->k->dwrow(m, ow, g->nr, ptrs, g->rs, g->rd, g->K2, d->toff, g->direct ? g->s[2] : 1, rlen, wt,
                            d->init[ch], op + (o0 * g->O[1] + o1) * ow, ow, d->relu, ahead);
            }
    }
}

/* dx[2v + q] = b[q][v] for the row's n columns: a dx row from its two column phases. */
static void interleave(const float *b0, const float *b1, int64_t n, float *dx) {
    const int64_t pairs = n / 2;
    for (int64_t v = 0; v < pairs; v++) dx[2 * v] = b0[v], dx[2 * v + 1] = b1[v];
    if (n % 2) dx[n - 1] = b0[pairs];
}

/* bwd_d at stride 2 by phases: dx row y = 2u + ry, column x = 2v + rx takes the taps kh, kw of
 * the parities that reach dy (kh = ry + pb mod 2, kw likewise), from dy row u + (ry + pb - kh) / 2
 * and column v + (rx + pb - kw) / 2: for each row phase, a stride-1 convolution of dy with a
 * sub-kernel per column phase (the row kernel, its tap rows in order of their dy rows: kh
 * descending), the two column phases of a call's rows written to a buffer, then interleaved
 * into dx. Each dx element is one kernel's sum, bias and relu included (the transposed forward). */
static void ph_task(void *arg, int tid, int nthreads) {
    const dp_ctx *d = arg;
    const nconv_exec *e = d->e;
    const nconv_core *c = e->c;
    const dp_geo *g = d->g;
    char *sc = d->scratch + (size_t)tid * g->thread;
    float *buf = (float *)sc;
    sc += nconv__ws_round(sizeof(float) * (size_t)(2 * g->mr * g->pbl));
    const float **ptrs = (const float **)sc;
    sc += nconv__ws_round(g->ptrs);
    int64_t *toff = (int64_t *)sc;                                             /* [rx][b] */
    float *ws = (float *)(sc + nconv__ws_round(sizeof(int64_t) * 2 * PH_TAPS)); /* [rx][a][b] */
    const int64_t KH = c->k[1], KW = c->k[2], H = g->O[1], W = g->O[2], HY = g->S[1], WY = g->S[2];
    int64_t b, end;
    nconv__split(c->N * c->C, tid, nthreads, &b, &end);
    for (int64_t q = b; q < end; q++) {
        const int64_t n = q / c->C, ch = q % c->C;
        const float *wt = d->wt + ch * g->KS; /* [kh][kw] */
        const float *dy = d->src + n * d->sv->stride[0] + ch * d->sv->stride[1];
        float *dx = d->out + n * d->ov->stride[0] + ch * d->ov->stride[1];
        for (int64_t ry = 0; ry < 2 && ry < H; ry++) {
            const int64_t kh0 = KH - 1 - ((KH - 1 - ry - c->pb[1]) % 2 + 2) % 2; /* the phase's largest kh */
            const int64_t nr = kh0 / 2 + 1, e0 = (ry + c->pb[1] - kh0) / 2, hq = (H - ry + 1) / 2;
            int64_t nk[2], wq[2];
            for (int64_t rx = 0; rx < 2; rx++) {
                const int64_t kw0 = ((rx + c->pb[2]) % 2 + 2) % 2; /* the phase's smallest kw */
                nk[rx] = (KW - 1 - kw0) / 2 + 1, wq[rx] = (W - rx + 1) / 2;
                for (int64_t t = 0; t < nk[rx]; t++) {
                    const int64_t kw = kw0 + 2 * t;
                    toff[rx * PH_TAPS + t] = (rx + c->pb[2] - kw) / 2;
                    for (int64_t a = 0; a < nr; a++)
                        ws[rx * PH_TAPS * PH_TAPS + a * nk[rx] + t] = wt[(kh0 - 2 * a) * KW + kw];
                }
            }
            for (int64_t u0 = 0; u0 < hq; u0 += g->mr) {
                const int64_t m = hq - u0 < g->mr ? hq - u0 : g->mr;
                for (int64_t j = 0; j < m + nr - 1; j++) {
                    const int64_t i = u0 + e0 + j;
                    ptrs[j] = i < 0 || i >= HY ? d->zero : dy + i * WY;
                }
                for (int64_t rx = 0; rx < 2 && rx < W; rx++)
                    e->k->dwrow(m, wq[rx], nr, ptrs, 1, 1, nk[rx], toff + rx * PH_TAPS, 1, WY,
                                ws + rx * PH_TAPS * PH_TAPS, d->init[ch], buf + rx * g->mr * g->pbl, g->pbl, d->relu,
                                0);
                for (int64_t r = 0; r < m; r++)
                    interleave(buf + r * g->pbl, buf + (g->mr + r) * g->pbl, W, dx + (2 * (u0 + r) + ry) * W);
            }
        }
    }
}

/* Whether the operands are what the algorithm reads and writes: f32 planes, no z. */
static int dp_suit(const nconv_exec *e) {
    if (e->dir != NCONV_DIR_BWD_W && e->epi && e->epi->z) return 0;
    return nconv__view_is_planar_f32(e->x) && nconv__view_is_planar_f32(e->y);
}

/* bwd_w: a thread's channels, each over its slices (o0), each slice over every image in one
 * kernel call; the sums in d->wt, [C][KS]. */
static void bw_task(void *arg, int tid, int nthreads) {
    const dp_ctx *d = arg;
    const nconv_exec *e = d->e;
    const nconv_core *c = e->c;
    const dp_geo *g = d->g;
    const nconv_view *w = e->w;
    const float **ptrs = (const float **)(d->scratch + (size_t)tid * g->thread + nconv__ws_round(g->plane));
    float *sums = (float *)d->wt;
    double *lanes = e->db_lanes;
    int64_t b, end;
    nconv__split(c->C, tid, nthreads, &b, &end);
    for (int64_t ch = b; ch < end; ch++) {
        float *acc = sums + ch * g->KS, db = 0.0f;
        memset(acc, 0, sizeof(float) * (size_t)g->KS);
        const float *sp = d->src + ch * d->sv->stride[1];
        for (int64_t o0 = 0; o0 < g->O[0]; o0++) {
            const int64_t *idx = d->rowidx + o0 * g->V;
            for (int64_t j = 0; j < g->V; j++) ptrs[j] = idx[j] < 0 ? NULL : sp + idx[j] * g->S[2];
            e->k->dwrow_bw(c->N, g->O[1], g->O[2], g->nr, ptrs, g->rs, g->rd, d->sv->stride[0], g->K2, d->toff,
                           g->s[2], g->S[2], d->out + ch * d->ov->stride[1] + o0 * g->O[1] * g->O[2], g->O[2],
                           d->ov->stride[0], acc, lanes ? &db : NULL);
        }
        for (int l = 0; lanes && l < 4; l++) lanes[l * c->C + ch] = l ? 0.0 : db;
        nconv__dw_store_w(c, w, ch, acc);
    }
}

/* bwd_d by phases (ph_task): the weights unreversed, [kh][kw]. */
static nconv_status ph_run(const nconv_exec *e, const dp_geo *g, int threads) {
    const nconv_core *c = e->c;
    float *zero = nconv__arena_take(e->ws, g->zero), *wt = nconv__arena_take(e->ws, g->wt);
    float *init = nconv__arena_take(e->ws, g->init);
    char *scratch = nconv__arena_take(e->ws, (size_t)threads * g->thread);
    if (!zero || !wt || !init || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm depthwise_planes");
    /* dy's zero padding takes products here (the zero rows, the masked lanes): declined as in bwd_d */
    int finite = 1;
    for (int64_t ch = 0; ch < c->C; ch++) finite &= nconv__dw_gather_w(c, e->w, ch, 0, wt + ch * g->KS);
    if (!finite) return (nconv_status)NCONV__DECLINE_W;
    memset(zero, 0, g->zero);
    nconv__epi_init(e->epi, init, c->C);
    dp_ctx d = {.e = e, .g = g, .sv = e->y, .ov = e->x, .zero = zero, .init = init, .wt = wt,
                .relu = e->epi && e->epi->relu, .scratch = scratch};
    d.src = d.sv->data, d.out = d.ov->data;
    nconv__parallel(e, ph_task, &d);
    return NCONV_OK;
}

static nconv_status dp_run(const nconv_exec *e) {
    if (!dp_suit(e)) return (nconv_status)NCONV__DECLINE_LAYOUT;
    const nconv_core *c = e->c;
    const int bwd_d = e->dir == NCONV_DIR_BWD_D;
    dp_geo g;
    geometry(c, e->dir, &g);
    const int threads = nconv__parallel_width(e);
    if (g.phases) return ph_run(e, &g, threads);
    int64_t *rowidx = nconv__arena_take(e->ws, g.rowidx), *toff = nconv__arena_take(e->ws, g.toff);
    int64_t *cmap = nconv__arena_take(e->ws, g.cmap);
    float *wt = nconv__arena_take(e->ws, g.wt);
    float *zero = nconv__arena_take(e->ws, g.zero), *init = nconv__arena_take(e->ws, g.init);
    char *scratch = nconv__arena_take(e->ws, (size_t)threads * g.thread);
    if ((g.rowidx && !rowidx) || !toff || !cmap || !wt || !zero || !init || !scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm depthwise_planes");
    for (int64_t o0 = 0; o0 < g.O[0]; o0++)
        for (int64_t v = 0; v < g.V; v++) {
            /* shared: source row v of the slice's reach; else (o1, a0, a1) = (v / K01, .., ..) */
            const int64_t o1 = c->k[0] == 1 ? 0 : v / g.K01, a = c->k[0] == 1 ? 0 : v % g.K01;
            const int64_t h = c->k[0] == 1 ? v : o1 * g.s[1] + (a % c->k[1]) * g.d[1];
            const int64_t i0 = nconv__map_index(o0 * g.s[0] - g.p[0] + (a / c->k[1]) * g.d[0], g.S[0], g.mode);
            const int64_t i1 = nconv__map_index(h - g.p[1], g.S[1], g.mode);
            rowidx[o0 * g.V + v] = i0 < 0 || i1 < 0 ? -1 : i0 * g.S[1] + i1;
        }
    for (int64_t b = 0; b < g.K2; b++) {
        const int64_t x0 = b * g.d[2] - g.p[2]; /* the source column of output pixel 0's tap b */
        const int64_t f = x0 - floor_div(x0, g.ph) * g.ph;
        toff[b] = g.direct ? x0 : f * g.plen + floor_div(x0, g.ph) + g.margin;
    }
    /* Slots past the padding's reach (a margin rounded up to whole slots, rows rounded up to whole
     * vectors) feed no output pixel; the modes do not map every such column into the row (reflect
     * maps -n to n): they read zeros. */
    for (int64_t f = 0; !g.direct && f < g.ph; f++) /* the buffer's only */
        for (int64_t q = 0; q < g.plen; q++) {
            const int64_t x = (q - g.margin) * g.ph + f, src = nconv__map_index(x, g.S[2], g.mode);
            cmap[f * g.plen + q] = x < -g.p[2] || src >= g.S[2] ? -1 : src;
        }
    /* dy's zero padding takes no products in bwd_d: a non-finite weight would make NaN of it */
    int finite = 1;
    for (int64_t ch = 0; e->dir != NCONV_DIR_BWD_W && ch < c->C; ch++)
        finite &= nconv__dw_gather_w(c, e->w, ch, bwd_d, wt + ch * g.KS);
    if (bwd_d && !finite) return (nconv_status)NCONV__DECLINE_W;
    memset(zero, 0, g.zero);
    nconv__epi_init(e->epi, init, c->C);
    dp_ctx d = {.e = e, .g = &g, .sv = bwd_d ? e->y : e->x, .ov = bwd_d ? e->x : e->y, .rowidx = rowidx,
                .toff = toff, .cmap = cmap, .zero = zero, .init = init, .wt = wt, .relu = e->epi && e->epi->relu,
                .scratch = scratch};
    d.src = d.sv->data, d.out = d.ov->data;
    nconv__parallel(e, e->dir == NCONV_DIR_BWD_W ? bw_task : dp_task, &d);
    if (e->dir == NCONV_DIR_BWD_W && e->db_lanes) *e->db_done = 1;
    return NCONV_OK;
}

/* Strides up to 2, and rows of 56 pixels or more with kernels up to 5 x 5, or, with vectors of 16
 * lanes, of 28 or more with 3 x 3, or, with undilated 2D kernels (whose rows the kernel's
 * shared-row code reads), of 14 or more up to 7 x 7 with 16 lanes, with 8 lanes up to 3 x 3 (and
 * at stride 1 up to 7 x 7 on rows of 28 or more): there a plane's rows beat the channel blocks of
 * "depthwise". Narrower rows leave too much of a kernel call to overhead and partial vectors (a
 * 7-pixel row is under half a vector of 16; BENCHMARKS.md).
 * bwd_d by phases: dx rows of 28 pixels or more (a 14-pixel row's phases are 7 pixels, where the
 * channel blocks win), with 8-lane vectors for 3 x 3 kernels only (5 x 5 measured even).
 * bwd_w: 3 x 3 undilated taps with vectors of 16 lanes and rows of 14 to 28 output pixels. With 8
 * lanes, 5 x 5 or 7 x 7 taps, rows of 7 pixels (less than half a vector) and rows of 56 or more
 * (planes past L1, whose layers' operands leave the cache: the kernel then reads at a third of the
 * machine's bandwidth) the channel blocks and their copies win (BENCHMARKS.md). */
static int dp_preferred(const nconv_core *c, nconv_direction dir) {
    const int64_t ow = dir == NCONV_DIR_BWD_D ? c->in[2] : c->out[2];
    const int64_t k = c->k[1] > c->k[2] ? c->k[1] : c->k[2];
    if (c->s[0] > 2 || c->s[1] > 2 || c->s[2] > 2) return 0;
    if (dir == NCONV_DIR_BWD_D && by_phases(c)) return ow >= 28 && (nconv__kernels()->dw_vl >= 16 || k <= 3);
    if (dir == NCONV_DIR_BWD_W)
        return nconv__kernels()->dw_vl >= 16 && c->k[0] == 1 && c->k[1] == 3 && c->k[2] == 3 && c->d[1] == 1 &&
               c->d[2] == 1 && ow >= 14 && ow <= 28;
    const int shared = c->k[0] == 1 && c->d[1] == 1 && c->d[2] == 1; /* the kernels' code for row patterns */
    const int vl16 = nconv__kernels()->dw_vl >= 16, s1 = c->s[1] == 1 && c->s[2] == 1;
    return (ow >= 56 && k <= 5) || (ow >= 28 && k <= 3 && vl16) ||
           (shared && ow >= 14 && (vl16 ? k <= 7 : k <= 3 || (k <= 7 && ow >= 28 && s1)));
}

/* Not where the activations are channels-last: they would always be declined. */
static int dp_suits(unsigned copies) { return !(copies & NCONV_ACTS_NXC); }

const nconv_algo nconv_algo_depthwise_planes = {
    .name = "depthwise_planes", .applies = dp_applies, .workspace = dp_workspace, .run = dp_run,
    .preferred = dp_preferred,
    .declines = {NCONV__DECLINES_LAYOUT, NCONV__DECLINES_LAYOUT | NCONV__DECLINES_W, NCONV__DECLINES_LAYOUT},
    .suits = dp_suits};
