/*
 * A path of algorithm "igemm": 1x1 convolution (stride 1, no padding) on
 * channel planes (NCHW f32), with no layout conversion.
 *
 * On planes such a convolution is a GEMM per image and group whose columns
 * are contiguous pixels:
 *   fwd:   y[o][p]  = sum_c w[o][c] * x[c][p]
 *   bwd_d: dx[c][p] = sum_o w[o][c] * dy[o][p]
 * Tile rows are output-side channels (A = the weights, packed [tile][k][6]
 * once per call), tile columns 16 pixels (B = one line of each input plane,
 * copied together per block), computed by the packed 6 x 16 micro-kernel,
 * which also starts each row at its bias and applies relu. Going through
 * NHWC instead costs two transposes of the activations, as much memory
 * traffic as the GEMM itself when channels are few.
 *
 * Threads split (image, group, run of 16-pixel tiles) units; each unit runs
 * the reduction in blocks, so every output is summed in one fixed order:
 * results do not depend on the thread count. With z, the tile is filled with bias +
 * alpha * z before the first block.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { MR = NCONV_MR, NR = NCONV_NR };
enum { K_BLOCK = 256 };        /* reduction rows per block */
enum { B_FLOATS = 32768 };     /* the packed B of a unit: 128 KiB, in L2 */
enum { MIN_PIXELS = 4 * NR }; /* fewer pixels per plane waste too many lanes: the NHWC path takes them */

static int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Spatial dims of a rank-5 activation view are one dense plane. */
static int is_planar_f32(const nconv_view *v) {
    return v->dt == NCONV_F32 && v->stride[4] == 1 && (v->shape[3] == 1 || v->stride[3] == v->shape[4]) &&
           (v->shape[2] == 1 || v->stride[2] == v->shape[3] * v->shape[4]);
}

/* Rows of the GEMM (output-side channels per group) and its reduction. */
static void dims(const nconv_core *c, nconv_direction dir, int64_t *rows, int64_t *red) {
    const int64_t Cg = c->C / c->G, Og = c->O / c->G;
    *rows = dir == NCONV_DIR_FWD ? Og : Cg;
    *red = dir == NCONV_DIR_FWD ? Cg : Og;
}

/* Per thread: the packed B panel, then the B rows of the current (image, group). */
static size_t scratch_bytes(int64_t red) { return sizeof(float) * B_FLOATS + sizeof(float *) * (size_t)red; }

int nconv__planes_1x1_shape(const nconv_core *c, nconv_direction dir) {
    if (dir == NCONV_DIR_BWD_W || c->dt != NCONV_F32) return 0;
    for (int i = 0; i < 3; i++)
        if (c->k[i] != 1 || c->s[i] != 1 || c->pb[i] != 0 || c->out[i] != c->in[i]) return 0;
    return nconv__core_in_spatial(c) >= MIN_PIXELS;
}

int nconv__planes_1x1_applies(const nconv_exec *e) {
    if (!nconv__planes_1x1_shape(e->c, e->dir) || e->w->dt != NCONV_F32) return 0;
    if (!is_planar_f32(e->x) || !is_planar_f32(e->y)) return 0;
    return !e->epi || !e->epi->z || is_planar_f32(e->epi->z);
}

size_t nconv__planes_1x1_workspace(const nconv_core *c, nconv_direction dir, int threads) {
    int64_t rows, red;
    dims(c, dir, &rows, &red);
    const size_t apack = sizeof(float) * (size_t)(c->G * div_up(rows, MR) * MR * red);
    const size_t init = sizeof(float) * (size_t)(c->G * rows);
    return nconv__ws_round(apack) + nconv__ws_round(init) + (size_t)threads * nconv__ws_round(scratch_bytes(red));
}

typedef struct planes_ctx {
    const nconv_exec *e;
    const nconv_kernels *k;
    int64_t rows, red, tiles, P;
    int64_t pt;     /* 16-pixel tiles per unit */
    int64_t blocks; /* units per plane */
    float *apack;      /* [G][tiles][red][MR] */
    const float *init; /* [G * rows]: the bias, or NULL */
    const nconv_view *src, *out, *z;
    double alpha;
    int relu;
    char *scratch; /* per thread, scratch_bytes(red) rounded */
} planes_ctx;

/* apack[g][t][k][r] = A[t * MR + r][k] of group g (zero past the rows). */
static void pack_task(void *arg, int tid, int nthreads) {
    const planes_ctx *pc = arg;
    const nconv_exec *e = pc->e;
    const nconv_view *w = e->w;
    const float *wd = w->data;
    const int fwd = e->dir == NCONV_DIR_FWD;
    const int64_t Og = e->c->O / e->c->G;
    int64_t u0, u1;
    nconv__split(e->c->G * pc->tiles, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t g = u / pc->tiles, t = u % pc->tiles;
        float *dst = pc->apack + u * pc->red * MR;
        for (int64_t r = 0; r < MR; r++) {
            const int64_t row = t * MR + r;
            if (row >= pc->rows) {
                for (int64_t k = 0; k < pc->red; k++) dst[k * MR + r] = 0.0f;
                continue;
            }
            /* fwd: w[g * Og + row][k]; bwd_d: w[g * Og + k][row] */
            const float *s = wd + (fwd ? (g * Og + row) * w->stride[0] : g * Og * w->stride[0] + row * w->stride[1]);
            const int64_t ks = fwd ? w->stride[1] : w->stride[0];
            for (int64_t k = 0; k < pc->red; k++) dst[k * MR + r] = s[k * ks];
        }
    }
}

