/*
 * Resources: every allocation fails in turn, the context's own first (an
 * allocator hook failing the k-th allocation, for every k): the call returns
 * NCONV_OUT_OF_MEMORY, leaks nothing and leaves its outputs untouched. The
 * memory limit refuses before allocating; strides that overflow, outputs
 * that alias inputs, other outputs or themselves are rejected.
 */
#include "test_util.h"

typedef struct buf {
    float *data;
    int64_t n;
    nconv_tensor t;
} buf;

/* `copies` dense tensors of the given shape one after another (a batch);
 * inputs random, outputs a fixed pattern. */
static void buf_make(buf *b, int rank, const int64_t *shape, nconv_layout layout, uint64_t *rng, int output,
                     int64_t copies) {
    b->n = copies;
    for (int i = 0; i < rank; i++) b->n *= shape[i];
    b->data = malloc(sizeof(float) * (size_t)b->n);
    for (int64_t i = 0; i < b->n; i++) b->data[i] = output ? 1234.5f : (float)test_uniform(rng);
    nconv_tensor_init(&b->t, b->data, rank, shape, layout);
}

enum { X, W, B, Z, DY, GGX, GGW, GGB, Y, DX, DW, DB, DZ, GGY, GX, GW, NBUF };
enum { FIRST_OUT = Y };

typedef struct fixture {
    nconv_problem p;
    buf b[NBUF];
    int64_t batch; /* > 0: batched calls over this many problems */
} fixture;

static void fixture_make(fixture *f, int64_t batch, nconv_layout layout) {
    memset(f, 0, sizeof *f);
    nconv_problem_init(&f->p, 2);
    f->p.batch = 2, f->p.in_channels = 4, f->p.out_channels = 6, f->p.groups = 2;
    f->p.in_size[0] = 7, f->p.in_size[1] = 9;
    f->p.kernel[0] = f->p.kernel[1] = 3;
    f->p.pad_begin[0] = f->p.pad_end[0] = f->p.pad_begin[1] = f->p.pad_end[1] = 1;
    f->p.stride[1] = 2;
    f->batch = batch;
    int64_t xs[5], ws[5], ys[5], bs[1] = {f->p.out_channels};
    nconv_problem_shapes(&f->p, xs, ws, ys);
    /* Batched tensors are [B, slice] dense: B outermost, which the group fold
     * cannot use as a view, so the batched calls copy (allocate). */
    uint64_t rng = 5;
    const int64_t *shape[NBUF] = {xs, ws, bs, ys, ys, xs, ws, bs, ys, xs, ws, bs, ys, ys, xs, ws};
    for (int i = 0; i < NBUF; i++) {
        const int vec = i == B || i == DB || i == GGB;
        buf_make(&f->b[i], vec ? 1 : f->p.ndims + 2, shape[i], vec ? NCONV_LAYOUT_NCX : layout, &rng,
                 i >= FIRST_OUT, batch ? batch : 1);
    }
}

static void fixture_free(fixture *f) {
    for (int i = 0; i < NBUF; i++) free(f->b[i].data);
}

static void reset_outputs(fixture *f) {
    for (int i = FIRST_OUT; i < NBUF; i++)
        for (int64_t j = 0; j < f->b[i].n; j++) f->b[i].data[j] = 1234.5f;
}

static int outputs_untouched(const fixture *f) {
    for (int i = FIRST_OUT; i < NBUF; i++)
        for (int64_t j = 0; j < f->b[i].n; j++)
            if (f->b[i].data[j] != 1234.5f) return 0;
    return 1;
}

