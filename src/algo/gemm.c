/*
 * Algorithm "gemm": im2col + GEMM, every dtype.
 *   - f32, f16 and bf16 problems run in f32 on a plain GEMM: the portable
 *     fallback and the only fast path for bwd_d with reflect, replicate or
 *     circular padding, whose adjoint is a scatter.
 *   - f64 problems run in f64 on the packed GEMM of gemm_f64.c and the f64
 *     micro-kernels, on the call's threads: images are shared out in fwd and
 *     bwd_d, columns of dw in bwd_w, so no sum is split between threads and
 *     results do not depend on the thread count.
 *
 * Per image n and group g, output positions are taken in chunks of P
 * columns so the column buffer stays bounded (COL_BYTES) whatever the
 * problem size:
 *   fwd:   Y[Og x P]   = W_g[Og x K] * col[K x P]           K = C/G * prod(k)
 *   bwd_d: col[K x P]  = W_g^T * dY[Og x P], then col2im (scatter-add)
 *   bwd_w: dW_g[Og x K] += dY[Og x P] * row[P x K]           (row = col^T)
 * Padding modes are handled in the gathers through nconv__map_index, so
 * every mode runs here. Image by image, operands are gathered into dense
 * buffers of the compute type and the output is scattered back with the
 * epilogue. Summation order depends only on the problem: results are
 * deterministic.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { COL_BYTES = 1 << 21 }; /* the column buffer of a thread */
enum { BWD_W_UNIT = 16 };     /* columns of dw a bwd_w thread takes at a time: the widest f64 tile */

static int gemm_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    (void)c, (void)dir, (void)why_not;
    return 1;
}

typedef struct gemm_sizes {
    int64_t K, P;  /* rows of col, columns per chunk */
    int threads;   /* threads that run (f32: one) */
    size_t w;      /* shared: w */
    size_t x, y, col, off, pack, slot; /* per thread: one image's x and y, col, a chunk's tap offsets, GEMM packing */
} gemm_sizes;

static size_t sizes(const nconv_core *c, nconv_direction dir, int threads, gemm_sizes *s) {
    const int64_t OS = nconv__core_out_spatial(c);
    const int f64 = c->dt == NCONV_F64;
    const size_t el = f64 ? sizeof(double) : sizeof(float);
    s->K = (c->C / c->G) * nconv__core_kernel_spatial(c);
    s->P = (int64_t)(COL_BYTES / el) / s->K;
    if (s->P < 1) s->P = 1;
    if (s->P > OS) s->P = OS;
    const int64_t units = !f64 ? 1 : dir == NCONV_DIR_BWD_W ? nconv__div_up(s->K, BWD_W_UNIT) : c->N;
    if (threads > NCONV_MAX_THREADS) threads = NCONV_MAX_THREADS;
    s->threads = units < threads ? (int)units : threads;
    if (s->threads < 1) s->threads = 1;
    s->w = nconv__ws_round(el * (size_t)(c->O * s->K));
    s->x = nconv__ws_round(el * (size_t)(c->C * nconv__core_in_spatial(c)));
    s->y = nconv__ws_round(el * (size_t)(c->O * OS));
    s->col = nconv__ws_round(el * (size_t)(s->K * s->P));
    s->off = nconv__ws_round(sizeof(int64_t) * (size_t)(nconv__core_kernel_spatial(c) * s->P));
    s->pack = f64 ? nconv__ws_round(nconv__f64_gemm_pack_bytes()) : 0;
    s->slot = s->x + s->y + s->col + s->off + s->pack;
    return s->w + (size_t)s->threads * s->slot;
}

static size_t gemm_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    (void)copies; /* gathers every operand whatever its layout */
    gemm_sizes s;
    return sizes(c, dir, threads, &s);
}

/* off[t * np + p], p < np: the element tap t of output position p0 + p reads
 * in one channel of the input, -1 for a zero tap; the same for every image,
 * group and channel, so it is computed once per chunk. */
