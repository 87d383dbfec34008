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
 * Framework (this file and igemm.h: geometry, workspace, operand conversion,
 * dispatch; igemm_rows.c: weight packing, row decoding, blocking and
 * threading of fwd and bwd_d; igemm_bwd_w.c: backward-weights).
 * Micro-kernels: src/kernels (6 x 16 tiles).
 * Threads split rows (fwd, bwd_d; and column panels when rows are few) or dw
 * tiles or pixel chunks (bwd_w); every output element
 * is summed in an order fixed by the problem alone, so results are bitwise
 * identical for any thread count.
 */#include "igemm.h"

#include <math.h>
#include <string.h>

int nconv__igemm_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (c->dt == NCONV_F64) {
        if (why_not) *why_not = "f64 problems run on gemm (f64 throughout)";
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

void nconv__igemm_geometry(const nconv_core *c, nconv_direction dir, int threads, geo *g) {
    g->dir = dir;
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
    g->dcols = 0; /* igemm_cols sets it */
    g->dot16 = 0; /* nconv__igemm_set_dot16 sets it */
    g->segs = g->seg_rows = 0;
    if (dir != NCONV_DIR_BWD_W && (c->dt == NCONV_F32 || nconv__is_16bit(c->dt)) && !g->wfold && g->KS > 1) {
        /* Small images lose a sizeable part of their taps to the padding (a 7 x 7 one 18% of a
         * 3 x 3 kernel's): classes of pixels skip them where that saves 8% of the reduction or
         * more, counting each class's part tiles and each run of taps as 32 steps more. */
        seg segs[MAX_SEGS];
        int64_t rows;
        const int64_t n = nconv__igemm_segments(c, dir, segs, &rows);
        double with = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t live = 0;
            for (int u = 0; u < segs[i].nrun; u++) live += segs[i].nt[u];
            with += (double)nconv__div_up(segs[i].rows, MR) * (double)(live * g->kc + 32 * segs[i].nrun);
        }
        const int64_t pixels = c->N * (dir == NCONV_DIR_FWD ? g->OS : g->IS);
        const double without = (double)nconv__div_up(pixels, MR) * (double)(g->KS * g->kc);
        if (n > 1 && with <= 0.92 * without) g->segs = n, g->seg_rows = rows;
    }
    /* Column blocks of 2 MiB: each block is two parallel regions (GEMM, scatter), and
     * blocks of 256 KiB made conv1 slower on 2 threads than on 1. */
    g->col_rows = (2 << 20) / ((int64_t)sizeof(float) * g->KS * g->Cg);
    g->col_rows = g->col_rows < MR ? MR : g->col_rows > 32768 ? 32768 : g->col_rows - g->col_rows % MR;
    g->panels = nconv__div_up(g->rows_cols, NR);
    g->kchunk = g->kc;
    if (g->ks_rows * g->kc > K_BLOCK) {
        g->kchunk = K_BLOCK / g->ks_rows;
        if (g->kchunk >= 8) g->kchunk -= g->kchunk % 8;
        if (c->dt == NCONV_BF16 && g->kchunk >= 2) g->kchunk -= g->kchunk % 2; /* whole pairs (dot16) */
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
    /* 16-bit outputs go through the block's f32 rows (see row_block): at most 512 KiB of them */
    if (nconv__is_16bit(c->dt) && dir != NCONV_DIR_BWD_W) {
        const int64_t cap = (512 << 10) / ((int64_t)sizeof(float) * MR * g->panels * NR);
        if (g->mc_tiles > cap) g->mc_tiles = cap > 1 ? cap : 1;
    }
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
     * which suits rows shorter than 2 KiB (longer ones fold onto few L1 sets). Every product and
     * sum is the same either way (a * b = b * a, the same blocks and order): no bit depends on it. */
    if (threads > 1 && !g->wfold && width > g->Og && g->Og * (int64_t)sizeof(float) < 2048) g->bw_swap = 1;
    /* Unswapped, a layer that widens its channels several times (MobileNet's expansions: 16 to
     * 96) has one or two column panels of input channels, so each A element broadcast feeds one
     * or two FMAs; swapped, the output channels fill panel pairs, whose two panels the 16-lane
     * kernels feed from one broadcast (the 8-lane ones, a panel at a time, lost on the widest
     * layers). Rows of 4 KiB and more (1,024 channels) fold onto few L1 sets (ResNet's 512 to
     * 2048 took twice as long swapped), and 7 x 7 images lost 20% (measured, not understood). */
    if (!g->wfold && g->Og >= 4 * width && g->Og * (int64_t)sizeof(float) < 4096 && g->OS >= 100 &&
        nconv__kernels()->dw_vl >= 16)
        g->bw_swap = 1;
    /* Unswapped, A = dy^T could be read from dy's rows in place (lda O) but for the last partial
     * tile, though at stride O floats each k is another line. That pays only for 1x1 (A not
     * reused over taps) with rows of 256 B and x read in place too (see bw_range's pack). The
     * products and sums are those of the packed tiles. */
    g->bw_dy_rows = !g->bw_swap && g->KS == 1 && c->O * (int64_t)sizeof(float) <= 256 && c->C < 256 ? g->Og / MR : 0;
    /* W-folded swapped rows of 7 taps x 3 channels (the 7 x 7 RGB stem) fill 6-row tiles to 21 of
     * 24, those of 3 x 3 to 9 of 12: tiles of 7 or 9 rows where the kernel table has them. A tile
     * reads all its rows, past the copy's slack of MR floats for a part tile of 9: whole ones only. */
    const nconv_kernels *kt = nconv__kernels();
    g->bw_mr = MR;
    if (g->wfold && g->bw_swap && kt->gemm_ib9_np && width % 9 == 0) g->bw_mr = 9;
    else if (g->wfold && g->bw_swap && kt->gemm_ib7_np && nconv__div_up(width, 7) * 7 < nconv__div_up(width, MR) * MR)
        g->bw_mr = 7;
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

int nconv__igemm_cols_shape(const nconv_core *c, nconv_direction dir) {
    /* bwd_d with few input channels: rows of Cg columns waste most of a tile. */
    const int64_t Cg = c->C / c->G, KS = nconv__core_kernel_spatial(c);
    return dir == NCONV_DIR_BWD_D && c->G == 1 && Cg <= 8 && c->d[2] == 1 && KS * Cg >= 2 * Cg;
}

/* x and y: their channels-last copies where `copies` has them, and x's W-padded copy (wfold: before
 * the NHWC input, with MR floats bw_task may read past it; dcols: after dx's copy). */
size_t nconv__igemm_sizes(const nconv_core *c, const geo *gp, int threads, unsigned copies, ws_sizes *s) {
    const geo g = *gp;
    const nconv_direction dir = g.dir;
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
                     sizeof(float) * (size_t)((g.bw_swap ? g.panels : 2) * NR * g.bw_kc) +
                     /* 16-bit: a block's dy rows and x rows widened (each with NR floats of slack,
                      * as the rows of a tensor have its next row after them) */
                     (nconv__is_16bit(c->dt) ? sizeof(float) * (size_t)(g.bw_kc * (c->O + c->C) + 2 * NR) : 0);
    } else {
        /* fwd: then a flag per column panel, whether its weights are finite (see job.wfin) */
        s->packed = sizeof(float) * (size_t)(c->G * g.panels * (g.ks_rows * g.kc * NR + (dir == NCONV_DIR_FWD)));
        s->init = sizeof(float) * (size_t)(c->G * g.panels * NR);
        s->jobs = sizeof(job) * (size_t)(dir == NCONV_DIR_FWD ? c->G : c->G * c->s[0] * c->s[1] * c->s[2]);
        /* row_block's scratch (row_task lays it out) */
        const size_t rows = (size_t)(g.mc_tiles * MR), ks = (size_t)g.KS;
        const size_t cbuf = nconv__is_16bit(c->dt) ? rows * (size_t)(g.panels * NR) : 0;
        s->scratch = sizeof(float *) * rows * (2 * ks + 1) + sizeof(int64_t) * (rows + ks) +
                     sizeof(float) * ((size_t)nconv__igemm_pack_floats(&g, c->dt) + cbuf);
    }
    if (g.dcols) { /* column blocks, and weights packed for them (as B panels, or as A tiles for NCHW dy) */
        s->cols = sizeof(float) * (size_t)(g.col_rows * g.KS * g.Cg);
        const int64_t q = g.KS * g.Cg, wb = nconv__div_up(q, NR) * NR, wa = nconv__div_up(q, MR) * MR;
        const size_t wq = sizeof(float) * (size_t)((wb > wa ? wb : wa) * g.Og);
        if (wq > s->packed) s->packed = wq;
        /* NCHW dy: a plane row pointer per output channel, and for 16-bit planes a run of each widened;
         * 16-bit channels-last dy: a tile's rows widened */
        size_t rows = sizeof(float *) * (size_t)g.Og;
        if (nconv__is_16bit(c->dt)) {
            const size_t planes = rows + sizeof(float) * (size_t)(g.Og * COL_PANELS * NR),
                         tile = sizeof(float *) * MR + sizeof(float) * (size_t)(MR * c->O);
            rows = planes > tile ? planes : tile;
        }
        if (rows > s->scratch) s->scratch = rows;
    }
    s->zero = sizeof(float) * (size_t)(g.kc + c->k[2] * g.Cg + NR);
    s->shares = sizeof(nconv_share) * (size_t)threads; /* fwd, bwd_d: units of the row GEMM; bwd_w: pixel chunks */
    return nconv__ws_round(s->x) + nconv__ws_round(s->y) + nconv__ws_round(s->w) + nconv__ws_round(s->packed) +
           nconv__ws_round(s->lanes) + nconv__ws_round(s->init) + nconv__ws_round(s->zero) + nconv__ws_round(s->jobs) +
           nconv__ws_round(s->shares) + nconv__ws_round(s->cols) + (size_t)threads * nconv__ws_round(s->scratch);
}

void nconv__igemm_set_dot16(const nconv_core *c, geo *g, const nconv_kernels *k) {
    g->dot16 = c->dt == NCONV_BF16 && nconv__bf16_pairs(k) && g->dir != NCONV_DIR_BWD_W && !g->dcols && !g->wfold &&
               g->kc % 2 == 0 && g->kchunk % 2 == 0;
}

int nconv__igemm_panel_major(const nconv_core *c, const geo *g) {
    const int64_t panel_bytes = (int64_t)sizeof(float) * g->ks_rows * g->kc * NR;
    int64_t rows = c->N * g->OS; /* fwd: every job's rows; bwd_d: the largest residue class's */
    if (g->dir == NCONV_DIR_BWD_D) {
        rows = c->N;
        for (int a = 0; a < 3; a++) rows *= nconv__div_up(c->in[a], c->s[a]);
    }
    return c->G * g->panels * panel_bytes >= (2 << 20) && rows * g->kc * (int64_t)sizeof(float) <= (4 << 20);
}

int nconv__igemm_reads16(const nconv_core *c, const geo *g, unsigned copies) {
    return nconv__is_16bit(c->dt) && (copies & NCONV_ACTS_NXC) && g->dir != NCONV_DIR_BWD_W && !g->wfold &&
           !nconv__igemm_panel_major(c, g);
}

unsigned nconv__igemm_copies16(const nconv_core *c, const geo *g, unsigned copies) {
    if (!nconv__is_16bit(c->dt) || !(copies & NCONV_ACTS_NXC)) return copies;
    if (g->dir == NCONV_DIR_BWD_W) return copies & ~(unsigned)NCONV_COPY_BOTH;
    if (g->wfold) copies &= ~(unsigned)NCONV_COPY_X;
    const unsigned source = g->dir == NCONV_DIR_FWD ? NCONV_COPY_X : NCONV_COPY_Y;
    if (nconv__igemm_reads16(c, g, copies)) copies &= ~source;
    return copies;
}

int64_t nconv__igemm_pack_floats(const geo *g, nconv_dtype dt) {
    return g->pack_a || nconv__is_16bit(dt) ? g->mc_tiles * MR * g->KS * (g->kchunk + PACK_PAD) : 0;
}

static size_t igemm_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    geo g;
    nconv__igemm_geometry(c, dir, threads, &g);
    ws_sizes s;
    return nconv__igemm_sizes(c, &g, threads, nconv__igemm_copies16(c, &g, copies), &s);
}

