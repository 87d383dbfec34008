/*
 * Plans: made once, executed many times. Each execution is compared bit for
 * bit with the one-shot call on the same operands (the same algorithm runs),
 * across weight changes, reshapes and 8 threads sharing one plan; packed
 * weights are shown to be the ones used; every allocation of creation,
 * packing and execution fails in turn without a leak; misuse is refused with
 * a message naming the operand.
 */
#include "test_util.h"

#include "../src/internal.h" /* the plan's packed weights */

#include <pthread.h>
#include <unistd.h>

typedef test_buf buf;

static void buf_make(buf *b, int rank, const int64_t *shape, nconv_layout layout, uint64_t *rng) {
    test_buf_make(b, rank, shape, layout, rng, 1234.5f);
}

static int buf_equal(const buf *a, const buf *b) {
    return a->n == b->n && !memcmp(a->data, b->data, sizeof(float) * (size_t)a->n);
}

/* One problem's operands in one layout (rank 1 for the bias). */
typedef struct ops {
    nconv_problem p;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    buf x, w, w2, bias, y, ref, dy, dx, dw, db;
} ops;

static void ops_make(ops *o, const nconv_problem *p, nconv_layout layout, uint64_t seed) {
    memset(o, 0, sizeof *o);
    o->p = *p;
    nconv_problem_shapes(p, o->xs, o->ws, o->ys);
    const int r = p->ndims + 2;
    int64_t oc = p->out_channels;
    uint64_t rng = seed;
    buf_make(&o->x, r, o->xs, layout, &rng);
    buf_make(&o->w, r, o->ws, layout, &rng);
    buf_make(&o->w2, r, o->ws, layout, &rng);
    buf_make(&o->bias, 1, &oc, layout, &rng);
    buf_make(&o->dy, r, o->ys, layout, &rng);
    buf_make(&o->y, r, o->ys, layout, NULL);
    buf_make(&o->ref, r, o->ys, layout, NULL);
    buf_make(&o->dx, r, o->xs, layout, NULL);
    buf_make(&o->dw, r, o->ws, layout, NULL);
    buf_make(&o->db, 1, &oc, layout, NULL);
}

static void ops_free(ops *o) {
    buf *all[] = {&o->x, &o->w, &o->w2, &o->bias, &o->y, &o->ref, &o->dy, &o->dx, &o->dw, &o->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->data);
}

static nconv_problem conv2d(int64_t n, int64_t c, int64_t o, int64_t g, int64_t hw, int64_t k, int64_t s) {
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = n, p.in_channels = c, p.out_channels = o, p.groups = g;
    p.in_size[0] = p.in_size[1] = hw;
    p.kernel[0] = p.kernel[1] = k, p.stride[0] = p.stride[1] = s;
    p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = k / 2;
    return p;
}

static nconv_plan *make_plan(nconv_context *ctx, const nconv_problem *p, nconv_op op, unsigned outputs,
                             nconv_layout layout) {
    nconv_plan_desc d;
    nconv_plan_desc_init(&d, op);
    if (outputs) d.outputs = outputs;
    d.layout = layout;
    nconv_plan *plan = NULL;
    nconv_status st = nconv_plan_create(ctx, p, &d, &plan);
    CHECK(st == NCONV_OK && plan, "plan_create: %s", nconv_last_error());
    return plan;
}

static nconv_status plan_forward(const nconv_plan *plan, ops *o, const nconv_tensor *w, const nconv_tensor *bias) {
    const nconv_variant_pack v = {.x = &o->x.t, .w = w, .bias = bias, .y = &o->y.t};
    return nconv_plan_execute(plan, &v);
}

static nconv_status oneshot_forward(nconv_context *ctx, ops *o, const buf *w, int with_bias) {
    return nconv_forward(ctx, &o->p, NULL, &o->x.t, &w->t, with_bias ? &o->bias.t : NULL, NULL, &o->ref.t, NULL, 0);
}

/* Whether direction dir of a plan with packed weights reads them alone: channels-last operands,
 * and NCHW on igemm_planes (the row GEMM's NCHW path reads the plain copy). */
static int runs_on_packed(const nconv_plan *plan, nconv_direction dir, nconv_layout layout) {
    const char *a = NULL;
    nconv_plan_algorithm(plan, dir, &a);
    return plan->packed[dir] && plan->has_w && (layout == NCONV_LAYOUT_NXC || (a && !strcmp(a, "igemm_planes")));
}

/* With algo, the plan must have chosen it for direction dir. */
static void check_chosen(const nconv_plan *plan, nconv_direction dir, const char *name, const char *algo) {
    const char *chosen = NULL;
    nconv_plan_algorithm(plan, dir, &chosen);
    CHECK(!algo || (chosen && !strcmp(chosen, algo)), "%s: the plan chose %s, not %s", name, chosen, algo);
}

/* Forward through a plan: weights given once, then changed, then per call; the packed form is
 * what runs where the plan has one and reads it alone (runs_on_packed: the plan's plain copy
 * is wiped and the results stay). With algo, the plan must have chosen it. */