static void tap_table(const nconv_core *c, int64_t p0, int64_t np, int64_t *table) {
    for (int64_t t = 0; t < nconv__core_kernel_spatial(c); t++) {
        int64_t *off = table + t * np;
        const int64_t kd = t / (c->k[1] * c->k[2]), kh = (t / c->k[2]) % c->k[1], kw = t % c->k[2];
        int64_t ow = p0 % c->out[2], oh = (p0 / c->out[2]) % c->out[1], od = p0 / (c->out[1] * c->out[2]);
        int64_t id = nconv__map_index(od * c->s[0] - c->pb[0] + kd * c->d[0], c->in[0], c->mode);
        int64_t ih = nconv__map_index(oh * c->s[1] - c->pb[1] + kh * c->d[1], c->in[1], c->mode);
        for (int64_t p = 0; p < np; p++) {
            const int64_t iw = nconv__map_index(ow * c->s[2] - c->pb[2] + kw * c->d[2], c->in[2], c->mode);
            off[p] = (id < 0 || ih < 0 || iw < 0) ? -1 : (id * c->in[1] + ih) * c->in[2] + iw;
            if (++ow == c->out[2]) {
                ow = 0;
                if (++oh == c->out[1]) {
                    oh = 0;
                    ++od;
                    id = nconv__map_index(od * c->s[0] - c->pb[0] + kd * c->d[0], c->in[0], c->mode);
                }
                ih = nconv__map_index(oh * c->s[1] - c->pb[1] + kh * c->d[1], c->in[1], c->mode);
            }
        }
    }
}

/* Rows r in [r0, r1) of the column matrix (r = ci * KS + t) over output
 * positions of the chunk whose tap_table is off (np of them): mode 0 gathers
 * col[r - r0][p] (rows ldb apart) from xg, 1 scatter-adds col[r - r0][p] into
 * xg (the adjoint, any padding mode), 2 gathers row[p][r - r0]. One
 * definition per compute type. */