/* ------------------------------------------------------------------ run */

/* Offsets of each kernel tap in the caller's weight layout (read by wload, written by bwd_w). */
static void tap_offsets(const nconv_core *c, const nconv_view *w, int64_t *toff) {
    for (int64_t t = 0; t < nconv__core_kernel_spatial(c); t++)
        toff[t] = (t / (c->k[1] * c->k[2])) * w->stride[2] + ((t / c->k[2]) % c->k[1]) * w->stride[3] +
                  (t % c->k[2]) * w->stride[4];
}

/* The W-padded copy of the thin-channel input, rows (group, n, i0, i1) per thread. */
typedef struct wpad_ctx {
    const nconv_core *c;
    const geo *g;
    const float *x;        /* NHWC f32, or NULL when x16 is read instead */
    const uint16_t *x16;   /* NHWC 16-bit, widened as it is copied */
    nconv_convert16_fn cv; /* its conversion */
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
        const int64_t gi = u / rows, r = u % rows, src = r * IW * c->C + gi * Cg; /* the row's offset in x */
        float *dst = wc->xb + u * iw_pad * Cg;
        for (int64_t jw = 0; jw < iw_pad; jw++) {
            if (c->G == 1 && jw == lo && hi > lo) {
                const int64_t off = src + (lo - c->pb[2]) * c->C, n = (hi - lo) * Cg;
                if (wc->x16) wc->cv(n, wc->x16 + off, dst + lo * Cg, 1);
                else memcpy(dst + lo * Cg, wc->x + off, sizeof(float) * (size_t)n);
                jw = hi - 1;
                continue;
            }
            const int64_t iw = nconv__map_index(jw - c->pb[2], IW, c->mode);
            for (int64_t q = 0, off = src + iw * c->C; q < Cg; q++)
                dst[jw * Cg + q] = iw < 0 ? 0.0f : wc->x16 ? nconv__load_f32(wc->x16, c->dt, off + q) : wc->x[off + q];
        }
    }
}