static void test_forward(const char *name, const nconv_problem *p, nconv_layout layout, const char *algo,
                         int expect_packed) {
    nconv_context *ctx;
    nconv_context_create(&ctx);
    if (algo) nconv_context_set_algorithm(ctx, algo);
    ops o;
    ops_make(&o, p, layout == NCONV_LAYOUT_ANY ? NCONV_LAYOUT_NCX : layout, 11);
    nconv_plan *plan = make_plan(ctx, p, NCONV_OP_FORWARD, 0, layout);
    if (!plan) goto done;
    CHECK_ERROR(plan_forward(plan, &o, NULL, NULL), NCONV_INVALID_ARGUMENT, "the plan has no weights");
    CHECK(nconv_plan_set_weights(plan, &o.w.t, &o.bias.t) == NCONV_OK, "%s: set_weights: %s", name,
          nconv_last_error());
    const nconv_direction dir = p->transposed ? NCONV_DIR_BWD_D : NCONV_DIR_FWD;
    CHECK((plan->packed[dir] != NULL) == expect_packed, "%s: packed weights %s (expected %s)", name,
          plan->packed[dir] ? "kept" : "absent", expect_packed ? "kept" : "absent");
    check_chosen(plan, dir, name, algo);
    oneshot_forward(ctx, &o, &o.w, 1);
    for (int i = 0; i < 3; i++) {
        CHECK(plan_forward(plan, &o, NULL, NULL) == NCONV_OK && buf_equal(&o.y, &o.ref),
              "%s: execution %d differs from the one-shot call (%s)", name, i, nconv_last_error());
        memset(o.y.data, 0, sizeof(float) * (size_t)o.y.n);
    }
    /* new weights, and the plan's plain copy wiped: a packed plan still computes them */
    CHECK(nconv_plan_set_weights(plan, &o.w2.t, &o.bias.t) == NCONV_OK, "%s: %s", name, nconv_last_error());
    if (runs_on_packed(plan, dir, layout)) memset(plan->w.data, 0, sizeof(float) * (size_t)o.w.n);
    oneshot_forward(ctx, &o, &o.w2, 1);
    CHECK(plan_forward(plan, &o, NULL, NULL) == NCONV_OK && buf_equal(&o.y, &o.ref),
          "%s: after new weights the execution differs (%s)", name, nconv_last_error());
    /* weights of the call's own: its bias too (none here) */
    oneshot_forward(ctx, &o, &o.w, 0);
    CHECK(plan_forward(plan, &o, &o.w.t, NULL) == NCONV_OK && buf_equal(&o.y, &o.ref),
          "%s: weights per call differ (%s)", name, nconv_last_error());
    /* dropped: the plan has none again */
    CHECK(nconv_plan_set_weights(plan, NULL, NULL) == NCONV_OK && !plan->has_w && !plan->packed[dir], "%s", name);
    CHECK_ERROR(plan_forward(plan, &o, NULL, NULL), NCONV_INVALID_ARGUMENT, "the plan has no weights");
    nconv_plan_destroy(plan);
done:
    ops_free(&o);
    nconv_context_destroy(ctx);
}

/* Backward's dx on packed weights, and dw, db, with relu, against the one-shot call; with algo,
 * the algorithm the plan must have chosen for dx. */
static void test_backward(const char *name, const nconv_problem *p, nconv_layout layout, const char *algo,
                          int expect_packed) {
    nconv_context *ctx;
    nconv_context_create(&ctx);
    ops o, r;
    ops_make(&o, p, layout, 5);
    ops_make(&r, p, layout, 5);
    const nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};
    nconv_forward(ctx, p, &relu, &o.x.t, &o.w.t, NULL, NULL, &o.y.t, NULL, 0);
    memcpy(r.y.data, o.y.data, sizeof(float) * (size_t)o.y.n);
    nconv_plan_desc d;
    nconv_plan_desc_init(&d, NCONV_OP_BACKWARD);
    d.epi = relu, d.layout = layout;
    nconv_plan *plan = NULL;
    CHECK(nconv_plan_create(ctx, p, &d, &plan) == NCONV_OK, "%s: %s", name, nconv_last_error());
    if (plan) {
        CHECK(nconv_plan_set_weights(plan, &o.w.t, NULL) == NCONV_OK, "%s: %s", name, nconv_last_error());
        const nconv_direction dir = p->transposed ? NCONV_DIR_FWD : NCONV_DIR_BWD_D;
        CHECK((plan->packed[dir] != NULL) == expect_packed, "%s: packed dx weights %s", name,
              plan->packed[dir] ? "kept" : "absent");
        check_chosen(plan, dir, name, algo);
        if (runs_on_packed(plan, dir, layout)) memset(plan->w.data, 0, sizeof(float) * (size_t)o.w.n);
        const nconv_variant_pack v = {.x = &o.x.t, .y = &o.y.t, .dy = &o.dy.t, .dx = &o.dx.t, .dw = &o.dw.t,
                                      .db = &o.db.t};
        nconv_backward(ctx, p, &relu, &r.x.t, &r.w.t, &r.y.t, &r.dy.t, &r.dx.t, &r.dw.t, &r.db.t, NULL, NULL, 0);
        CHECK(nconv_plan_execute(plan, &v) == NCONV_OK && buf_equal(&o.dx, &r.dx) && buf_equal(&o.dw, &r.dw) &&
                  buf_equal(&o.db, &r.db),
              "%s: the plan's backward differs from the one-shot call (%s)", name, nconv_last_error());
        nconv_plan_destroy(plan);
    }
    ops_free(&o);
    ops_free(&r);
    nconv_context_destroy(ctx);
}