#define DEFINE_IM2COL(name, T)                                                                                  \
    static void name(const nconv_core *c, T *xg, T *buf, int64_t r0, int64_t r1, int64_t np, int64_t ldb,       \
                     int mode, const int64_t *table) {                                                          \
        const int64_t KS = nconv__core_kernel_spatial(c), IS = nconv__core_in_spatial(c), Cg = c->C / c->G;    \
        for (int64_t t = 0; t < KS; t++) {                                                                      \
            const int64_t lo = r0 > t ? nconv__div_up(r0 - t, KS) : 0, hi = r1 > t ? (r1 - 1 - t) / KS : -1;   \
            if (lo > hi || lo >= Cg) continue;                                                                  \
            const int64_t *off = table + t * np;                                                                \
            for (int64_t ci = lo; ci <= hi && ci < Cg; ci++) {                                                  \
                T *xc = xg + ci * IS, *row = buf + (ci * KS + t - r0) * (mode == 2 ? 1 : ldb);                 \
                switch (mode) {                                                                                 \
                case 0: for (int64_t p = 0; p < np; p++) row[p] = off[p] < 0 ? (T)0 : xc[off[p]]; break;       \
                case 1: for (int64_t p = 0; p < np; p++) if (off[p] >= 0) xc[off[p]] += row[p]; break;         \
                default: for (int64_t p = 0; p < np; p++) row[p * ldb] = off[p] < 0 ? (T)0 : xc[off[p]]; break; \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
    }
DEFINE_IM2COL(im2col_f32, float)
DEFINE_IM2COL(im2col_f64, double)

/* Image n's operand views; epi (with z's piece) when the call has an epilogue. */
static const nconv_epi *image_views(const nconv_exec *e, int64_t n, nconv_view *xn, nconv_view *yn, nconv_view *zn,
                                    nconv_epi *epi) {
    nconv__piece_view(e->x, n, 1, -1, 0, 0, xn);
    nconv__piece_view(e->y, n, 1, -1, 0, 0, yn);
    if (!e->epi) return NULL;
    *epi = *e->epi;
    if (epi->z) nconv__piece_view(epi->z, n, 1, -1, 0, 0, zn), epi->z = zn;
    return epi;
}

static nconv_status run_f32(const nconv_exec *e, const gemm_sizes *s, float *w, char *slot) {
    const nconv_core *c = e->c;
    float *x = (float *)slot, *y = (float *)(slot + s->x), *col = (float *)(slot + s->x + s->y);
    int64_t *off = (int64_t *)(slot + s->x + s->y + s->col);
    const int64_t Cg = c->C / c->G, Og = c->O / c->G, K = s->K;
    const int64_t IS = nconv__core_in_spatial(c), OS = nconv__core_out_spatial(c);

    int64_t table_p0 = -1; /* the chunk off holds */
    /* Per image: x [C, IS], y [O, OS]; w [O, K] (dw summed over the images); all dense f32. */
    if (e->dir != NCONV_DIR_BWD_W) nconv__gather_f32(e->w, w);
    if (e->dir == NCONV_DIR_BWD_W) memset(w, 0, sizeof(float) * (size_t)(c->O * K));
    for (int64_t n = 0; n < c->N; n++) {
        nconv_view xn, yn, zn;
        nconv_epi epi;
        const nconv_epi *ep = image_views(e, n, &xn, &yn, &zn, &epi);
        if (e->dir != NCONV_DIR_BWD_D) nconv__gather_f32(&xn, x);
        if (e->dir != NCONV_DIR_FWD) nconv__gather_f32(&yn, y);
        if (e->dir == NCONV_DIR_BWD_D) memset(x, 0, sizeof(float) * (size_t)(c->C * IS));
        for (int64_t p0 = 0; p0 < OS; p0 += s->P) {
            const int64_t np = OS - p0 < s->P ? OS - p0 : s->P;
            if (p0 != table_p0) tap_table(c, p0, np, off), table_p0 = p0;
            for (int64_t g = 0; g < c->G; g++) {
                float *xg = x + g * Cg * IS, *wg = w + g * Og * K, *yg = y + g * Og * OS;
                switch (e->dir) {
                case NCONV_DIR_FWD:
                    im2col_f32(c, xg, col, 0, K, np, np, 0, off);
                    nconv_f32_gemm__generic(Og, np, K, wg, K, 1, col, np, yg + p0, OS, 0);
                    break;
                case NCONV_DIR_BWD_D:
                    nconv_f32_gemm__generic(K, np, Og, wg, 1, K, yg + p0, OS, col, np, 0);
                    im2col_f32(c, xg, col, 0, K, np, np, 1, off);
                    break;
                case NCONV_DIR_BWD_W:
                    im2col_f32(c, xg, col, 0, K, np, K, 2, off);
                    nconv_f32_gemm__generic(Og, K, np, yg + p0, OS, 1, col, K, wg, K, 1);
                    break;
                }
            }
        }
        if (e->dir == NCONV_DIR_FWD) nconv__scatter(&yn, y, 0, ep);
        if (e->dir == NCONV_DIR_BWD_D) nconv__scatter(&xn, x, 0, ep);
    }
    if (e->dir == NCONV_DIR_BWD_W) nconv__scatter(e->w, w, 0, NULL);
    return NCONV_OK;
}

typedef struct f64_job {
    const nconv_exec *e;
    const gemm_sizes *s;
    double *w; /* fwd, bwd_d: the weights; bwd_w: dw, zeroed */
    char *slots;
} f64_job;

/* fwd, bwd_d: thread tid's share of the images; bwd_w: its share of dw's columns, over every image. */
static void f64_task(void *arg, int tid, int nthreads) {
    const f64_job *j = arg;
    const nconv_exec *e = j->e;
    const nconv_core *c = e->c;
    const gemm_sizes *s = j->s;
    (void)nthreads;
    if (tid >= s->threads) return;
    char *slot = j->slots + (size_t)tid * s->slot;
    double *x = (double *)slot, *y = (double *)(slot + s->x), *col = (double *)(slot + s->x + s->y);
    int64_t *off = (int64_t *)(slot + s->x + s->y + s->col);
    double *pack = (double *)(slot + s->x + s->y + s->col + s->off);
    const int64_t Cg = c->C / c->G, Og = c->O / c->G, K = s->K;
    const int64_t IS = nconv__core_in_spatial(c), OS = nconv__core_out_spatial(c);
    int64_t n0 = 0, n1 = c->N, r0 = 0, r1 = K, table_p0 = -1; /* the chunk off holds */
    if (e->dir == NCONV_DIR_BWD_W) {
        int64_t u0, u1;
        nconv__split(nconv__div_up(K, BWD_W_UNIT), tid, s->threads, &u0, &u1);
        r0 = u0 * BWD_W_UNIT, r1 = u1 * BWD_W_UNIT < K ? u1 * BWD_W_UNIT : K;
    } else {
        nconv__split(c->N, tid, s->threads, &n0, &n1);
    }
    for (int64_t n = n0; n < n1; n++) {
        nconv_view xn, yn, zn;
        nconv_epi epi;
        const nconv_epi *ep = image_views(e, n, &xn, &yn, &zn, &epi);
        if (e->dir != NCONV_DIR_BWD_D) nconv__gather_f64(&xn, x);
        if (e->dir != NCONV_DIR_FWD) nconv__gather_f64(&yn, y);
        if (e->dir == NCONV_DIR_BWD_D) memset(x, 0, sizeof(double) * (size_t)(c->C * IS));
        for (int64_t p0 = 0; p0 < OS; p0 += s->P) {
            const int64_t np = OS - p0 < s->P ? OS - p0 : s->P;
            if (p0 != table_p0) tap_table(c, p0, np, off), table_p0 = p0;
            for (int64_t g = 0; g < c->G; g++) {
                double *xg = x + g * Cg * IS, *wg = j->w + g * Og * K, *yg = y + g * Og * OS;
                switch (e->dir) {
                case NCONV_DIR_FWD:
                    im2col_f64(c, xg, col, 0, K, np, np, 0, off);
                    nconv__f64_gemm(e->k, Og, np, K, wg, K, 1, col, np, yg + p0, OS, 0, pack);
                    break;
                case NCONV_DIR_BWD_D:
                    nconv__f64_gemm(e->k, K, np, Og, wg, 1, K, yg + p0, OS, col, np, 0, pack);
                    im2col_f64(c, xg, col, 0, K, np, np, 1, off);
                    break;
                case NCONV_DIR_BWD_W:
                    im2col_f64(c, xg, col, r0, r1, np, r1 - r0, 2, off);
                    nconv__f64_gemm(e->k, Og, r1 - r0, np, yg + p0, OS, 1, col, r1 - r0, wg + r0, K, 1, pack);
                    break;
                }
            }
        }
        if (e->dir == NCONV_DIR_FWD) nconv__scatter(&yn, y, 1, ep);
        if (e->dir == NCONV_DIR_BWD_D) nconv__scatter(&xn, x, 1, ep);
    }
}

static nconv_status gemm_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    gemm_sizes s;
    sizes(c, e->dir, c->dt == NCONV_F64 ? nconv__parallel_width(e) : 1, &s);
    void *w = nconv__arena_take(e->ws, s.w);
    char *slots = nconv__arena_take(e->ws, (size_t)s.threads * s.slot);
    if (!w || !slots) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm gemm");
    if (c->dt != NCONV_F64) return run_f32(e, &s, w, slots);
    /* w [O, K] dense f64; dw summed over the images, each column by one thread */
    if (e->dir != NCONV_DIR_BWD_W) nconv__gather_f64(e->w, w);
    else memset(w, 0, s.w);
    f64_job job = {e, &s, w, slots};
    if (s.threads > 1) nconv__parallel(e, f64_task, &job);
    else f64_task(&job, 0, 1);
    if (e->dir == NCONV_DIR_BWD_W) nconv__scatter(e->w, w, 1, NULL);
    return NCONV_OK;
}

const nconv_algo nconv_algo_gemm = {.name = "gemm", .applies = gemm_applies, .workspace = gemm_workspace, .run = gemm_run};