/* The batch strides: each batched operand's slices one slice apart. */
static nconv_batch batch_of(const fixture *f) {
    nconv_batch bt = {f->batch, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    bt.x = bt.dx = f->b[X].n / f->batch;
    bt.y = bt.dy = bt.dz = bt.z = f->b[Y].n / f->batch;
    bt.w = bt.dw = f->b[W].n / f->batch;
    bt.bias = bt.db = f->p.out_channels;
    return bt;
}

enum { OP_FWD, OP_BWD, OP_DBL, OP_FWD_BATCHED, OP_PER_SAMPLE, NOPS };
static const char *const op_names[NOPS] = {"forward", "backward", "double backward", "forward batched",
                                           "per-sample backward"};

static nconv_status run(nconv_context *ctx, fixture *f, int op) {
    buf *b = f->b;
    const nconv_epilogue relu = {NCONV_ACT_RELU, 0.5};
    switch (op) {
    case OP_FWD:
        return nconv_forward(ctx, &f->p, &relu, &b[X].t, &b[W].t, &b[B].t, &b[Z].t, &b[Y].t, NULL, 0);
    case OP_BWD: /* y of the forward is the fixed pattern: relu passes everything */
        return nconv_backward(ctx, &f->p, &relu, &b[X].t, &b[W].t, &b[Z].t, &b[DY].t, &b[DX].t, &b[DW].t, &b[DB].t,
                              &b[DZ].t, NULL, 0);
    case OP_DBL:
        return nconv_double_backward(ctx, &f->p, &b[X].t, &b[W].t, &b[DY].t, &b[GGX].t, &b[GGW].t, &b[GGB].t,
                                     &b[GGY].t, &b[GX].t, &b[GW].t);
    case OP_FWD_BATCHED: {
        nconv_batch bt = batch_of(f);
        return nconv_forward_batched(ctx, &f->p, &relu, &bt, &b[X].t, &b[W].t, &b[B].t, &b[Z].t, &b[Y].t);
    }
    case OP_PER_SAMPLE: {
        nconv_batch bt = batch_of(f);
        bt.w = 0; /* shared weight, per-sample dw and db */
        return nconv_backward_batched(ctx, &f->p, NULL, &bt, &b[X].t, &b[W].t, NULL, &b[DY].t, &b[DX].t, &b[DW].t,
                                      &b[DB].t, NULL);
    }
    }
    return NCONV_INTERNAL_ERROR;
}

static void test_failing_allocations(void) {
    const nconv_algo_policy policies[] = {NCONV_POLICY_HEURISTIC, NCONV_POLICY_BENCHMARK};
    for (int op = 0; op < NOPS; op++)
        for (int pi = 0; pi < 2; pi++)
            for (int lay = 0; lay < 2; lay++) {
                const int batched = op >= OP_FWD_BATCHED;
                fixture f, good;
                fixture_make(&f, batched ? 3 : 0, (nconv_layout)lay);
                fixture_make(&good, batched ? 3 : 0, (nconv_layout)lay);
                test_hook h = {0, 0, 0};
                const nconv_allocator a = {test_hook_alloc, test_hook_free, &h};
                nconv_context *ctx;
                nconv_context_create_with_allocator(&ctx, &a);
                nconv_context_set_threads(ctx, 2);
                nconv_context_set_policy(ctx, policies[pi]);
                nconv_status st = run(ctx, &good, op);
                nconv_context_destroy(ctx);
                CHECK(st == NCONV_OK, "%s: %s", op_names[op], nconv_last_error());
                CHECK(h.live == 0, "%s leaks %lld allocations", op_names[op], (long long)h.live);
                const int64_t total = h.calls;
                CHECK(total >= (batched ? 3 : 1), "%s: only %lld allocations through the hook", op_names[op], (long long)total);
                for (int64_t k = 1; k <= total; k++) {
                    test_hook hk = {0, 0, k};
                    const nconv_allocator ak = {test_hook_alloc, test_hook_free, &hk};
                    nconv_context *fresh = NULL;
                    st = nconv_context_create_with_allocator(&fresh, &ak);
                    if (k == 1) { /* the context itself */
                        CHECK(st == NCONV_OUT_OF_MEMORY && !fresh && hk.live == 0, "context creation: status %d",
                              (int)st);
                        continue;
                    }
                    ctx = fresh;
                    nconv_context_set_threads(ctx, 2);
                    nconv_context_set_policy(ctx, policies[pi]);
                    reset_outputs(&f);
                    st = run(ctx, &f, op);
                    nconv_context_destroy(ctx);
                    /* A failed plan-cache growth only forgets the winner: the call
                     * succeeds (the benchmark may pick another algorithm: not bitwise). */
                    int ok = st == NCONV_OUT_OF_MEMORY ? outputs_untouched(&f) : st == NCONV_OK;
                    if (st == NCONV_OK)
                        for (int i = FIRST_OUT; i < NBUF; i++)
                            for (int64_t j = 0; j < f.b[i].n; j++)
                                ok = ok && fabsf(f.b[i].data[j] - good.b[i].data[j]) <=
                                               1e-4f * (1 + fabsf(good.b[i].data[j]));
                    CHECK(ok, "%s (policy %d, layout %d), allocation %lld of %lld fails: status %d, %s", op_names[op],
                          pi, lay, (long long)k, (long long)total, (int)st, nconv_last_error());
                    CHECK(hk.live == 0, "%s, allocation %lld fails: %lld leaked", op_names[op], (long long)k,
                          (long long)hk.live);
                }
                fixture_free(&f);
                fixture_free(&good);
            }
}

static void test_memory_limit(void) {
    for (int op = 0; op < NOPS; op++) {
        fixture f;
        fixture_make(&f, op >= OP_FWD_BATCHED ? 3 : 0, NCONV_LAYOUT_NCX);
        test_hook h = {0, 0, 0};
        const nconv_allocator a = {test_hook_alloc, test_hook_free, &h};
        nconv_context *ctx;
        nconv_context_create(&ctx);
        nconv_context_set_allocator(ctx, &a);
        nconv_context_set_memory_limit(ctx, 256);
        CHECK_ERROR(run(ctx, &f, op), NCONV_OUT_OF_MEMORY, "memory limit of 256 bytes");
        CHECK(h.calls == 0 && outputs_untouched(&f), "%s: %lld allocations before the limit refused",
              op_names[op], (long long)h.calls);
        nconv_context_set_memory_limit(ctx, (size_t)64 << 20);
        CHECK(run(ctx, &f, op) == NCONV_OK, "%s within the limit: %s", op_names[op], nconv_last_error());
        nconv_context_destroy(ctx);
        CHECK(h.live == 0, "%s leaks", op_names[op]);
        fixture_free(&f);
    }
    /* A caller workspace does not count against the limit. */
    fixture f;
    fixture_make(&f, 0, NCONV_LAYOUT_NCX);
    nconv_context *ctx;
    nconv_context_create(&ctx);
    nconv_context_set_memory_limit(ctx, 1);
    size_t need = 0;
    nconv_workspace_size(ctx, &f.p, NCONV_OP_FORWARD, NULL, &need);
    void *ws = malloc(need);
    CHECK(nconv_forward(ctx, &f.p, NULL, &f.b[X].t, &f.b[W].t, NULL, NULL, &f.b[Y].t, ws, need) == NCONV_OK,
          "caller workspace under a 1-byte limit: %s", nconv_last_error());
    free(ws);
    nconv_context_destroy(ctx);
    fixture_free(&f);
    const nconv_allocator half = {test_hook_alloc, NULL, NULL};
    nconv_context_create(&ctx);
    CHECK_ERROR(nconv_context_set_allocator(ctx, &half), NCONV_INVALID_ARGUMENT, "allocator->free is NULL");
    CHECK_ERROR(nconv_context_set_memory_limit(NULL, 1), NCONV_INVALID_ARGUMENT, "ctx is NULL");
    nconv_context_destroy(ctx);
}

/* dx, dw, db of one problem under a memory limit at `threads`; 0 on success. */
typedef struct grads {
    buf x, w, dy, dx, dw, db;
} grads;

static nconv_status backward_at(nconv_context *ctx, const nconv_problem *p, grads *g, int threads, size_t limit) {
    nconv_context_set_threads(ctx, threads);
    nconv_context_set_memory_limit(ctx, limit);
    return nconv_backward(ctx, p, NULL, &g->x.t, &g->w.t, NULL, &g->dy.t, &g->dx.t, &g->dw.t, &g->db.t, NULL, NULL, 0);
}

static int grads_equal(const grads *a, const grads *b) {
    return !memcmp(a->dx.data, b->dx.data, sizeof(float) * (size_t)a->dx.n) &&
           !memcmp(a->dw.data, b->dw.data, sizeof(float) * (size_t)a->dw.n) &&
           !memcmp(a->db.data, b->db.data, sizeof(float) * (size_t)a->db.n);
}

/* Whether a call fits the context's memory limit does not depend on its thread count: the
 * pieces are planned at one thread and a call whose threads' scratch would break the limit
 * runs on fewer, with the same bits. A call that cannot fit says what its smallest pieces
 * need, and runs within a limit of that. */
static void test_memory_limit_threads(void) {
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = 4, p.in_channels = p.out_channels = 32;
    p.in_size[0] = p.in_size[1] = 28, p.kernel[0] = p.kernel[1] = 3;
    p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = 1;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], bs[1] = {32};
    nconv_problem_shapes(&p, xs, ws, ys);
    uint64_t rng = 17;
    grads g[5];
    for (int k = 0; k < 5; k++) {
        uint64_t r = rng;
        buf_make(&g[k].x, 4, xs, NCONV_LAYOUT_NCX, &r, 0, 1);
        buf_make(&g[k].w, 4, ws, NCONV_LAYOUT_NCX, &r, 0, 1);
        buf_make(&g[k].dy, 4, ys, NCONV_LAYOUT_NCX, &r, 0, 1);
        buf_make(&g[k].dx, 4, xs, NCONV_LAYOUT_NCX, &r, 1, 1);
        buf_make(&g[k].dw, 4, ws, NCONV_LAYOUT_NCX, &r, 1, 1);
        buf_make(&g[k].db, 1, bs, NCONV_LAYOUT_NCX, &r, 1, 1);
    }
    nconv_context *ctx;
    nconv_context_create(&ctx);
    size_t whole = 0, one = 0, two = 0, capped = 0;
    nconv_workspace_size(ctx, &p, NCONV_OP_BACKWARD, NULL, &whole);
    /* A limit that splits the call at one thread and holds the split's need at two: then the
     * one-thread need as the limit leaves no room for the second thread's scratch. */
    size_t loose = 0;
    for (int frac = 2; frac <= 16 && !loose; frac++) {
        nconv_context_set_memory_limit(ctx, whole / (size_t)frac);
        nconv_context_set_threads(ctx, 1);
        nconv_workspace_size(ctx, &p, NCONV_OP_BACKWARD, NULL, &one);
        nconv_context_set_threads(ctx, 2);
        nconv_workspace_size(ctx, &p, NCONV_OP_BACKWARD, NULL, &two);
        if (one < two && two <= whole / (size_t)frac) loose = whole / (size_t)frac;
    }
    CHECK(loose > 0, "no limit splits the call with room for a second thread's scratch (whole %zu)", whole);
    nconv_context_set_memory_limit(ctx, one);
    nconv_context_set_threads(ctx, 2);
    nconv_workspace_size(ctx, &p, NCONV_OP_BACKWARD, NULL, &capped);
    CHECK(capped == one, "2 threads under a limit of the 1-thread need %zu: the query says %zu (2 threads: %zu)", one,
          capped, two);
    CHECK(backward_at(ctx, &p, &g[0], 1, loose) == NCONV_OK, "1 thread, limit %zu: %s", loose, nconv_last_error());
    for (int t = 1; t <= 4; t++) {
        nconv_status st = backward_at(ctx, &p, &g[t], t, one);
        CHECK(st == NCONV_OK && grads_equal(&g[t], &g[0]), "%d threads under a limit of %zu: %s", t, one,
              st ? nconv_last_error() : "results differ from one thread's");
    }
    /* Far too little: the message names the smallest pieces' need, and that limit holds them. */
    CHECK_ERROR(backward_at(ctx, &p, &g[1], 2, 4096), NCONV_OUT_OF_MEMORY, "in the smallest pieces this call can run in");
    size_t least = 0;
    const char *m = strstr(nconv_last_error(), "run in, ");
    CHECK(m && sscanf(m, "run in, %zu bytes", &least) == 1 && least > 4096 && least < one, "least %zu in '%s'", least,
          nconv_last_error());
    for (int t = 1; t <= 2; t++)
        CHECK(backward_at(ctx, &p, &g[t], t, least) == NCONV_OK, "%d threads within the smallest pieces' %zu: %s", t,
              least, nconv_last_error());
    CHECK(grads_equal(&g[1], &g[2]), "the smallest pieces at 1 and 2 threads differ");
    nconv_context_destroy(ctx);
    for (int k = 0; k < 5; k++) {
        buf *b[] = {&g[k].x, &g[k].w, &g[k].dy, &g[k].dx, &g[k].dw, &g[k].db};
        for (int i = 0; i < 6; i++) free(b[i]->data);
    }
}

