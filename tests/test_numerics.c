/*
 * Special values and uninitialised memory, for every algorithm:
 * - a NaN or an Inf in one element of an input (x, w, dy, bias, z) reaches
 *   exactly the outputs that read it, with the class (NaN, +Inf, -Inf,
 *   finite) the reference gives, as in PyTorch (relu keeps NaN);
 * - results do not depend on the workspace's contents: each call runs on a
 *   caller workspace filled with NaN and must match the reference.
 */
#include "test_util.h"

typedef test_buf arr;

static void arr_make(arr *a, int rank, const int64_t *shape, nconv_layout layout, uint64_t *rng) {
    test_buf_make(a, rank, shape, layout, rng, NAN);
}

enum { X, W, BIAS, Z, DY, Y, DX, DW, DB, NARR, FIRST_OUT = Y };

typedef struct set {
    arr a[NARR];
} set;

static void set_make(set *s, const nconv_problem *p, nconv_layout layout, uint64_t seed) {
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    const int r = p->ndims + 2;
    const int64_t *shape[NARR] = {xs, ws, &oc, ys, ys, ys, xs, ws, &oc};
    for (int i = 0; i < NARR; i++)
        arr_make(&s->a[i], i == BIAS || i == DB ? 1 : r, shape[i], layout, i < FIRST_OUT ? &seed : NULL);
}

static void set_free(set *s) {
    for (int i = 0; i < NARR; i++) free(s->a[i].data);
}

static nconv_status run(nconv_context *ctx, const nconv_problem *p, set *s, const nconv_epilogue *epi, void *ws,
                        size_t ws_size) {
    arr *a = s->a;
    nconv_status st =
        nconv_forward(ctx, p, epi, &a[X].t, &a[W].t, &a[BIAS].t, &a[Z].t, &a[Y].t, ws, ws_size);
    if (st) return st;
    if (ws) {
        size_t need = 0;
        nconv_workspace_size(ctx, p, NCONV_OP_BACKWARD, epi, &need);
        memset(ws, 0xff, need > ws_size ? ws_size : need);
    }
    return nconv_backward(ctx, p, epi, &a[X].t, &a[W].t, &a[Y].t, &a[DY].t, &a[DX].t, &a[DW].t, &a[DB].t, NULL, ws,
                          ws_size);
}

static int cls(float v) { return isnan(v) ? 0 : isinf(v) ? (v > 0 ? 1 : 2) : 3; }

static void random_problem(uint64_t *rng, nconv_problem *p) {
    for (;;) {
        nconv_problem_init(p, (int)test_int(rng, 1, 3));
        p->batch = test_int(rng, 1, 2);
        p->groups = test_int(rng, 1, 2);
        p->in_channels = p->groups * test_int(rng, 1, 5);
        p->out_channels = p->groups * test_int(rng, 1, 5);
        if (test_int(rng, 0, 4) == 0) p->in_channels = p->out_channels = p->groups = test_int(rng, 2, 9); /* depthwise */
        p->transposed = test_int(rng, 0, 2) == 0;
        if (!p->transposed) p->padding_mode = (nconv_padding_mode)test_int(rng, 0, 3);
        for (int i = 0; i < p->ndims; i++) {
            p->in_size[i] = test_int(rng, 2, p->ndims == 3 ? 4 : 7);
            p->kernel[i] = test_int(rng, 1, 3);
            p->stride[i] = test_int(rng, 1, 2);
            p->dilation[i] = test_int(rng, 1, 2);
            p->pad_begin[i] = test_int(rng, 0, 1);
            p->pad_end[i] = test_int(rng, 0, 1);
        }
        if (nconv_problem_validate(p) == NCONV_OK) return;
    }
}