/* A unit is pt tiles of 16 pixels of one (image, group). Planes lie pages
 * apart, so each row tile writes its rows for all pt tiles in turn, and B
 * is copied for all of them at once: both touch each page once per unit
 * rather than once per tile (measured 1.2-1.5x on 56x56 planes). */
static void run_task(void *arg, int tid, int nthreads) {
    const planes_ctx *pc = arg;
    const nconv_core *c = pc->e->c;
    const nconv_view *src = pc->src, *out = pc->out, *z = pc->z;
    char *scratch = pc->scratch + (size_t)tid * nconv__ws_round(scratch_bytes(pc->red));
    float *bpack = (float *)scratch; /* [tile][k][NR], 64-byte aligned: the arena rounds */
    const float **brows = (const float **)(bpack + B_FLOATS);
    const int64_t ldc = out->stride[1];
    int64_t u0, u1;
    nconv__split(c->N * c->G * pc->blocks, tid, nthreads, &u0, &u1);
    int64_t cur = -1; /* the (image, group) brows hold */
    for (int64_t u = u0; u < u1; u++) {
        const int64_t ng = u / pc->blocks, n = ng / c->G, g = ng % c->G;
        const int64_t q0 = (u % pc->blocks) * pc->pt * NR, q1 = q0 + pc->pt * NR < pc->P ? q0 + pc->pt * NR : pc->P;
        if (ng != cur) {
            const float *s = (const float *)src->data + n * src->stride[0] + g * pc->red * src->stride[1];
            for (int64_t k = 0; k < pc->red; k++) brows[k] = s + k * src->stride[1];
            cur = ng;
        }
        float *o = (float *)out->data + n * out->stride[0] + g * pc->rows * out->stride[1];
        /* z goes in before the GEMM (with the bias); a bias alone starts the rows. */
        if (z)
            for (int64_t r = 0; r < pc->rows; r++) {
                const float b = pc->init ? pc->init[g * pc->rows + r] : 0.0f;
                const float *zs = (const float *)z->data + n * z->stride[0] + (g * pc->rows + r) * z->stride[1];
                for (int64_t q = q0; q < q1; q++) o[r * ldc + q] = b + (float)pc->alpha * zs[q];
            }
        for (int64_t k0 = 0; k0 < pc->red; k0 += K_BLOCK) {
            const int64_t kc = pc->red - k0 < K_BLOCK ? pc->red - k0 : K_BLOCK;
            for (int64_t k = 0; k < kc; k++) {
                const float *b = brows[k0 + k];
                for (int64_t p0 = q0; p0 < q1; p0 += NR) {
                    float *d = bpack + ((p0 - q0) / NR * kc + k) * NR;
                    if (q1 - p0 >= NR) {
                        memcpy(d, b + p0, sizeof(float) * NR);
                    } else {
                        memcpy(d, b + p0, sizeof(float) * (size_t)(q1 - p0));
                        memset(d + (q1 - p0), 0, sizeof(float) * (size_t)(NR - (q1 - p0)));
                    }
                }
            }
            const int flags = (z || k0 > 0 ? NCONV_GEMM_ACCUMULATE : 0) | (pc->relu && k0 + kc == pc->red ? NCONV_GEMM_RELU : 0);
            for (int64_t t = 0; t < pc->tiles; t++) {
                const int64_t mr = pc->rows - t * MR < MR ? pc->rows - t * MR : MR;
                const float *a = pc->apack + ((g * pc->tiles + t) * pc->red + k0) * MR;
                const float *rinit = pc->init ? pc->init + g * pc->rows + t * MR : NULL;
                for (int64_t p0 = q0; p0 < q1; p0 += NR) {
                    const int64_t nc = q1 - p0 < NR ? q1 - p0 : NR;
                    pc->k->gemm(mr, nc, kc, a, bpack + (p0 - q0) / NR * kc * NR, o + t * MR * ldc + p0, ldc, rinit, flags);
                }
            }
        }
    }
}

nconv_status nconv__planes_1x1_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    planes_ctx pc;
    memset(&pc, 0, sizeof pc);
    pc.e = e;
    pc.k = nconv__kernels();
    dims(c, e->dir, &pc.rows, &pc.red);
    pc.tiles = div_up(pc.rows, MR);
    pc.P = nconv__core_in_spatial(c);
    const int64_t kb = pc.red < K_BLOCK ? pc.red : K_BLOCK;
    pc.pt = B_FLOATS / (kb * NR);
    if (pc.pt > 8) pc.pt = 8;
    pc.blocks = div_up(pc.P, pc.pt * NR);
    const int threads = e->threads;
    pc.apack = nconv__arena_take(e->ws, sizeof(float) * (size_t)(c->G * pc.tiles * MR * pc.red));
    float *init = nconv__arena_take(e->ws, sizeof(float) * (size_t)(c->G * pc.rows));
    pc.scratch = nconv__arena_take(e->ws, (size_t)threads * nconv__ws_round(scratch_bytes(pc.red)));
    if (!pc.apack || !init || !pc.scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    const int fwd = e->dir == NCONV_DIR_FWD;
    pc.src = fwd ? e->x : e->y;
    pc.out = fwd ? e->y : e->x;
    if (e->epi) {
        if (e->epi->bias) {
            nconv__epi_init(e->epi, init, c->G * pc.rows);
            pc.init = init;
        }
        pc.z = e->epi->z;
        pc.alpha = e->epi->alpha;
        pc.relu = e->epi->relu;
    }
    nconv__parallel(threads, pack_task, &pc);
    nconv__parallel(threads, run_task, &pc);
    return NCONV_OK;
}