/* Every operation, also those that hold memory beside their calls' workspace (the double
 * backward's temporary, the batched calls' copies), under each memory limit from the smallest
 * that one thread runs it in to where 2 threads' scratch fits whole (1 KiB apart, finer than
 * that memory): at 2 threads it runs too, with the bits of 1 thread under the same limit. */
static void test_limit_any_threads(void) {
    for (int op = 0; op < NOPS; op++) {
        const int64_t batch = op >= OP_FWD_BATCHED ? 3 : 0;
        nconv_context *ctx, *ctx2; /* 1 and 2 threads */
        nconv_context_create(&ctx);
        nconv_context_create(&ctx2);
        nconv_context_set_threads(ctx2, 2);
        fixture f[2];
        fixture_make(&f[0], batch, NCONV_LAYOUT_NCX);
        size_t lo = 0, hi = (size_t)64 << 20; /* run(lo) fails, run(hi) succeeds at one thread */
        while (hi - lo > 1) {
            const size_t mid = lo + (hi - lo) / 2;
            nconv_context_set_memory_limit(ctx, mid);
            if (run(ctx, &f[0], op) == NCONV_OK) hi = mid;
            else lo = mid;
        }
        fixture_free(&f[0]);
        int bad = 0;
        for (size_t limit = hi; limit < hi + ((size_t)384 << 10) && !bad; limit += 1024) {
            nconv_status st[2];
            for (int t = 0; t < 2; t++) {
                fixture_make(&f[t], batch, NCONV_LAYOUT_NCX);
                nconv_context_set_memory_limit(t ? ctx2 : ctx, limit);
                st[t] = run(t ? ctx2 : ctx, &f[t], op);
            }
            int same = 1;
            for (int i = FIRST_OUT; i < NBUF; i++)
                same &= !memcmp(f[1].b[i].data, f[0].b[i].data, sizeof(float) * (size_t)f[0].b[i].n);
            bad = st[0] || st[1] || !same;
            CHECK(!bad, "%s under a limit of %zu (1-thread minimum %zu): 1 thread: %d, 2 threads: %d%s", op_names[op],
                  limit, hi, (int)st[0], (int)st[1], same ? "" : ", results differ");
            fixture_free(&f[0]), fixture_free(&f[1]);
        }
        nconv_context_destroy(ctx);
        nconv_context_destroy(ctx2);
    }
}