/* One plan, reshaped up and down: each batch against the one-shot call with the plan's
 * algorithm (kept through reshapes), weights kept. */
static void test_reshape(void) {
    nconv_context *ctx, *same;
    nconv_context_create(&ctx);
    nconv_context_create(&same);
    nconv_problem p = conv2d(3, 16, 24, 1, 9, 3, 1);
    ops w;
    ops_make(&w, &p, NCONV_LAYOUT_NXC, 3);
    nconv_plan *plan = make_plan(ctx, &p, NCONV_OP_FORWARD, 0, NCONV_LAYOUT_NXC);
    if (plan) {
        nconv_plan_set_weights(plan, &w.w.t, &w.bias.t);
        const void *packed = plan->packed[NCONV_DIR_FWD];
        const char *algo = NULL;
        nconv_plan_algorithm(plan, NCONV_DIR_FWD, &algo);
        nconv_context_set_algorithm(same, algo);
        const int64_t batches[] = {7, 1, 0, 12, 3};
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
            CHECK(nconv_plan_reshape(plan, batches[i]) == NCONV_OK, "reshape to %lld: %s", (long long)batches[i],
                  nconv_last_error());
            CHECK(plan->packed[NCONV_DIR_FWD] == packed, "reshape to %lld repacked the weights", (long long)batches[i]);
            nconv_problem q = p;
            q.batch = batches[i];
            ops o;
            ops_make(&o, &q, NCONV_LAYOUT_NXC, 40 + i);
            nconv_forward(same, &q, NULL, &o.x.t, &w.w.t, &w.bias.t, NULL, &o.ref.t, NULL, 0);
            CHECK(plan_forward(plan, &o, NULL, NULL) == NCONV_OK && buf_equal(&o.y, &o.ref),
                  "batch %lld after reshape: differs from the one-shot call (%s)", (long long)batches[i],
                  nconv_last_error());
            ops_free(&o);
        }
        size_t before, after;
        nconv_plan_workspace_size(plan, &before);
        CHECK_ERROR(nconv_plan_reshape(plan, -1), NCONV_INVALID_ARGUMENT, "batch = -1");
        nconv_plan_workspace_size(plan, &after);
        CHECK(before == after && plan->p.batch == 3, "a failed reshape changed the plan");
        nconv_plan_destroy(plan);
    }
    ops_free(&w);
    nconv_context_destroy(ctx);
    nconv_context_destroy(same);
}

/* 8 threads execute one plan at once, each on its own operands (half with their own workspace). */
typedef struct caller {
    const nconv_plan *plan;
    ops o;
    void *ws;
    size_t ws_size;
    int failures;
} caller;

static void *caller_run(void *arg) {
    caller *c = arg;
    for (int i = 0; i < 10; i++) {
        const nconv_variant_pack v = {.x = &c->o.x.t, .y = &c->o.y.t, .workspace = c->ws, .workspace_size = c->ws_size};
        memset(c->o.y.data, 0, sizeof(float) * (size_t)c->o.y.n);
        if (nconv_plan_execute(c->plan, &v) || !buf_equal(&c->o.y, &c->o.ref)) c->failures++;
    }
    return NULL;
}

static void test_threads(void) {
    enum { CALLERS = 8 };
    nconv_context *ctx;
    nconv_context_create(&ctx);
    nconv_context_set_threads(ctx, 2);
    nconv_problem p = conv2d(2, 32, 32, 1, 12, 3, 1);
    ops w;
    ops_make(&w, &p, NCONV_LAYOUT_NXC, 9);
    nconv_plan *plan = make_plan(ctx, &p, NCONV_OP_FORWARD, 0, NCONV_LAYOUT_NXC);
    caller c[CALLERS];
    pthread_t tid[CALLERS];
    if (plan) {
        nconv_plan_set_weights(plan, &w.w.t, &w.bias.t);
        size_t need = 0;
        nconv_plan_workspace_size(plan, &need);
        for (int i = 0; i < CALLERS; i++) {
            memset(&c[i], 0, sizeof c[i]);
            c[i].plan = plan;
            ops_make(&c[i].o, &p, NCONV_LAYOUT_NXC, 100 + (uint64_t)i);
            nconv_forward(ctx, &p, NULL, &c[i].o.x.t, &w.w.t, &w.bias.t, NULL, &c[i].o.ref.t, NULL, 0);
            if (i % 2) c[i].ws = malloc(need), c[i].ws_size = need;
        }
        for (int i = 0; i < CALLERS; i++) pthread_create(&tid[i], NULL, caller_run, &c[i]);
        for (int i = 0; i < CALLERS; i++) pthread_join(tid[i], NULL);
        for (int i = 0; i < CALLERS; i++) {
            CHECK(c[i].failures == 0, "caller %d: %d of 10 executions failed or differed", i, c[i].failures);
            ops_free(&c[i].o);
            free(c[i].ws);
        }
        nconv_plan_destroy(plan);
    }
    ops_free(&w);
    nconv_context_destroy(ctx);
}