nconv_status nconv__igemm_setup(const nconv_exec *e, const geo *gp, const char *name, igemm_bufs *b) {
    const nconv_core *c = e->c;
    const nconv_direction dir = e->dir;
    const int threads = e->threads;
    const geo g = *gp;
    const ws_sizes *s = &b->s;
    /* 16-bit channels-last operands are read in place where nconv__igemm_copies16 says: the row
     * GEMM's source (A rows widened as they are packed; deep layers, panel-major, would widen all
     * of it per unit: copied once), backward-weights' x and dy (widened a block at a time). */
    const nconv_view *src = dir == NCONV_DIR_FWD ? e->x : e->y;
    const unsigned acts = nconv__view_is_nxc(e->x) && nconv__view_is_nxc(e->y) ? NCONV_ACTS_NXC : 0u;
    const int reads16 = nconv__igemm_reads16(c, gp, acts);
    const int bw16 = dir == NCONV_DIR_BWD_W && nconv__is_16bit(c->dt) && acts;
    b->copies = nconv__igemm_copies16(c, gp, nconv__exec_copies(e) | acts) & NCONV_COPY_BOTH;
    nconv__igemm_sizes(c, gp, threads, b->copies, &b->s);
    /* w as igemm_pack made it: the row GEMM's panels */
    b->prepacked = e->packed && dir != NCONV_DIR_BWD_W && !g.dcols;
    float *xb = b->xb = nconv__arena_take(e->ws, s->x), *yb = b->yb = nconv__arena_take(e->ws, s->y);
    b->toff = nconv__arena_take(e->ws, s->w);
    b->packed = b->prepacked ? (float *)e->packed : nconv__arena_take(e->ws, s->packed);
    b->lanes_more = nconv__arena_take(e->ws, s->lanes);
    b->init = nconv__arena_take(e->ws, s->init), b->zero = nconv__arena_take(e->ws, s->zero);
    b->scratch_stride = nconv__ws_round(s->scratch);
    b->scratch = nconv__arena_take(e->ws, (size_t)threads * b->scratch_stride);
    if (!xb || !yb || !b->toff || !b->packed || !b->lanes_more || !b->init || !b->zero || !b->scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm %s", name);
    memset(b->zero, 0, s->zero);
    tap_offsets(c, e->w, b->toff);

    b->x = NULL;
    b->src16 = b->x16 = b->dy16 = NULL;
    if (bw16) { /* y: see below */
        b->x16 = g.wfold ? NULL : e->x->data;
        b->dy16 = e->y->data;
    }
    /* A 16-bit source of the row GEMM that is not channels-last (NCHW planes, strided views) is
     * copied channels-last in its dtype (its bits: half the bytes of a widened copy), then read as
     * a channels-last one: as it lies on bf16 pairs (in place too where panel-major), else, for
     * 1x1 layers, widened as A is packed. Others keep a widened copy: with taps A packs each
     * value once per tap that reads it, and panel-major once per unit. */
    const int row16 = nconv__is_16bit(src->dt) && dir != NCONV_DIR_BWD_W && !g.dcols && !g.wfold;
    const int copy16 = row16 && !nconv__view_is_nxc(src) &&
                       (g.dot16 || (g.ks_rows == 1 && !nconv__igemm_panel_major(c, gp)));
    if (reads16 || copy16 || (row16 && g.dot16)) {
        b->src16 = src->data;
        if (copy16) {
            uint16_t *copy = (uint16_t *)(dir == NCONV_DIR_FWD ? xb : yb);
            nconv__gather_nxc_16(e, src, copy);
            b->src16 = copy;
        }
        b->y = NULL, b->dy_planes = 0;
        return NCONV_OK;
    }
    if (g.wfold) { /* xb[g][n][i0][i1][jw][c] = x at W index jw - pb (padding mode applied), zero outside */
        const int64_t rows = c->N * c->in[0] * c->in[1];
        /* 16-bit channels-last x is widened as it is copied, f32 ones read in place */
        const int x16 = nconv__is_16bit(e->x->dt) && nconv__view_is_nxc(e->x);
        wpad_ctx wc = {c, gp, x16 ? NULL : nconv__nxc_input(e, e->x, xb + rows * g.iw_pad * c->C),
                       x16 ? e->x->data : NULL, nconv__convert16(e->k, e->x->dt), xb};
        nconv__parallel(e, wpad_task, &wc);
        b->x = xb;
    } else if (dir != NCONV_DIR_BWD_D && !b->x16) {
        b->x = nconv__nxc_input(e, e->x, xb);
    }
    /* bwd_w with the swapped tiles, and bwd_d's column GEMM, read dy in NCHW planes where it is
     * (see bw_range, bwd_d_cols), f32 or 16-bit (those widen the runs they read as they go). */
    const nconv_view *yv = e->y;
    b->dy_planes = ((dir == NCONV_DIR_BWD_W && g.bw_swap) || g.dcols) && nconv__view_is_planar(yv) &&
                   !nconv__view_is_nxc(yv) && (yv->dt == NCONV_F32 || nconv__is_16bit(yv->dt));
    b->dyv = *yv;
    b->y = dir != NCONV_DIR_FWD && !b->dy_planes && !b->dy16 ? nconv__nxc_input(e, e->y, yb) : NULL;
    return NCONV_OK;
}

static nconv_status igemm_run(const nconv_exec *e) {
    geo g;
    nconv__igemm_geometry(e->c, e->dir, e->threads, &g);
    nconv__igemm_set_dot16(e->c, &g, e->k);
    igemm_bufs b;
    nconv_status st = nconv__igemm_setup(e, &g, "igemm", &b);
    if (st) return st;
    return e->dir == NCONV_DIR_BWD_W ? nconv__igemm_bwd_w_run(e, &g, &b) : nconv__igemm_rows_run(e, &g, &b);
}

/* Prepacked weights: the row GEMM's panels (fwd, bwd_d).
 * Their layout depends on channels, groups, kernel, stride and dilation only, not on the
 * batch or the bands of a split. */
static size_t igemm_pack_size(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch) {
    (void)threads;
    *scratch = 0;
    if (dir == NCONV_DIR_BWD_W) return 0;
    geo g;
    nconv__igemm_geometry(c, dir, 1, &g);
    ws_sizes s;
    nconv__igemm_sizes(c, &g, 1, 0, &s);
    *scratch = 64 + nconv__ws_round(s.w) + nconv__ws_round(s.jobs); /* 64: the arena's alignment */
    return s.packed;
}

static nconv_status igemm_pack(const nconv_exec *e, void *dst) {
    const nconv_core *c = e->c;
    geo g;
    nconv__igemm_geometry(c, e->dir, e->threads, &g);
    nconv__igemm_set_dot16(c, &g, e->k);
    ws_sizes s;
    nconv__igemm_sizes(c, &g, 1, 0, &s);
    int64_t *toff = nconv__arena_take(e->ws, s.w);
    job *jobs = nconv__arena_take(e->ws, s.jobs);
    if (!toff || !jobs) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: scratch too small for igemm's packing");
    tap_offsets(c, e->w, toff);
    /* fwd: each panel's finiteness too, as a batch with classes of pixels reads it (see seg_tile) */
    const int64_t njobs = nconv__igemm_make_jobs(c, &g, e->dir, dst, 1, jobs);
    const wsrc w = {e->w, toff};
    int finite[NCONV_MAX_THREADS];
    nconv__igemm_pack_jobs(e, &g, &w, jobs, njobs, finite);
    return e->dir == NCONV_DIR_BWD_D && !nconv__igemm_all_set(finite) ? (nconv_status)NCONV__DECLINE_W : NCONV_OK;
}

const nconv_algo nconv_algo_igemm = {.name = "igemm", .applies = nconv__igemm_applies, .workspace = igemm_workspace,
                                     .run = igemm_run, .accumulates = 1, .declines = {0, NCONV__DECLINES_W, 0},
                                     .pack_size = igemm_pack_size, .pack = igemm_pack};
