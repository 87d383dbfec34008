/* Complex convolutions (c128, c64) against an oracle of four real f64
 * convolutions per complex one on the reference algorithm, through the
 * one-shot calls and plans, in both the in-place (channels-last) and the
 * copying (channels-first) form; and what complex calls refuse. */
#include "test_util.h"

typedef struct cbuf { /* a complex tensor of the problem's dtype, and its parts in f64 */
    void *data;
    double *re, *im;
    int64_t n;
    nconv_tensor t, tr, ti; /* tr / ti: dense NCX f64 tensors of the parts */
} cbuf;

static void cbuf_make(cbuf *b, int rank, const int64_t *shape, nconv_layout layout, nconv_dtype dt, uint64_t *rng) {
    b->n = 1;
    for (int i = 0; i < rank; i++) b->n *= shape[i];
    const size_t n = (size_t)(b->n ? b->n : 1);
    b->data = calloc(n, 16);
    b->re = calloc(n, sizeof(double));
    b->im = calloc(n, sizeof(double));
    nconv_tensor_init(&b->t, b->data, rank, shape, layout);
    nconv_tensor_init(&b->tr, b->re, rank, shape, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&b->ti, b->im, rank, shape, NCONV_LAYOUT_NCX);
    for (int64_t i = 0; rng && i < b->n; i++) { /* i: the C-order index of the parts */
        int64_t rem = i, off = 0;
        for (int k = rank - 1; k >= 0; k--) off += (rem % shape[k]) * b->t.stride[k], rem /= shape[k];
        double re = test_uniform(rng), im = test_uniform(rng);
        if (dt == NCONV_C64) re = (float)re, im = (float)im;
        b->re[i] = re, b->im[i] = im;
        if (dt == NCONV_C64) ((float *)b->data)[2 * off] = (float)re, ((float *)b->data)[2 * off + 1] = (float)im;
        else ((double *)b->data)[2 * off] = re, ((double *)b->data)[2 * off + 1] = im;
    }
}

static void cbuf_free(cbuf *b) { free(b->data), free(b->re), free(b->im); }

/* max |b - (re + i im)| / max |re + i im| over the elements (re, im dense C order). */
static double cbuf_err(const cbuf *b, int rank, const int64_t *shape, nconv_dtype dt, const double *re, const double *im) {
    double md = 0, mr = 1e-30;
    for (int64_t i = 0; i < b->n; i++) {
        int64_t rem = i, off = 0;
        for (int k = rank - 1; k >= 0; k--) off += (rem % shape[k]) * b->t.stride[k], rem /= shape[k];
        double gr = dt == NCONV_C64 ? ((float *)b->data)[2 * off] : ((double *)b->data)[2 * off];
        double gi = dt == NCONV_C64 ? ((float *)b->data)[2 * off + 1] : ((double *)b->data)[2 * off + 1];
        md = fmax(md, fmax(fabs(gr - re[i]), fabs(gi - im[i])));
        mr = fmax(mr, fmax(fabs(re[i]), fabs(im[i])));
    }
    return md / mr;
}

/* max |a - b| / max |b| over the storage of two tensors of one shape and layout. */
static double cbuf_diff(const cbuf *a, const cbuf *b, nconv_dtype dt) {
    double md = 0, mr = 1e-30;
    for (int64_t i = 0; i < 2 * a->n; i++) {
        double u = dt == NCONV_C64 ? ((float *)a->data)[i] : ((double *)a->data)[i];
        double v = dt == NCONV_C64 ? ((float *)b->data)[i] : ((double *)b->data)[i];
        md = fmax(md, fabs(u - v)), mr = fmax(mr, fabs(v));
    }
    return md / mr;
}

static nconv_context *ref_ctx;

/* out = sa * conv(a, b) + sb * conv(c, d) in f64 through the reference, as forward, backward-data or
 * backward-weights of the real problem q (dir 0, 1, 2). */
