/*
 * Algorithm "ref": every problem, every dtype. Gathers operands into dense
 * f64 buffers, runs src/ref, and scatters the result with the epilogue
 * applied in f64. Slow by design; it is the oracle and the last resort.
 */
#include "../internal.h"

static int ref_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    (void)c, (void)dir, (void)why_not;
    return 1;
}

static size_t sizes(const nconv_core *c, size_t *xs, size_t *ws, size_t *ys, size_t *ts) {
    *xs = sizeof(double) * (size_t)(c->N * c->C * nconv__core_in_spatial(c));
    *ws = sizeof(double) * (size_t)(c->O * (c->C / c->G) * nconv__core_kernel_spatial(c));
    *ys = sizeof(double) * (size_t)(c->N * c->O * nconv__core_out_spatial(c));
    *ts = sizeof(int64_t) * (size_t)(c->k[0] + c->k[1] + c->k[2]);
    return nconv__ws_round(*xs) + nconv__ws_round(*ws) + nconv__ws_round(*ys) + nconv__ws_round(*ts);
}

static size_t ref_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    (void)dir, (void)threads, (void)copies;
    size_t a, b, d, e;
    return sizes(c, &a, &b, &d, &e);
}

static nconv_status ref_run(const nconv_exec *e) {
    const nconv_core *c = e->c;
    size_t xs, ws, ys, ts;
    sizes(c, &xs, &ws, &ys, &ts);
    double *x = nconv__arena_take(e->ws, xs), *w = nconv__arena_take(e->ws, ws);
    double *y = nconv__arena_take(e->ws, ys);
    int64_t *taps = nconv__arena_take(e->ws, ts);
    if (!x || !w || !y || !taps)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm ref");
    switch (e->dir) {
    case NCONV_DIR_FWD:
        nconv__gather_f64(e->x, x);
        nconv__gather_f64(e->w, w);
        nconv__ref_fwd(c, x, w, y, taps);
        nconv__scatter(e->y, y, 1, e->epi);
        break;
    case NCONV_DIR_BWD_D:
        nconv__gather_f64(e->y, y);
        nconv__gather_f64(e->w, w);
        nconv__ref_bwd_d(c, y, w, x, taps);
        nconv__scatter(e->x, x, 1, e->epi);
        break;
    case NCONV_DIR_BWD_W:
        nconv__gather_f64(e->x, x);
        nconv__gather_f64(e->y, y);
        nconv__ref_bwd_w(c, x, y, w, taps);
        nconv__scatter(e->w, w, 1, NULL);
        break;
    }
    return NCONV_OK;
}

const nconv_algo nconv_algo_ref = {.name = "ref", .applies = ref_applies, .workspace = ref_workspace, .run = ref_run};