static void test_strides_and_aliasing(void) {
    fixture f;
    fixture_make(&f, 0, NCONV_LAYOUT_NCX);
    buf *b = f.b;
    const nconv_problem *p = &f.p;
    /* Strides whose offsets overflow int64, and a pointer that would wrap. */
    nconv_tensor t = b[X].t;
    t.stride[2] = INT64_MAX / 2;
    CHECK_ERROR(nconv_forward(NULL, p, NULL, &t, &b[W].t, NULL, NULL, &b[Y].t, NULL, 0), NCONV_INVALID_ARGUMENT,
                "x stride[2]");
    t = b[X].t;
    t.stride[0] = INT64_MIN;
    CHECK_ERROR(nconv_forward(NULL, p, NULL, &t, &b[W].t, NULL, NULL, &b[Y].t, NULL, 0), NCONV_INVALID_ARGUMENT,
                "x stride[0]");
    t = b[Y].t;
    t.data = (void *)(UINTPTR_MAX - 64);
    CHECK_ERROR(nconv_forward(NULL, p, NULL, &b[X].t, &b[W].t, NULL, NULL, &t, NULL, 0), NCONV_INVALID_ARGUMENT,
                "wraps around the address space");
    /* Outputs aliasing inputs. */
    nconv_tensor y_on_x = b[Y].t;
    y_on_x.data = (float *)b[X].data + 3;
    CHECK_ERROR(nconv_forward(NULL, p, NULL, &b[X].t, &b[W].t, NULL, NULL, &y_on_x, NULL, 0),
                NCONV_INVALID_ARGUMENT, "y overlaps x");
    nconv_tensor bias_in_y = b[B].t;
    bias_in_y.data = (float *)b[Y].data + b[Y].n - 2;
    CHECK_ERROR(nconv_forward(NULL, p, NULL, &b[X].t, &b[W].t, &bias_in_y, NULL, &b[Y].t, NULL, 0),
                NCONV_INVALID_ARGUMENT, "y overlaps bias");
    nconv_tensor dx_on_dy = b[DX].t;
    dx_on_dy.data = b[DY].data;
    CHECK_ERROR(nconv_backward(NULL, p, NULL, &b[X].t, &b[W].t, NULL, &b[DY].t, &dx_on_dy, NULL, NULL, NULL, NULL, 0),
                NCONV_INVALID_ARGUMENT, "dx overlaps dy");
    nconv_tensor dw_on_dx = b[DW].t;
    dw_on_dx.data = b[DX].data;
    CHECK_ERROR(nconv_backward(NULL, p, NULL, &b[X].t, &b[W].t, NULL, &b[DY].t, &b[DX].t, &dw_on_dx, NULL, NULL,
                               NULL, 0),
                NCONV_INVALID_ARGUMENT, "dx overlaps dw");
    CHECK_ERROR(nconv_double_backward(NULL, p, &b[X].t, &b[W].t, &b[DY].t, &b[GGX].t, &b[GGW].t, NULL, &b[GGY].t,
                                      &b[X].t, NULL),
                NCONV_INVALID_ARGUMENT, "gx overlaps x");
    /* An output mapping two indices onto one element. */
    nconv_tensor self = b[Y].t;
    self.stride[3] = 0;
    CHECK_ERROR(nconv_forward(NULL, p, NULL, &b[X].t, &b[W].t, NULL, NULL, &self, NULL, 0), NCONV_INVALID_ARGUMENT,
                "y strides map two indices onto one element");
    self = b[Y].t;
    self.stride[1] = self.stride[2]; /* channel planes overlap rows */
    CHECK_ERROR(nconv_forward(NULL, p, NULL, &b[X].t, &b[W].t, NULL, NULL, &self, NULL, 0), NCONV_INVALID_ARGUMENT,
                "onto one element");
    /* Inputs may share memory: x and w read from one buffer. */
    nconv_problem sq;
    nconv_problem_init(&sq, 1);
    sq.in_size[0] = 1;
    nconv_tensor one = {b[X].data, {1, 1, 1}};
    CHECK(nconv_forward(NULL, &sq, NULL, &one, &one, NULL, NULL, &b[Y].t, NULL, 0) == NCONV_OK &&
              b[Y].data[0] == b[X].data[0] * b[X].data[0],
          "x and w on one element: %s", nconv_last_error());
    /* Negative strides (a flipped view) are views like any other. */
    reset_outputs(&f);
    nconv_tensor flipped = b[Y].t;
    flipped.data = (float *)b[Y].data + b[Y].t.stride[3] * (4 /* out width - 1 */);
    flipped.stride[3] = -b[Y].t.stride[3];
    CHECK(nconv_forward(NULL, p, NULL, &b[X].t, &b[W].t, NULL, NULL, &flipped, NULL, 0) == NCONV_OK,
          "negative output stride: %s", nconv_last_error());
    /* Batched: an output whose batch stride lands slices on each other. */
    fixture g;
    fixture_make(&g, 3, NCONV_LAYOUT_NCX);
    nconv_batch bt = batch_of(&g);
    bt.y = 5;
    CHECK_ERROR(nconv_forward_batched(NULL, &g.p, NULL, &bt, &g.b[X].t, &g.b[W].t, NULL, NULL, &g.b[Y].t),
                NCONV_INVALID_ARGUMENT, "y strides map two indices onto one element");
    bt = batch_of(&g);
    dx_on_dy = g.b[DX].t;
    dx_on_dy.data = (float *)g.b[DY].data + g.b[DY].n - 1;
    CHECK_ERROR(nconv_backward_batched(NULL, &g.p, NULL, &bt, &g.b[X].t, &g.b[W].t, NULL, &g.b[DY].t, &dx_on_dy,
                                       NULL, NULL, NULL),
                NCONV_INVALID_ARGUMENT, "dx overlaps");
    fixture_free(&g);
    fixture_free(&f);
}

int main(void) {
    test_failing_allocations();
    test_memory_limit();
    test_memory_limit_threads();
    test_limit_any_threads();
    test_strides_and_aliasing();
    return test_summary();
}