static void real2(const nconv_problem *q, int dir, const nconv_tensor *a, const nconv_tensor *b, double sa,
                  const nconv_tensor *c, const nconv_tensor *d, double sb, double *out, int64_t n, int rank,
                  const int64_t *shape) {
    double *t = calloc((size_t)n + 1, sizeof(double));
    nconv_tensor o;
    nconv_tensor_init(&o, t, rank, shape, NCONV_LAYOUT_NCX);
    for (int k = 0; k < 2; k++) {
        const nconv_tensor *u = k ? c : a, *v = k ? d : b;
        nconv_status st = dir == 0   ? nconv_forward(ref_ctx, q, NULL, u, v, NULL, NULL, &o, NULL, 0)
                          : dir == 1 ? nconv_backward(ref_ctx, q, NULL, NULL, v, NULL, u, &o, NULL, NULL, NULL, NULL, 0)
                                     : nconv_backward(ref_ctx, q, NULL, u, NULL, NULL, v, NULL, &o, NULL, NULL, NULL, 0);
        CHECK(st == NCONV_OK, "oracle: %s", nconv_last_error());
        for (int64_t i = 0; i < n; i++) out[i] = (k ? out[i] + sb * t[i] : sa * t[i]);
    }
    free(t);
}

/* A backward output against the oracle: (a.re b.re + a.im b.im) + i (a.re b.im - a.im b.re) for
 * backward-data (a = dy, b = w: conj(w)) and backward-weights (a = x, b = dy: conj(x)), in the
 * roles dir gives them. */
static void check_gradient(const nconv_problem *q, nconv_dtype dt, int dir, const cbuf *a, const cbuf *b,
                           const cbuf *got, int rank, const int64_t *shape, double tol, const char *what,
                           const char *name) {
    double *er = calloc((size_t)got->n + 1, sizeof(double)), *ei = calloc((size_t)got->n + 1, sizeof(double));
    const double s = dir == 1 ? 1 : -1;
    real2(q, dir, &a->tr, &b->tr, 1, &a->ti, &b->ti, 1, er, got->n, rank, shape);
    real2(q, dir, &a->ti, &b->tr, s, &a->tr, &b->ti, -s, ei, got->n, rank, shape);
    const double e = cbuf_err(got, rank, shape, dt, er, ei);
    CHECK(e <= tol, "%s: %s err %.3g", what, name, e);
    free(er), free(ei);
}

