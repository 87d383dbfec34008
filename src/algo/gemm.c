/*
 * Algorithm "gemm": im2col + GEMM in f32 (f32, f16 and bf16 problems). The
 * portable fallback and the only fast path for bwd_d with reflect,
 * replicate or circular padding, whose adjoint is a scatter.
 *
 * Per image n and group g, output positions are taken in chunks of P
 * columns so the column buffer stays bounded (COL_BUDGET) whatever the
 * problem size:
 *   fwd:   Y[Og x P]   = W_g[Og x K] * col[K x P]           K = C/G * prod(k)
 *   bwd_d: col[K x P]  = W_g^T * dY[Og x P], then col2im (scatter-add)
 *   bwd_w: dW_g[Og x K] += dY[Og x P] * row[P x K]           (row = col^T)
 * Padding modes are handled in the gathers through nconv__map_index, so
 * every mode runs here. Image by image, operands are gathered into dense
 * f32 buffers and the output is scattered back with the epilogue. Summation
 * order depends only on the problem: results are deterministic.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { COL_BUDGET = 1 << 19 }; /* floats in the column buffer: 2 MiB */

static int gemm_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    (void)dir;
    if (c->dt == NCONV_F64) {
        if (why_not) *why_not = "f64 problems run on the reference (f64 accumulation)";
        return 0;
    }
    return 1;
}

typedef struct gemm_sizes {
    int64_t K, P; /* rows of col, columns per chunk */
    size_t x, w, y, col;
} gemm_sizes;

/* x and y: one image's (the call goes image by image). */
static size_t sizes(const nconv_core *c, gemm_sizes *s) {
    const int64_t OS = nconv__core_out_spatial(c);
    s->K = (c->C / c->G) * nconv__core_kernel_spatial(c);
    s->P = COL_BUDGET / s->K;
    if (s->P < 1) s->P = 1;
    if (s->P > OS) s->P = OS;
    s->x = sizeof(float) * (size_t)(c->C * nconv__core_in_spatial(c));
    s->w = sizeof(float) * (size_t)(c->O * s->K);
    s->y = sizeof(float) * (size_t)(c->O * OS);
    s->col = sizeof(float) * (size_t)(s->K * s->P);
    return nconv__ws_round(s->x) + nconv__ws_round(s->w) + nconv__ws_round(s->y) + nconv__ws_round(s->col);
}

static size_t gemm_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    (void)dir, (void)threads, (void)copies; /* gathers every operand whatever its layout */
    gemm_sizes s;
    return sizes(c, &s);
}

/* Walks every row r = (ci, kd, kh, kw) of the column matrix over output
 * positions [p0, p0 + np), with the input element each tap reads (none for
 * a zero tap). mode 0 gathers col[r][p] from xg, 1 scatter-adds col[r][p]
 * into xg_out (the adjoint, any padding mode), 2 gathers row[p][r]. */