/* Creation, packing and execution with the k-th allocation failing, for every k: each step
 * fails cleanly or succeeds, the output is untouched by a failed execution, nothing leaks. A
 * successful execution gives the bits of a one-shot call of the algorithm the plan chose (the
 * benchmark policy's choice follows the timings, which need not be the heuristic's). */
static void test_allocation_failures(nconv_algo_policy policy) {
    nconv_problem p = conv2d(2, 16, 32, 1, 10, 3, 1);
    ops o;
    ops_make(&o, &p, NCONV_LAYOUT_NXC, 21);
    int done = 0;
    for (int64_t k = 1; k < 200 && !done; k++) {
        test_hook h = {0, 0, k};
        const nconv_allocator a = {test_hook_alloc, test_hook_free, &h};
        nconv_context *ctx = NULL;
        if (nconv_context_create_with_allocator(&ctx, &a)) {
            CHECK(h.live == 0, "k %lld: a failed context creation leaked", (long long)k);
            continue;
        }
        nconv_context_set_policy(ctx, policy);
        nconv_plan_desc d;
        nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
        d.layout = NCONV_LAYOUT_NXC;
        nconv_plan *plan = NULL;
        nconv_status st = nconv_plan_create(ctx, &p, &d, &plan);
        if (!st) st = nconv_plan_set_weights(plan, &o.w.t, &o.bias.t);
        for (int64_t i = 0; i < o.y.n; i++) o.y.data[i] = 1234.5f;
        if (!st) st = plan_forward(plan, &o, NULL, NULL);
        CHECK(st == NCONV_OK || st == NCONV_OUT_OF_MEMORY, "k %lld: status %d: %s", (long long)k, (int)st,
              nconv_last_error());
        if (st) {
            CHECK(o.y.data[0] == 1234.5f, "k %lld: a failed execution wrote y", (long long)k);
        } else {
            const char *algo = NULL;
            nconv_context *one = NULL;
            nconv_plan_algorithm(plan, NCONV_DIR_FWD, &algo);
            CHECK(algo && nconv_context_create(&one) == NCONV_OK && nconv_context_set_algorithm(one, algo) == NCONV_OK &&
                      nconv_forward(one, &p, NULL, &o.x.t, &o.w.t, &o.bias.t, NULL, &o.ref.t, NULL, 0) == NCONV_OK,
                  "k %lld: the one-shot call of %s: %s", (long long)k, algo ? algo : "(none)", nconv_last_error());
            nconv_context_destroy(one);
            CHECK(buf_equal(&o.y, &o.ref), "k %lld: the result differs from the one-shot call of %s", (long long)k, algo);
        }
        done = st == NCONV_OK && h.calls < k; /* nothing failed: every k has been tried */
        nconv_plan_destroy(plan);
        nconv_context_destroy(ctx);
        CHECK(h.live == 0, "k %lld: %lld allocations leaked", (long long)k, (long long)h.live);
    }
    CHECK(done, "policy %d: allocations kept failing", (int)policy);
    ops_free(&o);
}