static void run_case(const nconv_problem *p, nconv_layout layout, uint64_t *rng, const char *what) {
    const nconv_dtype dt = p->dtype;
    const double tol = dt == NCONV_C64 ? 1e-5 : 1e-12;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    CHECK(nconv_problem_shapes(p, xs, ws, ys) == NCONV_OK, "%s", nconv_last_error());
    const int r = p->ndims + 2;
    const int64_t oc = p->out_channels;
    cbuf x, w, b, z, y, dy, dx, dw, db, y2;
    cbuf_make(&x, r, xs, layout, dt, rng), cbuf_make(&w, r, ws, NCONV_LAYOUT_NCX, dt, rng);
    cbuf_make(&b, 1, &oc, NCONV_LAYOUT_NCX, dt, rng), cbuf_make(&z, r, ys, layout, dt, rng);
    cbuf_make(&dy, r, ys, layout, dt, rng), cbuf_make(&y, r, ys, layout, dt, NULL);
    cbuf_make(&y2, r, ys, layout, dt, NULL), cbuf_make(&dx, r, xs, layout, dt, NULL);
    cbuf_make(&dw, r, ws, NCONV_LAYOUT_NCX, dt, NULL), cbuf_make(&db, 1, &oc, NCONV_LAYOUT_NCX, dt, NULL);
    nconv_problem q = *p; /* the oracle's real problem */
    q.dtype = NCONV_F64;
    const nconv_epilogue epi = {NCONV_ACT_IDENTITY, -0.5};

    /* y = conv(x, w) + b - 0.5 z */
    CHECK(nconv_forward(NULL, p, &epi, &x.t, &w.t, &b.t, &z.t, &y.t, NULL, 0) == NCONV_OK, "%s: %s", what,
          nconv_last_error());
    double *er = calloc((size_t)y.n + 1, sizeof(double)), *ei = calloc((size_t)y.n + 1, sizeof(double));
    real2(&q, 0, &x.tr, &w.tr, 1, &x.ti, &w.ti, -1, er, y.n, r, ys);
    real2(&q, 0, &x.tr, &w.ti, 1, &x.ti, &w.tr, 1, ei, y.n, r, ys);
    const int64_t sp = oc ? y.n / (ys[0] * oc) : 0;
    for (int64_t i = 0; i < y.n; i++) {
        const int64_t c = (i / sp) % oc;
        er[i] += b.re[c] - 0.5 * z.re[i], ei[i] += b.im[c] - 0.5 * z.im[i];
    }
    double e = cbuf_err(&y, r, ys, dt, er, ei);
    CHECK(e <= tol, "%s: forward err %.3g", what, e);

    /* The same through a plan with its weights set, run twice. */
    nconv_plan_desc d;
    nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
    d.epi = epi, d.with_z = 1, d.layout = layout;
    nconv_plan *pl = NULL;
    CHECK(nconv_plan_create(NULL, p, &d, &pl) == NCONV_OK, "%s: %s", what, nconv_last_error());
    CHECK(pl && nconv_plan_set_weights(pl, &w.t, &b.t) == NCONV_OK, "%s: %s", what, nconv_last_error());
    for (int k = 0; pl && k < 2; k++) {
        nconv_variant_pack v = {.x = &x.t, .z = &z.t, .y = &y2.t};
        CHECK(nconv_plan_execute(pl, &v) == NCONV_OK, "%s: %s", what, nconv_last_error());
        e = cbuf_err(&y2, r, ys, dt, er, ei);
        CHECK(e <= tol, "%s: plan forward err %.3g", what, e);
    }
    nconv_plan_destroy(pl);
    free(er), free(ei);

    /* dx = conv_transpose(dy, conj(w)), dw = conv_w(conj(x), dy), db = sum dy, as PyTorch */
    CHECK(nconv_backward(NULL, p, NULL, &x.t, &w.t, NULL, &dy.t, &dx.t, &dw.t, &db.t, NULL, NULL, 0) == NCONV_OK,
          "%s: %s", what, nconv_last_error());
    check_gradient(&q, dt, 1, &dy, &w, &dx, r, xs, tol, what, "dx");
    check_gradient(&q, dt, 2, &x, &dy, &dw, r, ws, tol, what, "dw");
    double sr[64] = {0}, si[64] = {0};
    for (int64_t i = 0; i < dy.n; i++) sr[(i / sp) % oc] += dy.re[i], si[(i / sp) % oc] += dy.im[i];
    e = cbuf_err(&db, 1, &oc, dt, sr, si);
    CHECK(e <= tol, "%s: db err %.3g", what, e);

    /* Backward and double backward plans agree with the one-shot calls. */
    cbuf dx2, dw2, db2, ggy, ggy2;
    cbuf_make(&dx2, r, xs, layout, dt, NULL), cbuf_make(&dw2, r, ws, NCONV_LAYOUT_NCX, dt, NULL);
    cbuf_make(&db2, 1, &oc, NCONV_LAYOUT_NCX, dt, NULL);
    cbuf_make(&ggy, r, ys, layout, dt, NULL), cbuf_make(&ggy2, r, ys, layout, dt, NULL);
    nconv_plan_desc_init(&d, NCONV_OP_BACKWARD);
    d.layout = layout;
    CHECK(nconv_plan_create(NULL, p, &d, &pl) == NCONV_OK, "%s: %s", what, nconv_last_error());
    nconv_variant_pack bv = {.x = &x.t, .w = &w.t, .dy = &dy.t, .dx = &dx2.t, .dw = &dw2.t, .db = &db2.t};
    CHECK(nconv_plan_execute(pl, &bv) == NCONV_OK, "%s: %s", what, nconv_last_error());
    nconv_plan_destroy(pl);
    CHECK(cbuf_diff(&dx2, &dx, dt) <= tol && cbuf_diff(&dw2, &dw, dt) <= tol && cbuf_diff(&db2, &db, dt) <= tol,
          "%s: backward plan differs", what);
    /* the double backward at (ggx, ggw, ggb) = (x, dw, db) */
    CHECK(nconv_double_backward(NULL, p, &x.t, &w.t, &dy.t, &x.t, &dw.t, &db.t, &ggy.t, &dx2.t, &dw2.t) == NCONV_OK,
          "%s: %s", what, nconv_last_error());
    nconv_plan_desc_init(&d, NCONV_OP_DOUBLE_BACKWARD);
    d.outputs = NCONV_OUT_GGY;
    CHECK(nconv_plan_create(NULL, p, &d, &pl) == NCONV_OK, "%s: %s", what, nconv_last_error());
    CHECK(nconv_plan_set_weights(pl, &w.t, NULL) == NCONV_OK, "%s: %s", what, nconv_last_error());
    nconv_variant_pack gv = {.x = &x.t, .ggx = &x.t, .ggw = &dw.t, .ggb = &db.t, .ggy = &ggy2.t};
    CHECK(nconv_plan_execute(pl, &gv) == NCONV_OK, "%s: %s", what, nconv_last_error());
    nconv_plan_destroy(pl);
    CHECK(cbuf_diff(&ggy2, &ggy, dt) <= tol, "%s: double backward plan differs", what);
    cbuf_free(&dx2), cbuf_free(&dw2), cbuf_free(&db2), cbuf_free(&ggy), cbuf_free(&ggy2);

    cbuf *all[] = {&x, &w, &b, &z, &y, &dy, &dx, &dw, &db, &y2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cbuf_free(all[i]);
}

/* Bytes a context allocated in all. */
static size_t allocated;
static void *count_alloc(void *user, size_t n) {
    (void)user;
    allocated += n;
    return malloc(n);
}
static void count_free(void *user, void *p) { (void)user, free(p); }

int main(void) {
    uint64_t rng = 7;
    nconv_context_create(&ref_ctx);
    nconv_context_set_algorithm(ref_ctx, "ref");
    for (int dt = NCONV_C64; dt <= NCONV_C128; dt++)
        for (int nd = 1; nd <= 3; nd++)
            for (int v = 0; v < 4; v++) {
                nconv_problem p;
                nconv_problem_init(&p, nd);
                p.dtype = (nconv_dtype)dt;
                p.batch = 2, p.in_channels = 4, p.out_channels = 6, p.groups = v == 1 ? 2 : 1;
                p.transposed = v == 2;
                for (int i = 0; i < nd; i++) {
                    p.in_size[i] = 6 - i, p.kernel[i] = 3 - (i == 1), p.pad_begin[i] = 1, p.pad_end[i] = v == 3 ? 2 : 1;
                    p.stride[i] = v >= 2 ? 2 : 1;
                    if (v == 2) p.output_padding[i] = 1;
                }
                if (v == 3) p.padding_mode = NCONV_PAD_REFLECT;
                char what[64];
                for (int l = 0; l < 2; l++) {
                    snprintf(what, sizeof what, "%s %dD variant %d %s", dt == NCONV_C64 ? "c64" : "c128", nd, v,
                             l ? "nxc" : "ncx");
                    run_case(&p, l ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX, &rng, what);
                }
            }

    /* Channels-last operands are their own real form: such a call copies only the weights;
     * channels-first ones are copied (x and y here) on top. */
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.dtype = NCONV_C64, p.batch = 2, p.in_channels = 8, p.out_channels = 8, p.in_size[0] = p.in_size[1] = 16;
    p.kernel[0] = p.kernel[1] = 1;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    nconv_problem_shapes(&p, xs, ws, ys);
    const nconv_allocator counting = {count_alloc, count_free, NULL};
    size_t bytes[2];
    for (int l = 0; l < 2; l++) {
        cbuf x, w, y;
        cbuf_make(&x, 4, xs, l ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX, NCONV_C64, &rng);
        cbuf_make(&w, 4, ws, NCONV_LAYOUT_NCX, NCONV_C64, &rng);
        cbuf_make(&y, 4, ys, l ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX, NCONV_C64, NULL);
        nconv_context *ctx;
        nconv_context_create_with_allocator(&ctx, &counting);
        allocated = 0;
        CHECK(nconv_forward(ctx, &p, NULL, &x.t, &w.t, NULL, NULL, &y.t, NULL, 0) == NCONV_OK, "%s", nconv_last_error());
        bytes[l] = allocated;
        nconv_context_destroy(ctx);
        cbuf_free(&x), cbuf_free(&w), cbuf_free(&y);
    }
    const size_t xy = 2 * 2 * 8 * 16 * 16 * 8; /* x and y as real f32 copies */
    CHECK(bytes[0] >= bytes[1] + xy, "channels-first allocated %zu, channels-last %zu: expected copies of x and y",
          bytes[0], bytes[1]);

    /* What complex calls refuse, before writing anything. */
    cbuf x, w, y;
    cbuf_make(&x, 4, xs, NCONV_LAYOUT_NCX, NCONV_C64, &rng);
    cbuf_make(&w, 4, ws, NCONV_LAYOUT_NCX, NCONV_C64, &rng);
    cbuf_make(&y, 4, ys, NCONV_LAYOUT_NCX, NCONV_C64, NULL);
    const nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};
    CHECK_ERROR(nconv_forward(NULL, &p, &relu, &x.t, &w.t, NULL, NULL, &y.t, NULL, 0), NCONV_INVALID_ARGUMENT, "relu");
    nconv_plan_desc d;
    nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
    d.epi = relu;
    nconv_plan *pl = NULL;
    CHECK_ERROR(nconv_plan_create(NULL, &p, &d, &pl), NCONV_INVALID_ARGUMENT, "relu");
    CHECK_ERROR(nconv_forward(NULL, &p, NULL, &x.t, &w.t, NULL, NULL, &x.t, NULL, 0), NCONV_INVALID_ARGUMENT, "y");
    nconv_tensor bad = y.t;
    bad.stride[1] = 0; /* every channel on one element */
    CHECK_ERROR(nconv_forward(NULL, &p, NULL, &x.t, &w.t, NULL, NULL, &bad, NULL, 0), NCONV_INVALID_ARGUMENT, "y");
    nconv_problem q = p;
    q.dtype = (nconv_dtype)6;
    CHECK_ERROR(nconv_forward(NULL, &q, NULL, &x.t, &w.t, NULL, NULL, &y.t, NULL, 0), NCONV_INVALID_ARGUMENT, "dtype = 6");
    nconv_context *small;
    nconv_context_create(&small);
    nconv_context_set_memory_limit(small, 4096);
    CHECK_ERROR(nconv_forward(small, &p, NULL, &x.t, &w.t, NULL, NULL, &y.t, NULL, 0), NCONV_OUT_OF_MEMORY, "");
    int untouched = 1;
    for (int64_t i = 0; i < 2 * y.n; i++) untouched &= ((float *)y.data)[i] == 0.0f;
    CHECK(untouched, "a refused call wrote y");
    nconv_context_destroy(small);
    double flops = 0;
    p.dtype = NCONV_F32;
    nconv_problem_flops(&p, &flops);
    const double real_flops = flops;
    p.dtype = NCONV_C64;
    nconv_problem_flops(&p, &flops);
    CHECK(flops == 4 * real_flops, "complex flops %g, real %g", flops, real_flops);
    CHECK(nconv_dtype_size(NCONV_C64) == 8 && nconv_dtype_size(NCONV_C128) == 16, "complex element sizes");
    cbuf_free(&x), cbuf_free(&w), cbuf_free(&y);
    nconv_context_destroy(ref_ctx);
    return test_summary();
}