static void im2col_rows(const nconv_core *c, const float *xg, float *xg_out, float *buf, int64_t p0,
                        int64_t np, int64_t ldb, int mode) {
    const int64_t KS = nconv__core_kernel_spatial(c), IS = nconv__core_in_spatial(c);
    const int64_t Cg = c->C / c->G;
    for (int64_t ci = 0; ci < Cg; ci++) {
        for (int64_t t = 0; t < KS; t++) {
            const int64_t kd = t / (c->k[1] * c->k[2]), kh = (t / c->k[2]) % c->k[1], kw = t % c->k[2];
            const int64_t r = ci * KS + t;
            int64_t ow = p0 % c->out[2], oh = (p0 / c->out[2]) % c->out[1], od = p0 / (c->out[1] * c->out[2]);
            int64_t id = nconv__map_index(od * c->s[0] - c->pb[0] + kd * c->d[0], c->in[0], c->mode);
            int64_t ih = nconv__map_index(oh * c->s[1] - c->pb[1] + kh * c->d[1], c->in[1], c->mode);
            for (int64_t p = 0; p < np; p++) {
                const int64_t iw = nconv__map_index(ow * c->s[2] - c->pb[2] + kw * c->d[2], c->in[2], c->mode);
                const int64_t off = (id < 0 || ih < 0 || iw < 0) ? -1 : ci * IS + (id * c->in[1] + ih) * c->in[2] + iw;
                switch (mode) {
                case 0: buf[r * ldb + p] = off < 0 ? 0.0f : xg[off]; break;
                case 1: if (off >= 0) xg_out[off] += buf[r * ldb + p]; break;
                default: buf[p * ldb + r] = off < 0 ? 0.0f : xg[off]; break;
                }
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
}

static nconv_status gemm_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    gemm_sizes s;
    sizes(c, &s);
    float *x = nconv__arena_take(e->ws, s.x), *w = nconv__arena_take(e->ws, s.w);
    float *y = nconv__arena_take(e->ws, s.y), *col = nconv__arena_take(e->ws, s.col);
    if (!x || !w || !y || !col) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm gemm");
    const int64_t Cg = c->C / c->G, Og = c->O / c->G, K = s.K;
    const int64_t IS = nconv__core_in_spatial(c), OS = nconv__core_out_spatial(c);

    /* Per image: x [C, IS], y [O, OS]; w [O, K] (dw summed over the images); all dense f32. */
    if (e->dir != NCONV_DIR_BWD_W) nconv__gather_f32(e->w, w);
    if (e->dir == NCONV_DIR_BWD_W) memset(w, 0, s.w);
    for (int64_t n = 0; n < c->N; n++) {
        nconv_view xn, yn, zn;
        nconv__piece_view(e->x, n, 1, -1, 0, 0, &xn);
        nconv__piece_view(e->y, n, 1, -1, 0, 0, &yn);
        nconv_epi epi;
        if (e->epi) {
            epi = *e->epi;
            if (epi.z) nconv__piece_view(epi.z, n, 1, -1, 0, 0, &zn), epi.z = &zn;
        }
        if (e->dir != NCONV_DIR_BWD_D) nconv__gather_f32(&xn, x);
        if (e->dir != NCONV_DIR_FWD) nconv__gather_f32(&yn, y);
        if (e->dir == NCONV_DIR_BWD_D) memset(x, 0, s.x);
        for (int64_t g = 0; g < c->G; g++) {
            float *xg = x + g * Cg * IS;
            float *wg = w + g * Og * K;
            float *yg = y + g * Og * OS;
            for (int64_t p0 = 0; p0 < OS; p0 += s.P) {
                const int64_t np = OS - p0 < s.P ? OS - p0 : s.P;
                switch (e->dir) {
                case NCONV_DIR_FWD:
                    im2col_rows(c, xg, NULL, col, p0, np, np, 0);
                    nconv_f32_gemm__generic(Og, np, K, wg, K, 1, col, np, yg + p0, OS, 0);
                    break;
                case NCONV_DIR_BWD_D:
                    nconv_f32_gemm__generic(K, np, Og, wg, 1, K, yg + p0, OS, col, np, 0);
                    im2col_rows(c, NULL, xg, col, p0, np, np, 1);
                    break;
                case NCONV_DIR_BWD_W:
                    im2col_rows(c, xg, NULL, col, p0, np, K, 2);
                    nconv_f32_gemm__generic(Og, K, np, yg + p0, OS, 1, col, K, wg, K, 1);
                    break;
                }
            }
        }
        if (e->dir == NCONV_DIR_FWD) nconv__scatter(&yn, y, 0, e->epi ? &epi : NULL);
        if (e->dir == NCONV_DIR_BWD_D) nconv__scatter(&xn, x, 0, e->epi ? &epi : NULL);
    }
    if (e->dir == NCONV_DIR_BWD_W) nconv__scatter(e->w, w, 0, NULL);
    return NCONV_OK;
}

const nconv_algo nconv_algo_gemm = {.name = "gemm", .applies = gemm_applies, .workspace = gemm_workspace, .run = gemm_run};