static void test_misuse(void) {
    nconv_problem p = conv2d(2, 8, 8, 1, 6, 3, 1);
    ops o;
    ops_make(&o, &p, NCONV_LAYOUT_NCX, 2);
    nconv_plan_desc d;
    nconv_plan *plan = NULL;
    CHECK_ERROR(nconv_plan_desc_init(&d, (nconv_op)7), NCONV_INVALID_ARGUMENT, "op = 7");
    nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
    d.outputs = NCONV_OUT_DX;
    CHECK_ERROR(nconv_plan_create(NULL, &p, &d, &plan), NCONV_INVALID_ARGUMENT, "desc outputs = 0x1");
    nconv_plan_desc_init(&d, NCONV_OP_BACKWARD);
    d.with_z = 1;
    CHECK_ERROR(nconv_plan_create(NULL, &p, &d, &plan), NCONV_INVALID_ARGUMENT, "only a forward plan takes z");
    nconv_plan_desc_init(&d, NCONV_OP_DOUBLE_BACKWARD);
    d.epi.activation = NCONV_ACT_RELU;
    CHECK_ERROR(nconv_plan_create(NULL, &p, &d, &plan), NCONV_INVALID_ARGUMENT, "has no epilogue");
    nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
    d.layout = (nconv_layout)9;
    CHECK_ERROR(nconv_plan_create(NULL, &p, &d, &plan), NCONV_INVALID_ARGUMENT, "desc layout = 9");
    CHECK(plan == NULL, "a failed creation returned a plan");
    /* the problem is validated with the one-shot calls' messages */
    nconv_problem bad = p;
    bad.groups = 3;
    nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
    nconv_forward(NULL, &bad, NULL, &o.x.t, &o.w.t, NULL, NULL, &o.y.t, NULL, 0);
    char want[512];
    snprintf(want, sizeof want, "%s", nconv_last_error());
    CHECK(nconv_plan_create(NULL, &bad, &d, &plan) == NCONV_INVALID_ARGUMENT && !strcmp(nconv_last_error(), want),
          "'%s' (one-shot: '%s')", nconv_last_error(), want);
    /* execution: unused fields, missing weights, z and layouts the plan was not made for */
    plan = make_plan(NULL, &p, NCONV_OP_FORWARD, 0, NCONV_LAYOUT_NXC);
    if (plan) {
        const nconv_variant_pack swapped = {.x = &o.x.t, .w = &o.w.t, .dx = &o.y.t};
        CHECK_ERROR(nconv_plan_execute(plan, &swapped), NCONV_INVALID_ARGUMENT,
                    "variant pack dx is set, but a forward plan does not use it");
        const nconv_variant_pack with_z = {.x = &o.x.t, .w = &o.w.t, .z = &o.ref.t, .y = &o.y.t};
        CHECK_ERROR(nconv_plan_execute(plan, &with_z), NCONV_INVALID_ARGUMENT, "made without it (desc with_z = 0)");
        CHECK_ERROR(plan_forward(plan, &o, &o.w.t, NULL), NCONV_INVALID_ARGUMENT,
                    "x: its strides need a channels-last copy, which the plan was not made for");
        CHECK_ERROR(nconv_plan_execute(plan, NULL), NCONV_INVALID_ARGUMENT, "vp is NULL");
        nconv_tensor nowhere = o.w.t;
        nowhere.data = NULL;
        CHECK_ERROR(nconv_plan_set_weights(plan, &nowhere, NULL), NCONV_INVALID_ARGUMENT, "w->data is NULL");
        CHECK(!plan->has_w, "failed weights were kept");
        CHECK_ERROR(nconv_plan_set_weights(plan, NULL, &o.bias.t), NCONV_INVALID_ARGUMENT, "bias is given without w");
        const char *name = NULL;
        CHECK(nconv_plan_algorithm(plan, NCONV_DIR_FWD, &name) == NCONV_OK && name, "algorithm of the plan");
        CHECK(nconv_plan_algorithm(plan, NCONV_DIR_BWD_W, &name) == NCONV_OK && !name, "a direction it does not run");
        nconv_plan_destroy(plan);
    }
    plan = make_plan(NULL, &p, NCONV_OP_BACKWARD, NCONV_OUT_DW, NCONV_LAYOUT_ANY);
    if (plan) {
        CHECK_ERROR(nconv_plan_set_weights(plan, &o.w.t, NULL), NCONV_INVALID_ARGUMENT, "reads no weights");
        const nconv_variant_pack v = {.x = &o.x.t, .dy = &o.dy.t, .dw = &o.dw.t, .db = &o.db.t};
        CHECK_ERROR(nconv_plan_execute(plan, &v), NCONV_INVALID_ARGUMENT, "db is given, but the plan was made without it");
        nconv_plan_destroy(plan);
    }
    plan = make_plan(NULL, &p, NCONV_OP_BACKWARD, 0, NCONV_LAYOUT_ANY);
    if (plan) {
        CHECK_ERROR(nconv_plan_set_weights(plan, &o.w.t, &o.bias.t), NCONV_INVALID_ARGUMENT,
                    "only a forward plan adds a bias");
        nconv_plan_destroy(plan);
    }
    CHECK(nconv_plan_destroy(NULL) == NCONV_OK, "destroy NULL");
    ops_free(&o);
}