static void test_special_values(void) {
    uint64_t rng = 2024;
    nconv_context *ref, *ctx;
    nconv_context_create(&ref);
    nconv_context_create(&ctx);
    nconv_context_set_algorithm(ref, "ref");
    int compared = 0;
    for (int iter = 0; iter < 120; iter++) {
        nconv_problem p;
        random_problem(&rng, &p);
        const nconv_layout layout = (nconv_layout)test_int(&rng, 0, 1);
        const nconv_epilogue epi = {test_int(&rng, 0, 1) ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.5};
        const int where = (int)test_int(&rng, X, DY);
        const float special = test_int(&rng, 0, 2) == 0 ? NAN : test_int(&rng, 0, 1) ? INFINITY : -INFINITY;
        const uint64_t seed = test_rng(&rng);
        set r;
        set_make(&r, &p, layout, seed);
        const int64_t at = (int64_t)(test_rng(&rng) % (uint64_t)r.a[where].n);
        r.a[where].data[at] = special;
        char desc[512] = "";
        nconv_problem_to_desc(&p, desc, sizeof desc);
        nconv_status st = run(ref, &p, &r, &epi, NULL, 0);
        CHECK(st == NCONV_OK, "ref on %s: %s", desc, nconv_last_error());
        for (int k = 0; k < nconv_algorithm_count(); k++) {
            const char *name = nconv_algorithm_name(k);
            if (!strcmp(name, "ref")) continue;
            nconv_context_set_algorithm(ctx, name);
            nconv_context_set_threads(ctx, (int)test_int(&rng, 1, 3));
            set s;
            set_make(&s, &p, layout, seed);
            s.a[where].data[at] = special;
            if (run(ctx, &p, &s, &epi, NULL, 0) == NCONV_OK) {
                for (int o = FIRST_OUT; o < NARR; o++) {
                    int64_t bad = -1;
                    for (int64_t i = 0; i < s.a[o].n && bad < 0; i++)
                        if (cls(s.a[o].data[i]) != cls(r.a[o].data[i])) bad = i;
                    CHECK(bad < 0, "%s: %g in operand %d[%lld], output %d[%lld] = %g, reference %g on %s (relu %d)",
                          name, special, where, (long long)at, o, (long long)bad, bad < 0 ? 0 : s.a[o].data[bad],
                          bad < 0 ? 0 : r.a[o].data[bad], desc, (int)epi.activation);
                }
                compared++;
            }
            set_free(&s);
        }
        set_free(&r);
    }
    CHECK(compared > 120, "only %d comparisons", compared);
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

static void test_nan_workspace(void) {
    uint64_t rng = 77;
    nconv_context *ref, *ctx;
    nconv_context_create(&ref);
    nconv_context_create(&ctx);
    nconv_context_set_algorithm(ref, "ref");
    int compared = 0;
    for (int iter = 0; iter < 80; iter++) {
        nconv_problem p;
        random_problem(&rng, &p);
        const nconv_layout layout = (nconv_layout)test_int(&rng, 0, 1);
        const nconv_epilogue epi = {test_int(&rng, 0, 1) ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.5};
        const uint64_t seed = test_rng(&rng);
        set r;
        set_make(&r, &p, layout, seed);
        run(ref, &p, &r, &epi, NULL, 0);
        for (int k = 0; k < nconv_algorithm_count(); k++) {
            const char *name = nconv_algorithm_name(k);
            nconv_context_set_algorithm(ctx, name);
            nconv_context_set_threads(ctx, (int)test_int(&rng, 1, 3));
            size_t f = 0, b = 0;
            nconv_workspace_size(ctx, &p, NCONV_OP_FORWARD, &epi, &f);
            nconv_workspace_size(ctx, &p, NCONV_OP_BACKWARD, &epi, &b);
            const size_t size = f > b ? f : b;
            void *ws = malloc(size);
            memset(ws, 0xff, size); /* all-ones bytes: NaN in f32 and f64 */
            set s;
            set_make(&s, &p, layout, seed);
            if (run(ctx, &p, &s, &epi, ws, size) == NCONV_OK) {
                for (int o = FIRST_OUT; o < NARR; o++) {
                    double md = 0, mr = 0;
                    for (int64_t i = 0; i < s.a[o].n; i++) {
                        double d = fabs((double)s.a[o].data[i] - r.a[o].data[i]);
                        if (!(d <= md) && !isnan(md)) md = d; /* the first NaN sticks */
                        if (fabs(r.a[o].data[i]) > mr) mr = fabs(r.a[o].data[i]);
                    }
                    CHECK(md <= 1e-5 * (mr > 1 ? mr : 1), "%s with a NaN workspace: output %d err %g",
                          name, o, md);
                }
                compared++;
            }
            set_free(&s);
            free(ws);
        }
        set_free(&r);
    }
    CHECK(compared > 160, "only %d comparisons", compared);
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

int main(void) {
    test_special_values();
    test_nan_workspace();
    return test_summary();
}