/* Double backward through a plan (weights given to it for conv(ggx, w)) against the one-shot call. */
static void test_double_backward(void) {
    nconv_problem p = conv2d(2, 8, 12, 2, 7, 3, 1);
    ops o, g;
    ops_make(&o, &p, NCONV_LAYOUT_NCX, 31);
    ops_make(&g, &p, NCONV_LAYOUT_NCX, 32); /* g.x, g.w, g.bias: ggx, ggw, ggb */
    buf ggy[2], gx[2], gw[2];
    for (int i = 0; i < 2; i++) {
        buf_make(&ggy[i], 4, o.ys, NCONV_LAYOUT_NCX, NULL);
        buf_make(&gx[i], 4, o.xs, NCONV_LAYOUT_NCX, NULL);
        buf_make(&gw[i], 4, o.ws, NCONV_LAYOUT_NCX, NULL);
    }
    nconv_double_backward(NULL, &p, &o.x.t, &o.w.t, &o.dy.t, &g.x.t, &g.w.t, &g.bias.t, &ggy[0].t, &gx[0].t, &gw[0].t);
    nconv_plan *plan = make_plan(NULL, &p, NCONV_OP_DOUBLE_BACKWARD, 0, NCONV_LAYOUT_ANY);
    if (plan) {
        CHECK(nconv_plan_set_weights(plan, &o.w.t, NULL) == NCONV_OK, "%s", nconv_last_error());
        const nconv_variant_pack v = {.x = &o.x.t, .dy = &o.dy.t, .ggx = &g.x.t, .ggw = &g.w.t, .ggb = &g.bias.t,
                                      .ggy = &ggy[1].t, .gx = &gx[1].t, .gw = &gw[1].t};
        CHECK(nconv_plan_execute(plan, &v) == NCONV_OK && buf_equal(&ggy[0], &ggy[1]) && buf_equal(&gx[0], &gx[1]) &&
                  buf_equal(&gw[0], &gw[1]),
              "double backward through a plan differs from the one-shot call (%s)", nconv_last_error());
        nconv_plan_destroy(plan);
    }
    for (int i = 0; i < 2; i++) free(ggy[i].data), free(gx[i].data), free(gw[i].data);
    ops_free(&o);
    ops_free(&g);
}

/* NCONV_VERBOSE names the algorithm that ran: a forced Winograd forward declines an input
 * with NaN, which igemm computes. */
typedef struct fwd_call {
    nconv_context *ctx;
    const nconv_problem *p;
    ops *o;
} fwd_call;

static int run_forward(void *arg) {
    const fwd_call *f = arg;
    return nconv_forward(f->ctx, f->p, NULL, &f->o->x.t, &f->o->w.t, NULL, NULL, &f->o->y.t, NULL, 0);
}

static void test_verbose_fallback(void) {
    nconv_problem p = conv2d(1, 8, 8, 1, 8, 3, 1);
    ops o;
    ops_make(&o, &p, NCONV_LAYOUT_NXC, 4);
    o.x.data[5] = NAN;
    nconv_context *ctx;
    nconv_context_create(&ctx);
    nconv_context_set_algorithm(ctx, "winograd");
    char text[4096] = "";
    fwd_call call = {ctx, &p, &o};
    const nconv_status st = (nconv_status)test_verbose_run(run_forward, &call, text, sizeof text);
    CHECK(st == NCONV_OK, "%s", nconv_last_error());
    CHECK(strstr(text, "algo=igemm,declined by winograd") && !strstr(text, "algo=winograd"),
          "verbose output: '%s'", text);
    nconv_context_destroy(ctx);
    ops_free(&o);
}

/* A plan for channels-last f16 / bf16 operands reads the source (x forward, dy backward-data)
 * in place, widening igemm's A rows as it packs them (Winograd's input patches as it transforms
 * them), and narrows the output from f32 rows: a forward plan's workspace holds no copy of x
 * (smaller than the NCHW plan's by at least x in f32; backward-data's also covers the algorithm
 * igemm hands non-finite weights to, which copies), an execution within exactly that workspace
 * agrees with the reference and writes every element (bias and relu in the kernel; relu's mask
 * backward; one thread: whole rows widened and narrowed a block at a time), and operands that
 * are not channels-last are refused. */
static void h_fill(uint16_t *h, int64_t n, nconv_dtype dt, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) {
        const float v = (float)test_uniform(rng);
        h[i] = dt == NCONV_F16 ? nconv__f32_to_f16(v) : nconv__f32_to_bf16(v);
    }
}

static double h_err(const uint16_t *a, const uint16_t *b, int64_t n, nconv_dtype dt) {
    double md = 0, mr = 0;
    for (int64_t i = 0; i < n; i++) {
        const double va = nconv__load(a, dt, i), vb = nconv__load(b, dt, i), d = fabs(va - vb);
        if (!(d <= md) && !isnan(md)) md = d; /* the first NaN sticks */
        if (fabs(vb) > mr) mr = fabs(vb);
    }
    return md / (mr > 0 ? mr : 1);
}

static void test_16bit_in_place(void) {
    const nconv_dtype dts[] = {NCONV_F16, NCONV_BF16};
    /* n c o g hw k, and the algorithm */
    const int64_t shapes[][7] = {
        {2, 24, 40, 1, 9, 3, 0}, {3, 64, 48, 1, 16, 1, 0}, {2, 32, 36, 2, 10, 3, 0}, {2, 24, 40, 1, 9, 3, 1}};
    const char *const algos[] = {"igemm", "winograd"};
    uint64_t rng = 16;
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < 4; si++)
            for (int bwd = 0; bwd < 2; bwd++) {
                const int64_t *q = shapes[si];
                nconv_problem p = conv2d(q[0], q[1], q[2], q[3], q[4], q[5], 1);
                p.dtype = dts[di];
                nconv_context *ctx, *ref;
                nconv_context_create(&ctx), nconv_context_create(&ref);
                nconv_context_set_algorithm(ctx, algos[q[6]]), nconv_context_set_algorithm(ref, "ref");
                nconv_context_set_threads(ctx, si == 1 ? 1 : 2); /* one thread: whole rows, one conversion per block */
                const nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};
                nconv_plan_desc d;
                nconv_plan_desc_init(&d, bwd ? NCONV_OP_BACKWARD : NCONV_OP_FORWARD);
                if (bwd) d.outputs = NCONV_OUT_DX;
                d.epi = relu;
                nconv_plan *pl[2] = {NULL, NULL};
                size_t wsz[2] = {0, 0};
                for (int l = 0; l < 2; l++) {
                    d.layout = l ? NCONV_LAYOUT_NCX : NCONV_LAYOUT_NXC;
                    CHECK(nconv_plan_create(ctx, &p, &d, &pl[l]) == NCONV_OK, "%s", nconv_last_error());
                    if (pl[l]) nconv_plan_workspace_size(pl[l], &wsz[l]);
                }
                int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
                nconv_problem_shapes(&p, xs, ws, ys);
                const int64_t nx = xs[0] * xs[1] * xs[2] * xs[3], nw = ws[0] * ws[1] * ws[2] * ws[3],
                              ny = ys[0] * ys[1] * ys[2] * ys[3], oc = p.out_channels;
                const int64_t src = bwd ? ny : nx, dst = bwd ? nx : ny;
                CHECK(bwd || wsz[0] + 4 * (size_t)src <= wsz[1],
                      "dtype %d shape %d: NHWC plan's workspace %zu, NCHW %zu", (int)p.dtype, si, wsz[0], wsz[1]);
                uint16_t *hx = malloc(2 * (size_t)nx), *hw = malloc(2 * (size_t)nw), *hb = malloc(2 * (size_t)oc);
                uint16_t *hy = malloc(2 * (size_t)ny), *hdy = malloc(2 * (size_t)ny);
                uint16_t *out = malloc(2 * (size_t)dst), *want = malloc(2 * (size_t)dst);
                h_fill(hx, nx, p.dtype, &rng), h_fill(hw, nw, p.dtype, &rng), h_fill(hb, oc, p.dtype, &rng);
                h_fill(hdy, ny, p.dtype, &rng);
                nconv_tensor tx, tw, tb, ty, tdy, to, tw_, tncx;
                nconv_tensor_init(&tx, hx, 4, xs, NCONV_LAYOUT_NXC);
                nconv_tensor_init(&tw, hw, 4, ws, NCONV_LAYOUT_NXC);
                nconv_tensor_init(&tb, hb, 1, &oc, NCONV_LAYOUT_NCX);
                nconv_tensor_init(&ty, hy, 4, ys, NCONV_LAYOUT_NXC);
                nconv_tensor_init(&tdy, hdy, 4, ys, NCONV_LAYOUT_NXC);
                nconv_tensor_init(&to, out, 4, bwd ? xs : ys, NCONV_LAYOUT_NXC);
                nconv_tensor_init(&tw_, want, 4, bwd ? xs : ys, NCONV_LAYOUT_NXC);
                nconv_tensor_init(&tncx, bwd ? hdy : hx, 4, bwd ? ys : xs, NCONV_LAYOUT_NCX);
                /* y (relu's mask for backward) and the reference */
                CHECK(nconv_forward(ref, &p, &relu, &tx, &tw, &tb, NULL, bwd ? &ty : &tw_, NULL, 0) == NCONV_OK, "%s",
                      nconv_last_error());
                if (bwd)
                    CHECK(nconv_backward(ref, &p, &relu, &tx, &tw, &ty, &tdy, &tw_, NULL, NULL, NULL, NULL, 0) ==
                              NCONV_OK,
                          "%s", nconv_last_error());
                for (int64_t i = 0; i < dst; i++) out[i] = 0x7fff; /* a NaN in both dtypes: every element written */
                void *mem = malloc(wsz[0] ? wsz[0] : 1);
                nconv_variant_pack v = {.x = &tx, .w = &tw, .workspace = mem, .workspace_size = wsz[0]};
                if (bwd) v.y = &ty, v.dy = &tdy, v.dx = &to;
                else v.bias = &tb, v.y = &to;
                CHECK(pl[0] && nconv_plan_execute(pl[0], &v) == NCONV_OK, "%s", nconv_last_error());
                const double e = h_err(out, want, dst, p.dtype), tol = p.dtype == NCONV_F16 ? 4e-3 : 3e-2;
                CHECK(e <= tol, "dtype %d shape %d %s in place: err %g", (int)p.dtype, si, bwd ? "bwd_d" : "fwd", e);
                if (bwd) v.dy = &tncx;
                else v.x = &tncx;
                if (pl[0])
                    CHECK_ERROR(nconv_plan_execute(pl[0], &v), NCONV_INVALID_ARGUMENT,
                                "not both channels-last, which the plan was made for");
                nconv_plan_destroy(pl[0]), nconv_plan_destroy(pl[1]);
                nconv_context_destroy(ctx), nconv_context_destroy(ref);
                free(mem), free(hx), free(hw), free(hb), free(hy), free(hdy), free(out), free(want);
            }
}

int main(void) {
    nconv_problem dense = conv2d(2, 16, 24, 1, 10, 3, 1), pw = conv2d(3, 64, 32, 1, 7, 1, 1);
    nconv_problem grouped = conv2d(2, 16, 16, 4, 8, 3, 1), dw = conv2d(2, 16, 16, 16, 9, 3, 1);
    nconv_problem deep = conv2d(1, 512, 512, 1, 4, 3, 1); /* 9 MiB of weights, few rows: panel-major */
    nconv_problem s2 = conv2d(2, 24, 16, 1, 11, 3, 2), tr = conv2d(2, 16, 24, 1, 6, 4, 2);
    tr.transposed = 1, tr.pad_begin[0] = tr.pad_begin[1] = tr.pad_end[0] = tr.pad_end[1] = 1;
    nconv_problem tr3 = conv2d(2, 16, 24, 1, 7, 3, 1); /* Winograd's bwd_d: flipped, transposed U */
    tr3.transposed = 1;
    nconv_problem dwt = conv2d(2, 16, 16, 16, 8, 5, 2); /* depthwise bwd_d: weights packed by tap phase */
    dwt.transposed = 1, dwt.pad_begin[0] = dwt.pad_begin[1] = dwt.pad_end[0] = dwt.pad_end[1] = 2;
    /* NCHW planes: A's last tile one and two rows deep (13 and 20 rows), groups of six and eight
     * channels, and an RGB-like input layer (a gather of three channels' taps) */
    nconv_problem pwp = conv2d(2, 20, 13, 1, 9, 1, 1), pwg = conv2d(2, 24, 18, 3, 9, 1, 1);
    nconv_problem thin = conv2d(2, 3, 16, 1, 17, 3, 2);
    test_forward("dense nhwc", &dense, NCONV_LAYOUT_NXC, "igemm", 1);
    test_forward("dense nhwc heuristic", &dense, NCONV_LAYOUT_NXC, NULL, 1);
    test_forward("winograd nhwc", &dense, NCONV_LAYOUT_NXC, "winograd", 1);
    test_forward("winograd transposed", &tr3, NCONV_LAYOUT_NXC, "winograd", 1);
    test_forward("dense nchw", &dense, NCONV_LAYOUT_NCX, NULL, 1);
    test_forward("1x1 nhwc", &pw, NCONV_LAYOUT_NXC, NULL, 1);
    test_forward("deep nhwc", &deep, NCONV_LAYOUT_NXC, "igemm", 1);
    test_forward("grouped nhwc", &grouped, NCONV_LAYOUT_NXC, NULL, 0);
    test_forward("depthwise nchw", &dw, NCONV_LAYOUT_NCX, NULL, 1);
    test_forward("depthwise nhwc", &dw, NCONV_LAYOUT_NXC, NULL, 1);
    test_forward("depthwise transposed nhwc", &dwt, NCONV_LAYOUT_NXC, NULL, 1);
    test_forward("transposed nhwc", &tr, NCONV_LAYOUT_NXC, "igemm", 1);
    test_forward("stride 2 gemm", &s2, NCONV_LAYOUT_ANY, "gemm", 0);
    test_forward("1x1 nchw planes", &pwp, NCONV_LAYOUT_NCX, "igemm_planes", 1);
    test_forward("grouped 1x1 nchw planes", &pwg, NCONV_LAYOUT_NCX, "igemm_planes", 1);
    test_forward("thin nchw planes", &thin, NCONV_LAYOUT_NCX, "igemm_planes", 1);
    test_backward("stride 2 nhwc", &s2, NCONV_LAYOUT_NXC, NULL, 1);
    test_backward("dense nchw", &dense, NCONV_LAYOUT_NCX, NULL, 1);
    test_backward("transposed nhwc", &tr, NCONV_LAYOUT_NXC, NULL, 1);
    test_backward("1x1 nchw planes", &pwp, NCONV_LAYOUT_NCX, "igemm_planes", 1);
    test_backward("grouped 1x1 nchw planes", &pwg, NCONV_LAYOUT_NCX, "igemm_planes", 1);
    test_reshape();
    test_threads();
    test_allocation_failures(NCONV_POLICY_HEURISTIC);
    test_allocation_failures(NCONV_POLICY_BENCHMARK);
    test_misuse();
    test_double_backward();
    test_verbose_fallback();
    test_16bit_in_place();
    return test_summary();
}
