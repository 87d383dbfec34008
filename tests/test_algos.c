/*
 * Every algorithm against the reference on randomized small problems (all
 * features, NCX / NXC / strided views, every dtype), the adjoint identity
 * <conv(x, w), g> = <x, bwd_d(g, w)> = <w, bwd_w(x, g)>, bitwise determinism
 * (repeated runs, 1-4 threads), and outputs that start as NaN (an algorithm
 * must never read them).
 */
#include "test_util.h"

#include "../src/internal.h" /* element load/store */
#include "../src/kernels/kernels.h" /* the kernel table: whether it has bf16 pairs */

/* LAYOUT_STRIDED: NCX strides doubled; LAYOUT_SPARSE: times five (runs past the buffers that
 * widen 16-bit runs whole). */
enum { LAYOUT_NCX, LAYOUT_NXC, LAYOUT_STRIDED, LAYOUT_SPARSE };

typedef struct tensor {
    nconv_tensor t;
    void *buf;
    int rank;
    int64_t shape[5];
    size_t bytes;
} tensor;

static void tensor_make(tensor *a, int rank, const int64_t *shape, nconv_dtype dt, int layout, uint64_t *rng,
                        int fill_nan) {
    memset(a, 0, sizeof *a);
    a->rank = rank;
    memcpy(a->shape, shape, sizeof(int64_t) * (size_t)rank);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) numel *= shape[i];
    const int spread = layout == LAYOUT_STRIDED ? 2 : layout == LAYOUT_SPARSE ? 5 : 1;
    a->bytes = nconv_dtype_size(dt) * (size_t)(numel * spread + 1);
    a->buf = malloc(a->bytes);
    for (size_t i = 0; i < a->bytes / nconv_dtype_size(dt); i++) nconv__store1(a->buf, dt, (int64_t)i, NAN);
    nconv_tensor_init(&a->t, a->buf, rank, shape, layout == LAYOUT_NXC ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX);
    for (int i = 0; i < rank; i++) a->t.stride[i] *= spread;
    if (fill_nan) return;
    for (int64_t i = 0; i < numel; i++) {
        int64_t rem = i, off = 0;
        for (int k = rank - 1; k >= 0; k--) off += (rem % shape[k]) * a->t.stride[k], rem /= shape[k];
        nconv__store1(a->buf, dt, off, test_uniform(rng));
    }
}

/* max |a - b| / max |b| over the logical elements. */
static double rel_err(const tensor *a, const tensor *b, nconv_dtype dt) {
    int64_t numel = 1;
    for (int i = 0; i < a->rank; i++) numel *= a->shape[i];
    double md = 0, mr = 0;
    for (int64_t i = 0; i < numel; i++) {
        int64_t rem = i, oa = 0, ob = 0;
        for (int k = a->rank - 1; k >= 0; k--) {
            int64_t ix = rem % a->shape[k];
            oa += ix * a->t.stride[k], ob += ix * b->t.stride[k], rem /= a->shape[k];
        }
        double va = nconv__load(a->buf, dt, oa), vb = nconv__load(b->buf, dt, ob);
        double d = isnan(va) && isnan(vb) ? 0 : fabs(va - vb); /* NaN where the reference has one: equal */
        if (!(d <= md) && !isnan(md)) md = d;                  /* the first other NaN sticks */
        if (fabs(vb) > mr) mr = fabs(vb);
    }
    return md / (mr > 0 ? mr : 1);
}

static double dot(const tensor *a, const tensor *b, nconv_dtype dt) {
    int64_t numel = 1;
    for (int i = 0; i < a->rank; i++) numel *= a->shape[i];
    double s = 0;
    for (int64_t i = 0; i < numel; i++) {
        int64_t rem = i, oa = 0, ob = 0;
        for (int k = a->rank - 1; k >= 0; k--) {
            int64_t ix = rem % a->shape[k];
            oa += ix * a->t.stride[k], ob += ix * b->t.stride[k], rem /= a->shape[k];
        }
        s += nconv__load(a->buf, dt, oa) * nconv__load(b->buf, dt, ob);
    }
    return s;
}

static void random_problem(uint64_t *rng, nconv_problem *p, nconv_dtype dt) {
    for (;;) {
        nconv_problem_init(p, (int)test_int(rng, 1, 3));
        p->batch = test_int(rng, 0, 3) ? test_int(rng, 1, 3) : 0;
        p->groups = test_int(rng, 1, 3);
        /* One problem in four is thin on one side and wide on the other (input
         * layers), where the channels-last kernels swap tile orientation. */
        const int thin = test_int(rng, 0, 3) == 0, wide_out = (int)test_int(rng, 0, 1);
        p->in_channels = p->groups * test_int(rng, 1, thin && !wide_out ? 24 : 4);
        p->out_channels = p->groups * test_int(rng, 1, thin && wide_out ? 24 : 4);
        p->transposed = (int)test_int(rng, 0, 2) == 0;
        p->dtype = dt;
        if (!p->transposed) p->padding_mode = (nconv_padding_mode)test_int(rng, 0, 3);
        for (int i = 0; i < p->ndims; i++) {
            p->in_size[i] = test_int(rng, 1, p->ndims == 3 ? 5 : 8);
            p->kernel[i] = test_int(rng, 1, 3);
            p->stride[i] = test_int(rng, 1, 3);
            p->dilation[i] = test_int(rng, 1, 2);
            p->pad_begin[i] = test_int(rng, 0, 2);
            p->pad_end[i] = test_int(rng, -1, 2);
            if (p->transposed) {
                int64_t lim = p->stride[i] > p->dilation[i] ? p->stride[i] : p->dilation[i];
                p->output_padding[i] = test_int(rng, 0, lim - 1);
            }
        }
        if (nconv_problem_validate(p) == NCONV_OK) return;
    }
}

typedef struct operands {
    tensor x, w, b, z, dy, y, dx, dw, db, dz;
    nconv_epilogue epi;
    int has_b, has_z;
} operands;

static void operands_make(operands *o, const nconv_problem *p, int layout, uint64_t *rng, const uint64_t *fill) {
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    int r = p->ndims + 2;
    memset(o, 0, sizeof *o);
    uint64_t f = *fill; /* same data for every algorithm */
    tensor_make(&o->x, r, xs, p->dtype, layout, &f, 0);
    tensor_make(&o->w, r, ws, p->dtype, layout, &f, 0);
    tensor_make(&o->b, 1, &oc, p->dtype, layout, &f, 0);
    tensor_make(&o->z, r, ys, p->dtype, layout, &f, 0);
    tensor_make(&o->dy, r, ys, p->dtype, layout, &f, 0);
    tensor_make(&o->y, r, ys, p->dtype, layout, &f, 1);
    tensor_make(&o->dx, r, xs, p->dtype, layout, &f, 1);
    tensor_make(&o->dw, r, ws, p->dtype, layout, &f, 1);
    tensor_make(&o->db, 1, &oc, p->dtype, layout, &f, 1);
    tensor_make(&o->dz, r, ys, p->dtype, layout, &f, 1);
    (void)rng;
}

static void operands_free(operands *o) {
    tensor *all[] = {&o->x, &o->w, &o->b, &o->z, &o->dy, &o->y, &o->dx, &o->dw, &o->db, &o->dz};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->buf);
}

static nconv_status run_all(nconv_context *ctx, const nconv_problem *p, operands *o) {
    nconv_status st = nconv_forward(ctx, p, &o->epi, &o->x.t, &o->w.t, o->has_b ? &o->b.t : NULL,
                                    o->has_z ? &o->z.t : NULL, &o->y.t, NULL, 0);
    if (st) return st;
    return nconv_backward(ctx, p, &o->epi, &o->x.t, &o->w.t, &o->y.t, &o->dy.t, &o->dx.t, &o->dw.t,
                          o->has_b ? &o->db.t : NULL, o->has_z ? &o->dz.t : NULL, NULL, 0);
}

/* Two contexts: *a forced to algorithm an, *b to bn (NULL: the heuristic). */
static void contexts(const char *an, const char *bn, nconv_context **a, nconv_context **b) {
    nconv_context_create(a);
    nconv_context_create(b);
    nconv_context_set_algorithm(*a, an);
    if (bn) nconv_context_set_algorithm(*b, bn);
}

static double tolerance(nconv_dtype dt) {
    return dt == NCONV_F64 ? 1e-12 : dt == NCONV_F32 ? 1e-5 : dt == NCONV_F16 ? 4e-3 : 3e-2;
}

static void test_against_reference(void) {
    uint64_t rng = 42;
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16, NCONV_F64};
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    int compared = 0;
    const int iters = test_iterations(300);
    for (int iter = 0; iter < iters; iter++) {
        nconv_problem p;
        random_problem(&rng, &p, dts[iter % 4]);
        int layout = (int)test_int(&rng, 0, 2);
        uint64_t fill = test_rng(&rng);
        operands r, a;
        operands_make(&r, &p, layout, &rng, &fill);
        r.has_b = (int)test_int(&rng, 0, 1), r.has_z = (int)test_int(&rng, 0, 1);
        r.epi.activation = test_int(&rng, 0, 1) ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY;
        r.epi.alpha = test_uniform(&rng) * 2;
        nconv_status st = run_all(ref, &p, &r);
        char desc[512] = "";
        nconv_problem_to_desc(&p, desc, sizeof desc);
        CHECK(st == NCONV_OK, "ref on %s: %s", desc, nconv_last_error());
        for (int k = 0; k < nconv_algorithm_count(); k++) {
            const char *name = nconv_algorithm_name(k);
            int ap = 1;
            if (!strcmp(name, "ref")) continue;
            /* Forced algorithms run every core direction of forward + backward. */
            for (int dir = 0; dir < 3; dir++) {
                int one = 0;
                nconv_algorithm_applies(name, &p, (nconv_direction)dir, &one, NULL);
                ap = ap && one;
            }
            if (!ap) continue;
            nconv_context_set_algorithm(ctx, name);
            nconv_context_set_threads(ctx, (int)test_int(&rng, 1, 4));
            operands_make(&a, &p, layout, &rng, &fill);
            a.has_b = r.has_b, a.has_z = r.has_z, a.epi = r.epi;
            st = run_all(ctx, &p, &a);
            CHECK(st == NCONV_OK, "%s on %s: %s", name, desc, nconv_last_error());
            const double tol = tolerance(p.dtype);
            struct { const char *n; tensor *x, *y; int on; } outs[] = {
                {"y", &a.y, &r.y, 1}, {"dx", &a.dx, &r.dx, 1}, {"dw", &a.dw, &r.dw, 1},
                {"db", &a.db, &r.db, r.has_b}, {"dz", &a.dz, &r.dz, r.has_z}};
            for (size_t j = 0; j < sizeof outs / sizeof outs[0]; j++) {
                if (!outs[j].on) continue;
                double e = rel_err(outs[j].x, outs[j].y, p.dtype);
                CHECK(e <= tol, "%s %s err %.3e > %.0e on %s (layout %d, relu %d, bias %d, z %d)", name, outs[j].n, e,
                      tol, desc, layout, r.epi.activation, r.has_b, r.has_z);
            }
            compared++;
            operands_free(&a);
        }
        operands_free(&r);
    }
    CHECK(compared > iters / 2, "only %d comparisons ran", compared);
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

static void test_adjoint(void) {
    uint64_t rng = 7;
    nconv_context *ctx;
    nconv_context_create(&ctx);
    for (int iter = 0; iter < 100; iter++) {
        nconv_problem p;
        random_problem(&rng, &p, NCONV_F64);
        if (p.batch == 0) p.batch = 1;
        uint64_t fill = test_rng(&rng);
        operands o;
        operands_make(&o, &p, LAYOUT_NCX, &rng, &fill);
        nconv_forward(ctx, &p, NULL, &o.x.t, &o.w.t, NULL, NULL, &o.y.t, NULL, 0);
        nconv_backward(ctx, &p, NULL, &o.x.t, &o.w.t, NULL, &o.dy.t, &o.dx.t, &o.dw.t, NULL, NULL, NULL, 0);
        double a = dot(&o.y, &o.dy, p.dtype), b = dot(&o.x, &o.dx, p.dtype), c = dot(&o.w, &o.dw, p.dtype);
        double scale = fabs(a) + 1e-300;
        char desc[512] = "";
        nconv_problem_to_desc(&p, desc, sizeof desc);
        CHECK(fabs(a - b) <= 1e-10 * scale + 1e-12 && fabs(a - c) <= 1e-10 * scale + 1e-12,
              "<y,g> = %.15g, <x,dx> = %.15g, <w,dw> = %.15g on %s (mode %d)", a, b, c, desc, p.padding_mode);
        operands_free(&o);
    }
    nconv_context_destroy(ctx);
}

/* Bitwise identical results across repeated runs and thread counts 1-4. */
static void test_determinism(void) {
    uint64_t rng = 99;
    nconv_context *ctx;
    nconv_context_create(&ctx);
    for (int k = 0; k < nconv_algorithm_count(); k++) {
        const char *name = nconv_algorithm_name(k);
        nconv_context_set_algorithm(ctx, name);
        for (int iter = 0; iter < 20; iter++) {
            nconv_problem p;
            random_problem(&rng, &p, NCONV_F32);
            uint64_t fill = test_rng(&rng);
            const int layout = (int)test_int(&rng, 0, 1);
            operands a, b;
            operands_make(&a, &p, layout, &rng, &fill);
            a.epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
            a.has_b = 1;
            nconv_context_set_threads(ctx, 1);
            if (run_all(ctx, &p, &a)) { /* the forced algorithm does not apply */
                operands_free(&a);
                continue;
            }
            for (int run = 0; run < 8; run++) {
                const int threads = 1 + run % 4;
                operands_make(&b, &p, layout, &rng, &fill);
                b.epi = a.epi, b.has_b = 1;
                nconv_context_set_threads(ctx, threads);
                run_all(ctx, &p, &b);
                int same = !memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes) &&
                           !memcmp(a.dw.buf, b.dw.buf, a.dw.bytes) && !memcmp(a.db.buf, b.db.buf, a.db.bytes);
                CHECK(same, "%s: results of run %d with %d threads differ from 1 thread", name, run, threads);
                operands_free(&b);
            }
            operands_free(&a);
        }
    }
    nconv_context_destroy(ctx);
}

/* Three operand sets of p filled alike (the reference's, then two runs'). */
static void operands_make3(operands *r, operands *a, operands *b, const nconv_problem *p, int layout, uint64_t *rng) {
    uint64_t fill = test_rng(rng);
    operands_make(r, p, layout, rng, &fill);
    operands_make(a, p, layout, rng, &fill);
    operands_make(b, p, layout, rng, &fill);
}

/* r through the reference, a through ctx on 1 thread, b through ctx on 3 threads. */
static void run_ref_1_3(nconv_context *ref, nconv_context *ctx, const nconv_problem *p, operands *r, operands *a,
                        operands *b) {
    CHECK(run_all(ref, p, r) == NCONV_OK, "ref: %s", nconv_last_error());
    nconv_context_set_threads(ctx, 1);
    CHECK(run_all(ctx, p, a) == NCONV_OK, "%s", nconv_last_error());
    nconv_context_set_threads(ctx, 3);
    CHECK(run_all(ctx, p, b) == NCONV_OK, "%s", nconv_last_error());
}

/* Forward, then backward: dx unless without_dx (padding modes other than
 * zeros, whose backward-data winograd leaves to igemm and gemm), dw, db. */
static nconv_status run_wino(nconv_context *ctx, const nconv_problem *p, operands *o, int without_dx) {
    nconv_status st = nconv_forward(ctx, p, &o->epi, &o->x.t, &o->w.t, o->has_b ? &o->b.t : NULL,
                                    o->has_z ? &o->z.t : NULL, &o->y.t, NULL, 0);
    if (st) return st;
    return nconv_backward(ctx, p, &o->epi, &o->x.t, &o->w.t, &o->y.t, &o->dy.t, without_dx ? NULL : &o->dx.t,
                          &o->dw.t, o->has_b ? &o->db.t : NULL, o->has_z ? &o->dz.t : NULL, NULL, 0);
}

/* Winograd F(4x4, 3x3) (fwd, bwd_d, bwd_w; transposed problems swap fwd and
 * bwd_d) on random 3x3 (x depth 1-3) stride-1 problems: dilations 1-3,
 * padding wider than the kernel or negative at the end, every padding mode
 * (dx then left out), channels on both sides of the 8- and 16-lane tails,
 * every layout and epilogue, f32, f16 and bf16 (channels-last ones read
 * and written in place), against the reference; the same bits for 1 and 3
 * threads. The transforms cancel large terms: f32 errors
 * are about ten times those of direct summation, hence 5e-5 (1e-5 elsewhere). */
static void test_winograd(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "winograd", &ref, &ctx);
    uint64_t rng = 77;
    int compared = 0;
    const int iters = test_iterations(100);
    for (int iter = 0; iter < iters; iter++) {
        nconv_problem p;
        nconv_problem_init(&p, (int)test_int(&rng, 2, 3));
        p.batch = test_int(&rng, 1, 3);
        p.in_channels = test_int(&rng, 1, 3) == 1 ? test_int(&rng, 1, 7) : test_int(&rng, 8, 40);
        p.out_channels = test_int(&rng, 1, 3) == 1 ? test_int(&rng, 1, 7) : test_int(&rng, 8, 40);
        p.transposed = test_int(&rng, 0, 3) == 0;
        const int64_t dti = test_int(&rng, 0, 4);
        p.dtype = dti == 0 ? NCONV_F16 : dti == 1 ? NCONV_BF16 : NCONV_F32;
        const int no_dx = !p.transposed && test_int(&rng, 0, 3) == 0;
        if (no_dx) p.padding_mode = (nconv_padding_mode)test_int(&rng, 1, 3);
        for (int i = 0; i < p.ndims; i++) {
            const int depth = p.ndims == 3 && i == 0;
            p.in_size[i] = depth ? test_int(&rng, 1, 4) : test_int(&rng, 1, 14);
            p.kernel[i] = depth ? test_int(&rng, 1, 3) : 3;
            p.dilation[i] = test_int(&rng, 1, 3);
            p.pad_begin[i] = test_int(&rng, 0, 4);
            p.pad_end[i] = test_int(&rng, -1, 4);
            if (p.transposed) p.output_padding[i] = test_int(&rng, 0, p.dilation[i] - 1);
        }
        if (nconv_problem_validate(&p) != NCONV_OK) continue;
        int applies = 1;
        for (int dir = 0; dir < 3; dir++) {
            int one = 0;
            nconv_algorithm_applies("winograd", &p, (nconv_direction)dir, &one, NULL);
            applies &= one || (no_dx && dir == 1);
        }
        char desc[512] = "";
        nconv_problem_to_desc(&p, desc, sizeof desc);
        CHECK(applies, "winograd does not apply to %s", desc);
        if (!applies) continue;
        operands r, a, b;
        const int layout = (int)test_int(&rng, 0, 2);
        operands_make3(&r, &a, &b, &p, layout, &rng);
        r.has_b = a.has_b = b.has_b = (int)test_int(&rng, 0, 1);
        r.has_z = a.has_z = b.has_z = (int)test_int(&rng, 0, 1);
        r.epi = a.epi = b.epi = (nconv_epilogue){test_int(&rng, 0, 1) ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.5};
        operands *o[3] = {&r, &a, &b};
        for (int k = 0; k < 3; k++) {
            nconv_context_set_threads(ctx, k == 2 ? 3 : 1);
            CHECK(run_wino(k ? ctx : ref, &p, o[k], no_dx) == NCONV_OK, "%s on %s: %s", k ? "winograd" : "ref", desc,
                  nconv_last_error());
        }
        const double tol = p.dtype == NCONV_F32 ? 5e-5 : tolerance(p.dtype);
        const double ey = rel_err(&a.y, &r.y, p.dtype), ex = no_dx ? 0 : rel_err(&a.dx, &r.dx, p.dtype),
                     ew = rel_err(&a.dw, &r.dw, p.dtype);
        CHECK(ey <= tol && ex <= tol && ew <= tol, "winograd on %s (layout %d): y err %g, dx err %g, dw err %g", desc,
              layout, ey, ex, ew);
        CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && (no_dx || !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes)) &&
                  !memcmp(a.dw.buf, b.dw.buf, a.dw.bytes),
              "winograd on %s: results differ between 1 and 3 threads", desc);
        compared++;
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    CHECK(compared >= iters * 3 / 5, "only %d winograd problems compared", compared);
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* A 2D 3 x 3 problem, padding 1 (the output keeps the input's size). */
static void same_3x3(nconv_problem *p, int64_t n, int64_t c, int64_t o, int64_t h, int64_t w) {
    nconv_problem_init(p, 2);
    p->batch = n, p->in_channels = c, p->out_channels = o;
    p->in_size[0] = h, p->in_size[1] = w, p->kernel[0] = p->kernel[1] = 3;
    p->pad_begin[0] = p->pad_begin[1] = p->pad_end[0] = p->pad_end[1] = 1;
}

/* Winograd's weight transform on 16-bit weights, 600 input channels, 200 output channels: in
 * OIHW (ncx) a row's or column's run is a few hundred elements, widened whole; in OHWI (nxc) the
 * forward widens a column's run tap by tap (the whole span would be 8 x 600 + 128 elements, most
 * of them other columns') and the backward widens each tap's run of a row straight into the tap
 * rows; with NCX strides times five the forward's column run spans 127 x 45 + 41 elements, past
 * the widening buffer (4 x 128 x 9), so it is read element by element. Backward-weights takes
 * the 200 output channels in three chunks (72 each), reading 16-bit channels-last dy from each
 * chunk's first channel. All three directions against the reference, 1 and 3 threads bitwise. */
static void test_winograd_weights16(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "winograd", &ref, &ctx);
    uint64_t rng = 91;
    for (int i = 0; i < 6; i++) {
        nconv_problem p;
        same_3x3(&p, 1, 600, 200, 5, 6);
        p.dtype = i % 2 ? NCONV_BF16 : NCONV_F16;
        const int layout = i < 2 ? LAYOUT_NCX : i < 4 ? LAYOUT_NXC : LAYOUT_SPARSE;
        char desc[512] = "";
        nconv_problem_to_desc(&p, desc, sizeof desc);
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, layout, &rng);
        operands *o[3] = {&r, &a, &b};
        for (int k = 0; k < 3; k++) {
            o[k]->epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
            nconv_context_set_threads(ctx, k == 2 ? 3 : 1);
            CHECK(run_wino(k ? ctx : ref, &p, o[k], 0) == NCONV_OK, "%s on %s: %s", k ? "winograd" : "ref", desc,
                  nconv_last_error());
        }
        const double tol = tolerance(p.dtype), ey = rel_err(&a.y, &r.y, p.dtype), ex = rel_err(&a.dx, &r.dx, p.dtype),
                     ew = rel_err(&a.dw, &r.dw, p.dtype);
        CHECK(ey <= tol && ex <= tol && ew <= tol, "winograd on %s (layout %d): y err %g, dx err %g, dw err %g", desc,
              layout, ey, ex, ew);
        CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes) &&
                  !memcmp(a.dw.buf, b.dw.buf, a.dw.bytes),
              "winograd on %s: results differ between 1 and 3 threads", desc);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* Winograd against igemm (itself checked against the reference above; the
 * reference would take seconds here), and the same bits for 1, 2 and 3
 * threads (bwd_w's two slices of tiles run one after the other on one thread,
 * side by side on more). */
static void wino_vs_igemm(const char *what, const nconv_problem *p, uint64_t rng) {
    nconv_context *ig, *wg;
    contexts("igemm", "winograd", &ig, &wg);
    operands r, a[3];
    const uint64_t fill = test_rng(&rng);
    operands_make(&r, p, LAYOUT_NXC, &rng, &fill);
    for (int t = 0; t < 3; t++) operands_make(&a[t], p, LAYOUT_NXC, &rng, &fill);
    r.epi = a[0].epi = a[1].epi = a[2].epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
    CHECK(run_wino(ig, p, &r, 0) == NCONV_OK, "igemm: %s", nconv_last_error());
    for (int t = 0; t < 3; t += test_light() ? 2 : 1) { /* light runs: 1 and 3 threads */
        nconv_context_set_threads(wg, t + 1);
        CHECK(run_wino(wg, p, &a[t], 0) == NCONV_OK, "winograd: %s", nconv_last_error());
    }
    const double ey = rel_err(&a[0].y, &r.y, NCONV_F32), ex = rel_err(&a[0].dx, &r.dx, NCONV_F32),
                 ew = rel_err(&a[0].dw, &r.dw, NCONV_F32);
    CHECK(ey <= 5e-5 && ex <= 5e-5 && ew <= 5e-5, "winograd %s: y err %g, dx err %g, dw err %g", what, ey, ex, ew);
    for (int t = test_light() ? 2 : 1; t < 3; t++)
        CHECK(!memcmp(a[0].y.buf, a[t].y.buf, a[0].y.bytes) && !memcmp(a[0].dx.buf, a[t].dx.buf, a[0].dx.bytes) &&
                  !memcmp(a[0].dw.buf, a[t].dw.buf, a[0].dw.bytes),
              "winograd %s: results differ between 1 and %d threads", what, t + 1);
    operands_free(&r);
    for (int t = 0; t < 3; t++) operands_free(&a[t]);
    nconv_context_destroy(ig);
    nconv_context_destroy(wg);
}

/* Several output-channel chunks (U and S over 8 MiB) and tile blocks (bwd_w's
 * S accumulates over blocks). Light runs take a smaller image: its 110 tiles
 * are still two of bwd_w's blocks (107 tiles at 272 channels). */
static void test_winograd_blocks(void) {
    nconv_problem p;
    same_3x3(&p, 2, 272, 280, test_light() ? 20 : 24, test_light() ? 44 : 46);
    wino_vs_igemm("blocks", &p, 8);
}

/* bwd_w in two slices of tiles (429 tiles: 215 and 214), each in two blocks,
 * with channel tails (24 = 16 + 8 inputs, 20 outputs: MR rows past them). */
static void test_winograd_slices(void) {
    nconv_problem p;
    same_3x3(&p, 3, 24, 20, 50, 42);
    wino_vs_igemm("slices", &p, 9);
}

/* Inf or NaN in x, w or dy: winograd's transforms would turn one Inf into
 * NaN over its whole tile (Inf - Inf), so such calls must give igemm's
 * results, bit for bit (igemm computes the products PyTorch does). */
static void test_winograd_nonfinite(void) {
    nconv_context *ig, *wg;
    contexts("igemm", "winograd", &ig, &wg);
    uint64_t rng = 5;
    for (int i = 0; i < 4; i++) {
        nconv_problem p;
        same_3x3(&p, 2, 12, 20, 9, 10);
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, i % 2 ? LAYOUT_NXC : LAYOUT_NCX, &rng);
        a.epi = b.epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
        /* x gets the Inf (fwd), dy a NaN (bwd_d), w an Inf (both), one at a time. */
        const float bad = i < 2 ? INFINITY : NAN;
        tensor *t[2] = {i == 0 ? &a.x : i == 1 ? &a.w : i == 2 ? &a.dy : &a.w,
                        i == 0 ? &b.x : i == 1 ? &b.w : i == 2 ? &b.dy : &b.w};
        for (int k = 0; k < 2; k++) nconv__store1(t[k]->buf, NCONV_F32, 17, bad);
        CHECK(run_wino(ig, &p, &a, 0) == NCONV_OK && run_wino(wg, &p, &b, 0) == NCONV_OK, "%s", nconv_last_error());
        /* A direction with finite operands runs Winograd (other bits): only the poisoned ones are
         * compared (y reads x and w, dx dy and w, dw x and dy). */
        CHECK((i == 2 || !memcmp(a.y.buf, b.y.buf, a.y.bytes)) && (i == 0 || !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes)) &&
                  (i % 2 || !memcmp(a.dw.buf, b.dw.buf, a.dw.bytes)),
              "non-finite case %d: winograd's results are not igemm's", i);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ig);
    nconv_context_destroy(wg);
}

/* Wide channels (>= 256: bwd_w copies input-row panels together), dense
 * and grouped, against the reference, and the same bits for 1 and 3 threads. */
static void test_wide_channels(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 31;
    const int64_t cases[][4] = {{256, 24, 1, 1}, {512, 16, 1, 2}, {1024, 64, 4, 1}, {384, 40, 2, 2}};
    for (int i = 0; i < 4; i++) {
        nconv_problem p;
        nconv_problem_init(&p, 2);
        p.batch = 2, p.in_channels = cases[i][0], p.out_channels = cases[i][1], p.groups = cases[i][2];
        p.in_size[0] = 5, p.in_size[1] = 6, p.kernel[0] = p.kernel[1] = 3, p.stride[0] = p.stride[1] = cases[i][3];
        p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = 1;
        const int layout = i % 2 ? LAYOUT_NXC : LAYOUT_NCX;
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, layout, &rng);
        r.epi = a.epi = b.epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
        run_ref_1_3(ref, ctx, &p, &r, &a, &b);
        const double e = rel_err(&a.dw, &r.dw, NCONV_F32), ey = rel_err(&a.y, &r.y, NCONV_F32),
                     ex = rel_err(&a.dx, &r.dx, NCONV_F32);
        CHECK(e <= 1e-5 && ey <= 1e-5 && ex <= 1e-5, "wide case %d: dw err %g, y err %g, dx err %g", i, e, ey, ex);
        CHECK(!memcmp(a.dw.buf, b.dw.buf, a.dw.bytes), "wide case %d: dw differs between 1 and 3 threads", i);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm's panel-major order (weights of 2 MiB and more, few rows: a unit packs
 * its panels and runs every row over them): 1x1 and 3x3 at stride 2 (four
 * residue classes in bwd_d), both layouts, against the reference, the same bits
 * on 1 and 3 threads; and an Inf in w, found while packing bwd_d's panels,
 * gives gemm's results bit for bit (every output written again). */
static void test_panel_major(void) {
    nconv_context *ref, *ctx, *gm;
    contexts("ref", "igemm", &ref, &ctx);
    nconv_context_create(&gm);
    nconv_context_set_algorithm(gm, "gemm");
    uint64_t rng = 53;
    const int64_t cases[][4] = {{1024, 512, 1, 1}, {256, 512, 3, 2}}; /* C, O, kernel, stride */
    for (int i = 0; i < 4; i++) {
        const int64_t *q = cases[i / 2];
        nconv_problem p;
        nconv_problem_init(&p, 2);
        p.batch = 1, p.in_channels = q[0], p.out_channels = q[1]; /* few rows: valgrind runs this too */
        for (int d = 0; d < 2; d++) {
            p.in_size[d] = q[2] == 1 ? 3 : 5, p.kernel[d] = q[2], p.stride[d] = q[3];
            p.pad_begin[d] = p.pad_end[d] = q[2] / 2;
        }
        const int layout = i % 2 ? LAYOUT_NXC : LAYOUT_NCX;
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, layout, &rng);
        r.epi = a.epi = b.epi = (nconv_epilogue){NCONV_ACT_RELU, 1.0};
        r.has_b = a.has_b = b.has_b = 1;
        run_ref_1_3(ref, ctx, &p, &r, &a, &b);
        const double ey = rel_err(&a.y, &r.y, NCONV_F32), ex = rel_err(&a.dx, &r.dx, NCONV_F32);
        CHECK(ey <= 1e-5 && ex <= 1e-5, "panel-major case %d: y err %g, dx err %g", i, ey, ex);
        CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes),
              "panel-major case %d: y or dx differs between 1 and 3 threads", i);
        for (int k = 0; k < 2; k++) nconv__store1(k ? b.w.buf : a.w.buf, NCONV_F32, 1000 + 7 * i, INFINITY);
        nconv_context_set_threads(ctx, 2);
        CHECK(nconv_backward(ctx, &p, NULL, NULL, &a.w.t, NULL, &a.dy.t, &a.dx.t, NULL, NULL, NULL, NULL, 0) == NCONV_OK &&
                  nconv_backward(gm, &p, NULL, NULL, &b.w.t, NULL, &b.dy.t, &b.dx.t, NULL, NULL, NULL, NULL, 0) == NCONV_OK,
              "%s", nconv_last_error());
        CHECK(!memcmp(a.dx.buf, b.dx.buf, a.dx.bytes), "panel-major case %d: with an Inf in w, dx is not gemm's", i);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
    nconv_context_destroy(gm);
}

/* igemm's bwd_d packs a residue class's taps 64 at a time: kernels of 81
 * and 77 taps at stride 1 (one class) and 121 at stride 2 (classes of 36,
 * 30, 30 and 25 taps), both layouts, against the reference; the same bits
 * on 1 and 3 threads. */
static void test_many_taps(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "igemm", &ref, &ctx);
    uint64_t rng = 47;
    const int64_t cases[][3] = {{9, 9, 1}, {11, 7, 1}, {11, 11, 2}}; /* kh, kw, stride */
    for (int i = 0; i < 6; i++) {
        const int64_t *k = cases[i / 2];
        nconv_problem p;
        nconv_problem_init(&p, 2);
        p.batch = 1, p.in_channels = 9, p.out_channels = 7; /* 9: more than the thin-channel path's 8 */
        p.in_size[0] = 13, p.in_size[1] = 12, p.kernel[0] = k[0], p.kernel[1] = k[1];
        p.stride[0] = p.stride[1] = k[2];
        p.pad_begin[0] = p.pad_end[0] = k[0] / 2, p.pad_begin[1] = p.pad_end[1] = k[1] / 2;
        const int layout = i % 2 ? LAYOUT_NXC : LAYOUT_NCX;
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, layout, &rng);
        r.epi = a.epi = b.epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
        run_ref_1_3(ref, ctx, &p, &r, &a, &b);
        const double ex = rel_err(&a.dx, &r.dx, NCONV_F32), ey = rel_err(&a.y, &r.y, NCONV_F32);
        CHECK(ex <= 1e-5 && ey <= 1e-5, "many taps case %d: dx err %g, y err %g", i, ex, ey);
        CHECK(!memcmp(a.dx.buf, b.dx.buf, a.dx.bytes), "many taps case %d: dx differs between 1 and 3 threads", i);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm's bwd_w sums db's lanes as it packs dy, per block of pixels (512
 * here) and per pixel chunk, from pixels inside an image (13 x 11): 15 images
 * (two chunks, the second from pixel 1072), 4 images (one chunk, a block from
 * pixel 512), 1x1 and 2 groups of 3x3, both layouts and relu, against the
 * reference; the same bits on 1 and 3 threads. */
static void test_bias_lanes(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "igemm", &ref, &ctx);
    uint64_t rng = 53;
    const int64_t cases[][5] = {{15, 64, 16, 1, 1}, {4, 64, 16, 1, 1}, {4, 32, 40, 3, 2}}; /* n, c, o, k, g */
    for (int i = 0; i < 6; i++) {
        const int64_t *q = cases[i / 2];
        nconv_problem p;
        nconv_problem_init(&p, 2);
        p.batch = q[0], p.in_channels = q[1], p.out_channels = q[2], p.groups = q[4];
        p.in_size[0] = 13, p.in_size[1] = 11, p.kernel[0] = p.kernel[1] = q[3];
        p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = q[3] / 2;
        const int layout = i % 2 ? LAYOUT_NXC : LAYOUT_NCX;
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, layout, &rng);
        r.has_b = a.has_b = b.has_b = 1;
        r.epi = a.epi = b.epi = (nconv_epilogue){i % 3 ? NCONV_ACT_IDENTITY : NCONV_ACT_RELU, 1.0};
        run_ref_1_3(ref, ctx, &p, &r, &a, &b);
        const double eb = rel_err(&a.db, &r.db, NCONV_F32), ew = rel_err(&a.dw, &r.dw, NCONV_F32);
        CHECK(eb <= 1e-5 && ew <= 1e-5, "bias lanes case %d: db err %g, dw err %g", i, eb, ew);
        CHECK(!memcmp(a.db.buf, b.db.buf, a.db.bytes) && !memcmp(a.dw.buf, b.dw.buf, a.dw.bytes),
              "bias lanes case %d: db or dw differs between 1 and 3 threads", i);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm on channels-last 1x1 convolutions with stride 1 and no padding
 * (rows straight from the pixel index): input and output channels differ (a
 * swapped row pitch shows), groups (each group's channel offset), 1-3D,
 * transposed, pixels in partial tiles and in several row blocks, every
 * epilogue, f32, f16 and bf16 (widened a block at a time, narrowed by the
 * kernel), against the reference; the same bits for 1 and 3 threads.
 * NCONV_VERBOSE names the path of rows lda and ldc apart (igemm_rows) for f32,
 * and for 16-bit operands where the core direction's source has fewer than 256
 * channels (more: row pointers, packed as they are widened), or bf16 pairs
 * where they run. */
static void run_epi_1_3(nconv_context *ref, nconv_context *ctx, const nconv_problem *p, int layout, int epi,
                        uint64_t *rng, operands *r, operands *a, operands *b, char *text, size_t cap);
static void test_pointwise(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "igemm", &ref, &ctx);
    uint64_t rng = 91;
    /* ndims, C, O, G, spatial size, transposed */
    const int64_t cases[][6] = {{2, 24, 40, 1, 7, 0}, {2, 48, 32, 2, 5, 0},  {1, 64, 20, 4, 31, 0},
                                {3, 16, 40, 2, 3, 0}, {2, 40, 24, 1, 6, 1},  {2, 32, 64, 4, 4, 1},
                                {2, 16, 32, 1, 45, 0}, {2, 300, 24, 1, 9, 0}, {1, 8, 17, 1, 1000, 0}};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        nconv_problem p;
        nconv_problem_init(&p, (int)cases[i][0]);
        p.batch = 3, p.in_channels = cases[i][1], p.out_channels = cases[i][2], p.groups = cases[i][3];
        p.transposed = (int)cases[i][5];
        for (int d = 0; d < p.ndims; d++) p.in_size[d] = cases[i][4] + d, p.kernel[d] = 1;
        CHECK(nconv_problem_validate(&p) == NCONV_OK, "pointwise case %d: %s", i, nconv_last_error());
        /* the core's source channels: x's for fwd, y's for bwd_d (swapped when transposed) */
        const int64_t core_c = p.transposed ? p.out_channels : p.in_channels;
        const int64_t core_o = p.transposed ? p.in_channels : p.out_channels;
        const int pairs = nconv__bf16_pairs(nconv__kernels());
        for (int di = 0; di < 3; di++)
            for (int epi = 0; epi < 4; epi += di ? 3 : 1) {
                p.dtype = di == 0 ? NCONV_F32 : di == 1 ? NCONV_F16 : NCONV_BF16;
                operands r, a, b;
                char text[1 << 15] = "";
                run_epi_1_3(ref, ctx, &p, LAYOUT_NXC, epi, &rng, &r, &a, &b, text, sizeof text);
                /* bf16 on pairs where igemm takes them (nconv__bf16_pairs), the reduction of whole pairs */
                const int fwd_pairs = p.dtype == NCONV_BF16 && pairs && (core_c / p.groups) % 2 == 0;
                const int bwd_pairs = p.dtype == NCONV_BF16 && pairs && (core_o / p.groups) % 2 == 0;
                const int fwd = strstr(text, "core=fwd,algo=igemm,path=pointwise rows") != NULL;
                const int bwd_d = strstr(text, "core=bwd_d,algo=igemm,path=pointwise rows") != NULL;
                const int f32 = p.dtype == NCONV_F32;
                CHECK(fwd == ((f32 || core_c < 256) && !fwd_pairs) && bwd_d == ((f32 || core_o < 256) && !bwd_pairs),
                      "pointwise case %d dtype %d epi %d: pointwise rows ran fwd %d bwd_d %d: %s", i, (int)p.dtype, epi,
                      fwd, bwd_d, text);
                const double tol = tolerance(p.dtype);
                const double ey = rel_err(&a.y, &r.y, p.dtype), ex = rel_err(&a.dx, &r.dx, p.dtype),
                             ew = rel_err(&a.dw, &r.dw, p.dtype);
                CHECK(ey <= tol && ex <= tol && ew <= tol,
                      "pointwise case %d dtype %d epi %d: y err %g, dx err %g, dw err %g", i, (int)p.dtype, epi, ey,
                      ex, ew);
                if (r.has_b) {
                    const double eb = rel_err(&a.db, &r.db, p.dtype);
                    CHECK(eb <= tol, "pointwise case %d dtype %d epi %d: db err %g", i, (int)p.dtype, epi, eb);
                }
                CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes) &&
                          !memcmp(a.dw.buf, b.dw.buf, a.dw.bytes),
                      "pointwise case %d dtype %d epi %d: results differ between 1 and 3 threads", i, (int)p.dtype,
                      epi);
                operands_free(&r), operands_free(&a), operands_free(&b);
            }
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm's plane path (NCHW, no layout change; rows are channels,
 * columns output pixels, or input channels for bwd_w): 1x1 convolutions with
 * stride 1 and no padding (fwd, bwd_d, bwd_w and db), and forward passes
 * with a short reduction (gathered per tile) over
 * strides, dilations, padding and every padding mode; every epilogue,
 * transposed and grouped, 1-3D, f32, and f16 / bf16 (widened into B, narrowed
 * from the unit's rows; not bwd_w), against the reference, the same bits for
 * 1 and 3 threads. NCONV_VERBOSE shows that the path ran and declined nothing. */
typedef struct ref_1_3 {
    nconv_context *ref, *ctx;
    const nconv_problem *p;
    operands *r, *a, *b;
} ref_1_3;

static int run_ref_1_3_call(void *arg) {
    const ref_1_3 *c = arg;
    run_ref_1_3(c->ref, c->ctx, c->p, c->r, c->a, c->b);
    return 0;
}

/* Operands r, a, b of p in layout with epilogue epi (bias: bit 0; z: 2 and 3; relu: 1 and 3),
 * run by run_ref_1_3 with NCONV_VERBOSE's lines into text. */
static void run_epi_1_3(nconv_context *ref, nconv_context *ctx, const nconv_problem *p, int layout, int epi,
                        uint64_t *rng, operands *r, operands *a, operands *b, char *text, size_t cap) {
    operands_make3(r, a, b, p, layout, rng);
    r->has_b = epi & 1, r->has_z = epi >= 2;
    r->epi = (nconv_epilogue){epi == 1 || epi == 3 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.75};
    a->has_b = b->has_b = r->has_b, a->has_z = b->has_z = r->has_z, a->epi = b->epi = r->epi;
    ref_1_3 call = {ref, ctx, p, r, a, b};
    test_verbose_run(run_ref_1_3_call, &call, text, cap);
}

static int verbose_ran(const char *text, const char *core, const char *algo);

static void test_planes(void) {
    /* The heuristic: igemm_planes wherever it applies (checked; but stem for the forward of f32
     * input layers, which it computes in place on NCHW planes with zero padding, no z and a W
     * stride of 2 (or 1 with 16-lane vectors): checked), the other directions on the algorithms
     * after it. */
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 77;
    /* ndims, C, O, G, spatial size, kernel, stride, padding, dilation, transposed, padding mode */
    const int64_t cases[][11] = {
        {2, 64, 40, 1, 12, 1, 1, 0, 1, 0, 0}, {2, 24, 30, 2, 9, 1, 1, 0, 1, 0, 0},  {1, 300, 7, 1, 100, 1, 1, 0, 1, 0, 0},
        {3, 8, 20, 4, 5, 1, 1, 0, 1, 0, 0},   {2, 40, 64, 1, 10, 1, 1, 0, 1, 1, 0}, {1, 6, 13, 1, 77, 1, 1, 0, 1, 1, 0},
        {2, 600, 9, 3, 8, 1, 1, 0, 1, 0, 0},  {2, 3, 32, 1, 29, 7, 2, 3, 1, 0, 0},  {1, 1, 40, 1, 500, 10, 5, 0, 1, 0, 0},
        {1, 2, 34, 2, 300, 5, 3, 4, 2, 0, 1}, {2, 2, 16, 1, 20, 3, 1, 1, 1, 0, 2},  {2, 4, 48, 1, 21, 3, 2, 2, 2, 0, 3},
        {3, 2, 20, 1, 7, 3, 1, 1, 1, 0, 0},   {2, 3, 24, 1, 32, 4, 4, 0, 1, 0, 0},  {2, 3, 16, 1, 30, 3, 2, 5, 1, 0, 0},
        {2, 3, 32, 1, 37, 3, 2, 1, 1, 0, 2},  {2, 24, 20, 2, 40, 1, 1, 0, 1, 0, 0}, /* bwd_w in 6 pixel chunks */
        /* output rows of whole tiles (32 pixels): units of whole rows; an odd first column at stride 2 */
        {2, 3, 16, 1, 63, 3, 2, 1, 1, 0, 1},
        {2, 16, 2100, 1, 6, 1, 1, 0, 1, 0, 0}, /* 16-bit: units of one tile (rows of 2100 channels) */
        /* outputs 2-9x the inputs: units of up to 128 tiles (2 per plane with 16-bit rows, and
         * in the gather) */
        {2, 8, 40, 1, 40, 1, 1, 0, 1, 0, 0},   {2, 1, 24, 1, 45, 3, 1, 1, 1, 0, 1},
        /* reductions of 256 rows and more: with 16-lane vectors the row tiles run over pairs of
         * pixel tiles (bwd_d of 300 channels; fwd with 16-bit rows narrowed by the kernel) */
        {2, 40, 300, 1, 11, 1, 1, 0, 1, 0, 0}, {2, 256, 24, 1, 10, 1, 1, 0, 1, 0, 0},
        /* strided 1x1 kernels with reductions past the gather's, every direction: fwd picks B by
         * pixel offsets, bwd_d spreads whole rows over dx, bwd_w picks x's rows (one reduction
         * block; two, the second short; groups in 3D; stride 3 and a last tile of 1 pixel;
         * transposed, whose forward spreads act(bias) between its rows and declines z) */
        {2, 96, 40, 1, 15, 1, 2, 0, 1, 0, 0},  {2, 300, 20, 1, 17, 1, 2, 0, 1, 0, 0},
        {3, 160, 32, 2, 9, 1, 2, 0, 1, 0, 0},  {2, 70, 16, 1, 25, 1, 3, 0, 1, 0, 0},
        {2, 40, 96, 1, 9, 1, 2, 0, 1, 1, 0},
        /* 1x1 on planes of 512 pixels or more with at most 48 output-side channels: f32 B read in
         * place (checked; two reduction blocks in 1D, groups, transposed) */
        {2, 40, 13, 1, 30, 1, 1, 0, 1, 0, 0},  {1, 300, 20, 1, 600, 1, 1, 0, 1, 0, 0},
        {2, 48, 36, 3, 24, 1, 1, 0, 1, 0, 0},  {2, 24, 16, 1, 24, 1, 1, 0, 1, 1, 0}};
    int in_place_runs = 0;
    const nconv_padding_mode modes[] = {NCONV_PAD_ZEROS, NCONV_PAD_REFLECT, NCONV_PAD_REPLICATE, NCONV_PAD_CIRCULAR};
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int di = 0; di < 3; di++) {
            nconv_problem p;
            nconv_problem_init(&p, (int)cases[i][0]);
            p.batch = 2, p.in_channels = cases[i][1], p.out_channels = cases[i][2], p.groups = cases[i][3];
            p.transposed = (int)cases[i][9];
            p.padding_mode = modes[cases[i][10]];
            p.dtype = dts[di];
            for (int d = 0; d < p.ndims; d++) {
                p.in_size[d] = cases[i][4] + d, p.kernel[d] = cases[i][5], p.stride[d] = cases[i][6];
                p.pad_begin[d] = p.pad_end[d] = cases[i][7], p.dilation[d] = cases[i][8];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "planes case %d: %s", i, nconv_last_error());
            const char *chosen = "";
            int applies = 0, any = 0, stem = 0;
            for (int dir = 0; dir < 3; dir++) {
                nconv_algorithm_applies("igemm_planes", &p, (nconv_direction)dir, &applies, NULL);
                nconv_algorithm_chosen(ctx, &p, (nconv_direction)dir, &chosen);
                /* f32 input layers' forward: stem's, where it takes the operands (test_stem) */
                stem |= dir == 0 && p.dtype == NCONV_F32 && !strcmp(chosen, "stem");
                CHECK(!applies || !strcmp(chosen, "igemm_planes") || (dir == 0 && stem),
                      "planes case %d dtype %d: core direction %d runs %s", i, (int)p.dtype, dir, chosen);
                any |= applies;
            }
            const double tol = tolerance(p.dtype);
            /* light runs: one epilogue per case and dtype, in turn */
            for (int epi = test_light() ? (i + di) % 4 : 0; epi < 4; epi += test_light() ? 4 : 1) {
                operands r, a, b;
                char text[1 << 14] = "";
                run_epi_1_3(ref, ctx, &p, LAYOUT_NCX, epi, &rng, &r, &a, &b, text, sizeof text);
                const int64_t sw = p.stride[p.ndims - 1];
                const int on_stem = stem && epi < 2 && p.padding_mode == NCONV_PAD_ZEROS &&
                                    (sw == 2 || (sw == 1 && nconv__kernels()->dw_vl >= 16));
                /* a transposed strided 1x1 forward with z: the scatter declines it (z lies in its
                 * output, not in the unit's rows), the other directions run on the planes */
                const int scatter_z = p.transposed && cases[i][5] == 1 && cases[i][6] > 1 && r.has_z;
                /* and a 1x1 forward with z on planes of fewer than 64 pixels, which it takes only in
                 * units across images over reductions of one block (test_planes_span), which do
                 * not read z */
                int64_t pixels = 1;
                for (int d = 0; d < p.ndims; d++) pixels *= p.in_size[d];
                const int64_t cin = (p.transposed ? p.out_channels : p.in_channels) / p.groups;
                const int declines =
                    scatter_z || (r.has_z && pixels < 64 && cases[i][5] == 1 && cases[i][6] == 1 && cin <= 256);
                CHECK(!any || on_stem ||
                          (strstr(text, "algo=igemm_planes") && !strstr(text, "declined by igemm_planes") == !declines),
                      "planes case %d dtype %d epi %d: the plane path did not run%s: %s", i, (int)p.dtype, epi,
                      declines ? " or its forward was not declined" : "", text);
                /* B in place: f32 1x1 at stride 1, planes of 512 pixels or more, 48 output-side
                 * channels per group at most (the core's: a transposed problem's are swapped) */
                const int64_t cout = (p.transposed ? p.in_channels : p.out_channels) / p.groups;
                const int flat = p.dtype == NCONV_F32 && cases[i][5] == 1 && cases[i][6] == 1 && pixels >= 512;
                const int fwd_in_place = verbose_ran(text, "core=fwd,", "path=B in place"),
                          bwd_d_in_place = verbose_ran(text, "core=bwd_d,", "path=B in place");
                CHECK(fwd_in_place == (flat && cout <= 48) && bwd_d_in_place == (flat && cin <= 48),
                      "planes case %d dtype %d epi %d: B in place in fwd %d, bwd_d %d, in\n%s", i, (int)p.dtype, epi,
                      fwd_in_place, bwd_d_in_place, text);
                in_place_runs += fwd_in_place + bwd_d_in_place;
                CHECK(!on_stem || verbose_ran(text, "core=fwd,", "algo=stem,"),
                      "planes case %d dtype %d epi %d: stem did not run: %s", i, (int)p.dtype, epi, text);
                const double ey = rel_err(&a.y, &r.y, p.dtype), ex = rel_err(&a.dx, &r.dx, p.dtype),
                             ew = rel_err(&a.dw, &r.dw, p.dtype);
                CHECK(ey <= tol && ex <= tol && ew <= tol,
                      "planes case %d dtype %d epi %d: y err %g, dx err %g, dw err %g", i, (int)p.dtype, epi, ey, ex,
                      ew);
                const double eb = r.has_b ? rel_err(&a.db, &r.db, p.dtype) : 0;
                CHECK(eb <= tol, "planes case %d dtype %d epi %d: db err %g", i, (int)p.dtype, epi, eb);
                CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes) &&
                          !memcmp(a.dw.buf, b.dw.buf, a.dw.bytes) &&
                          (!r.has_b || !memcmp(a.db.buf, b.db.buf, a.db.bytes)),
                      "planes case %d dtype %d epi %d: results differ between 1 and 3 threads", i, (int)p.dtype, epi);
                operands_free(&r), operands_free(&a), operands_free(&b);
            }
        }
    CHECK(in_place_runs >= (test_light() ? 8 : 32), "B was read in place in %d runs only", in_place_runs);
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm's row GEMM on bf16 pairs (where it takes them, nconv__bf16_pairs: the portable table's
 * bf16_igemm_np, and AVX512-BF16's on AMD's cores), forward and backward-data: 1x1, strides
 * (bwd_d's residue classes), groups, 1-3D, transposed, a reduction of several blocks (f32 rows
 * summed, then narrowed), weights of megabytes (panel-major), NCHW and strided (copied
 * channels-last in bf16) and NHWC (read in place), every epilogue, against the reference, the same
 * bits for 1 and 3 threads; a plan's prepacked weights (in pairs) give the one-shot call's bits.
 * NCONV_VERBOSE names the path where the reduction is of whole pairs (fwd: input channels per
 * group even; bwd_d: output channels). */
static void test_bf16_pairs(void) {
    const int pairs = nconv__bf16_pairs(nconv__kernels());
    nconv_context *ref, *ctx;
    contexts("ref", "igemm", &ref, &ctx);
    uint64_t rng = 91;
    /* ndims, C, O, G, spatial size, kernel, stride, padding, dilation, transposed */
    const int64_t cases[][10] = {{2, 64, 40, 1, 12, 1, 1, 0, 1, 0}, {2, 32, 36, 1, 13, 3, 2, 1, 1, 0},
                                 {2, 32, 48, 2, 10, 3, 1, 1, 1, 0}, {2, 18, 20, 1, 11, 5, 1, 2, 1, 0},
                                 {2, 256, 32, 1, 6, 3, 1, 1, 1, 0}, {2, 24, 32, 1, 9, 3, 2, 1, 1, 1},
                                 {2, 7, 16, 1, 9, 3, 1, 1, 1, 0},   {1, 40, 24, 1, 50, 3, 1, 1, 2, 0},
                                 {3, 16, 16, 1, 6, 3, 1, 1, 1, 0},  {2, 512, 512, 1, 4, 3, 1, 1, 1, 0}};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int layout = LAYOUT_NCX; layout <= (i < 2 ? LAYOUT_STRIDED : LAYOUT_NXC); layout++) {
            nconv_problem p;
            nconv_problem_init(&p, (int)cases[i][0]);
            p.batch = 2, p.in_channels = cases[i][1], p.out_channels = cases[i][2], p.groups = cases[i][3];
            p.transposed = (int)cases[i][9];
            p.dtype = NCONV_BF16;
            for (int d = 0; d < p.ndims; d++) {
                p.in_size[d] = cases[i][4] + d, p.kernel[d] = cases[i][5], p.stride[d] = cases[i][6];
                p.pad_begin[d] = p.pad_end[d] = cases[i][7], p.dilation[d] = cases[i][8];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "pairs case %d: %s", i, nconv_last_error());
            /* the core forward's reduction is over its x's channels, backward-data's over its y's (a
             * transposed problem's core has x and y swapped) */
            const int64_t xc = (p.transposed ? p.out_channels : p.in_channels) / p.groups;
            const int64_t yc = (p.transposed ? p.in_channels : p.out_channels) / p.groups;
            const int want_fwd = pairs && xc % 2 == 0, want_bwd_d = pairs && yc % 2 == 0;
            for (int epi = 0; epi < 4; epi += i < 2 ? 1 : 3) {
                operands r, a, b;
                char text[1 << 15] = "";
                run_epi_1_3(ref, ctx, &p, layout, epi, &rng, &r, &a, &b, text, sizeof text);
                const char *fwd = strstr(text, "core=fwd,algo=igemm,path=bf16 pairs");
                const char *bwd_d = strstr(text, "core=bwd_d,algo=igemm,path=bf16 pairs");
                CHECK(!strstr(text, "path=bf16 pairs") || pairs, "pairs case %d: bf16 pairs named without the kernel",
                      i);
                CHECK(!!fwd == want_fwd && !!bwd_d == want_bwd_d,
                      "pairs case %d layout %d: bf16 pairs ran fwd %d bwd_d %d, expected %d %d: %s", i, layout, !!fwd,
                      !!bwd_d, want_fwd, want_bwd_d, text);
                const double tol = tolerance(p.dtype);
                const double ey = rel_err(&a.y, &r.y, p.dtype), ex = rel_err(&a.dx, &r.dx, p.dtype),
                             ew = rel_err(&a.dw, &r.dw, p.dtype);
                CHECK(ey <= tol && ex <= tol && ew <= tol,
                      "pairs case %d layout %d epi %d: y err %g, dx err %g, dw err %g", i, layout, epi, ey, ex, ew);
                CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes),
                      "pairs case %d layout %d epi %d: results differ between 1 and 3 threads", i, layout, epi);
                if (epi == 0 && layout != LAYOUT_STRIDED) { /* plans with the weights given once: in pairs */
                    tensor py, pdx;
                    tensor_make(&py, a.y.rank, a.y.shape, p.dtype, layout, &rng, 1);
                    tensor_make(&pdx, a.dx.rank, a.dx.shape, p.dtype, layout, &rng, 1);
                    for (int bwd = 0; bwd < 2; bwd++) {
                        nconv_plan_desc d;
                        nconv_plan_desc_init(&d, bwd ? NCONV_OP_BACKWARD : NCONV_OP_FORWARD);
                        d.layout = layout == LAYOUT_NXC ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX;
                        if (bwd) d.outputs = NCONV_OUT_DX;
                        nconv_plan *pl = NULL;
                        const nconv_variant_pack vp = {.x = &a.x.t, .y = bwd ? &a.y.t : &py.t,
                                                       .dy = bwd ? &a.dy.t : NULL, .dx = bwd ? &pdx.t : NULL};
                        CHECK(nconv_plan_create(ctx, &p, &d, &pl) == NCONV_OK &&
                                  nconv_plan_set_weights(pl, &a.w.t, NULL) == NCONV_OK &&
                                  nconv_plan_execute(pl, &vp) == NCONV_OK,
                              "pairs case %d plan: %s", i, nconv_last_error());
                        nconv_plan_destroy(pl);
                    }
                    CHECK(!memcmp(py.buf, a.y.buf, a.y.bytes) && !memcmp(pdx.buf, a.dx.buf, a.dx.bytes),
                          "pairs case %d layout %d: a plan's prepacked weights give other bits than the call's", i,
                          layout);
                    free(py.buf), free(pdx.buf);
                }
                operands_free(&r), operands_free(&a), operands_free(&b);
            }
        }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm's 16-bit NCHW outputs (forward, and backward-data at stride 1, whose rows are consecutive
 * pixels): narrowed from a row block's f32 rows through a transpose, runs of pixels split where
 * a block spans images (small images, several per block), bias and relu applied in the kernel;
 * f16 and bf16 against the reference (outputs start as NaN: every element written), the same bits
 * for 1 and 3 threads. */
static void test_planes16_out(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "igemm", &ref, &ctx);
    uint64_t rng = 1616;
    /* C, O, G, spatial size, kernel, stride */
    const int64_t cases[][6] = {{24, 40, 1, 5, 3, 1}, {16, 33, 1, 9, 1, 1}, {8, 20, 1, 17, 3, 2}, {12, 18, 3, 6, 3, 1}};
    for (int i = 0; i < 8; i++) {
        const int64_t *q = cases[i % 4];
        nconv_problem p;
        nconv_problem_init(&p, 2);
        p.dtype = i < 4 ? NCONV_F16 : NCONV_BF16;
        p.batch = 3, p.in_channels = q[0], p.out_channels = q[1], p.groups = q[2];
        for (int d = 0; d < 2; d++)
            p.in_size[d] = q[3], p.kernel[d] = q[4], p.stride[d] = q[5], p.pad_begin[d] = p.pad_end[d] = q[4] / 2;
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, LAYOUT_NCX, &rng);
        r.has_b = a.has_b = b.has_b = 1;
        r.epi = a.epi = b.epi = (nconv_epilogue){i % 2 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 1.0};
        run_ref_1_3(ref, ctx, &p, &r, &a, &b);
        const double ey = rel_err(&a.y, &r.y, p.dtype), ex = rel_err(&a.dx, &r.dx, p.dtype);
        CHECK(ey <= tolerance(p.dtype) && ex <= tolerance(p.dtype), "planes16 case %d dtype %d: y err %g, dx err %g",
              i % 4, (int)p.dtype, ey, ex);
        CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes),
              "planes16 case %d dtype %d: results differ between 1 and 3 threads", i % 4, (int)p.dtype);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* The grouped algorithm (2, 4 or 8 channels per group; fwd, bwd_w, and
 * bwd_d at stride 1): chosen by the heuristic, against the reference in
 * every layout, dtype, padding mode, stride, dilation, epilogue, transposed,
 * 1-3D; the same bits for 1 and 3 threads; an infinite dy element (times
 * zero padding: NaN) and an infinite weight (bwd_d hands it to gemm) give
 * the reference's NaN / Inf pattern. */
static void test_grouped(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 5;
    /* ndims, C (= O), G, spatial size, kernel, stride, padding, dilation, transposed, padding mode, pad_end */
    const int64_t cases[][11] = {
        {2, 16, 4, 9, 3, 1, 1, 1, 0, 0, 1},  {2, 32, 16, 7, 3, 2, 1, 1, 0, 0, 0}, {2, 16, 2, 8, 3, 1, 1, 1, 0, 1, 1},
        {1, 24, 6, 20, 5, 1, 2, 2, 0, 2, 2}, {3, 16, 4, 5, 3, 1, 1, 1, 0, 3, 1}, {2, 32, 8, 6, 2, 2, 0, 1, 1, 0, 0},
        {2, 8, 4, 9, 3, 1, 1, 1, 0, 0, 1},   {1, 16, 2, 30, 7, 3, 3, 1, 0, 0, -1}, {2, 24, 12, 10, 3, 1, 2, 2, 0, 0, 2}};
    const nconv_padding_mode modes[] = {NCONV_PAD_ZEROS, NCONV_PAD_REFLECT, NCONV_PAD_REPLICATE, NCONV_PAD_CIRCULAR};
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_STRIDED; layout++) {
            nconv_problem p;
            nconv_problem_init(&p, (int)cases[i][0]);
            p.batch = 2, p.in_channels = p.out_channels = cases[i][1], p.groups = cases[i][2];
            p.transposed = (int)cases[i][8];
            p.padding_mode = modes[cases[i][9]];
            p.dtype = dts[(i + layout) % 3];
            for (int d = 0; d < p.ndims; d++) {
                p.in_size[d] = cases[i][3] + d, p.kernel[d] = cases[i][4], p.stride[d] = cases[i][5];
                p.pad_begin[d] = cases[i][6], p.pad_end[d] = cases[i][10], p.dilation[d] = cases[i][7];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "grouped case %d: %s", i, nconv_last_error());
            for (int dir = 0; dir < 3; dir++) {
                const char *chosen = "";
                nconv_algorithm_chosen(ctx, &p, (nconv_direction)dir, &chosen);
                /* dir is the core direction; bwd_d takes stride 1 and zero padding only */
                const int stride1 = cases[i][5] == 1 && p.padding_mode == NCONV_PAD_ZEROS;
                if (dir != NCONV_DIR_BWD_D || stride1)
                    CHECK(!strcmp(chosen, "grouped"), "grouped case %d dir %d: the heuristic chose %s", i, dir, chosen);
            }
            operands r, a, b;
            operands_make3(&r, &a, &b, &p, layout, &rng);
            r.has_b = a.has_b = b.has_b = 1;
            r.has_z = a.has_z = b.has_z = i % 3 == 1;
            r.epi = a.epi = b.epi = (nconv_epilogue){i % 2 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.5};
            /* dy[0] = +Inf (a zero tap makes NaN), or w[0] = +Inf */
            const int special = i == 0 || i == 5 || i == 6;
            tensor *const sp[3] = {i == 6 ? &r.w : &r.dy, i == 6 ? &a.w : &a.dy, i == 6 ? &b.w : &b.dy};
            for (int k = 0; special && k < 3; k++) nconv__store1(sp[k]->buf, p.dtype, 0, INFINITY);
            run_ref_1_3(ref, ctx, &p, &r, &a, &b);
            struct { const char *n; tensor *x, *y, *z; } outs[] = {{"y", &a.y, &r.y, &b.y}, {"dx", &a.dx, &r.dx, &b.dx},
                                                              {"dw", &a.dw, &r.dw, &b.dw}};
            for (int o = 0; o < 3; o++) {
                const tensor *ta = outs[o].x, *tr = outs[o].y;
                int64_t numel = 1;
                for (int k = 0; k < tr->rank; k++) numel *= tr->shape[k];
                if (special) { /* classes (NaN, Inf, finite) match the reference's */
                    int64_t bad = -1;
                    for (int64_t e = 0; e < numel && bad < 0; e++) {
                        int64_t rem = e, off = 0;
                        for (int k = tr->rank - 1; k >= 0; k--) off += (rem % tr->shape[k]) * tr->t.stride[k], rem /= tr->shape[k];
                        const double va = nconv__load(ta->buf, p.dtype, off), vr = nconv__load(tr->buf, p.dtype, off);
                        if (isnan(va) != isnan(vr) || isinf(va) != isinf(vr)) bad = e;
                    }
                    CHECK(bad < 0, "grouped case %d layout %d: %s[%lld] differs in class from the reference", i, layout,
                          outs[o].n, (long long)bad);
                } else {
                    const double e = rel_err(ta, tr, p.dtype);
                    CHECK(e <= tolerance(p.dtype), "grouped case %d layout %d dtype %d: %s err %g", i, layout, (int)p.dtype,
                          outs[o].n, e);
                }
                CHECK(!memcmp(ta->buf, outs[o].z->buf, ta->bytes), "grouped case %d layout %d: %s differs between 1 and 3 threads",
                      i, layout, outs[o].n);
            }
            operands_free(&r), operands_free(&a), operands_free(&b);
        }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* The first element (logical order) that is NaN or Inf in one of a, b and not the other, or -1. */
static int64_t class_differs(const tensor *a, const tensor *b, nconv_dtype dt) {
    int64_t numel = 1;
    for (int k = 0; k < b->rank; k++) numel *= b->shape[k];
    for (int64_t e = 0; e < numel; e++) {
        int64_t rem = e, off = 0;
        for (int k = b->rank - 1; k >= 0; k--) off += (rem % b->shape[k]) * b->t.stride[k], rem /= b->shape[k];
        const double va = nconv__load(a->buf, dt, off), vb = nconv__load(b->buf, dt, off);
        if (isnan(va) != isnan(vb) || isinf(va) != isinf(vb)) return e;
    }
    return -1;
}

/* Each of n outputs (name, result a, reference r) has the reference's NaN / Inf pattern. */
typedef struct class_out {
    const char *n;
    tensor *a, *r;
} class_out;
static void check_classes(const char *what, const class_out *outs, int n, nconv_dtype dt) {
    for (int o = 0; o < n; o++) {
        const int64_t bad = class_differs(outs[o].a, outs[o].r, dt);
        CHECK(bad < 0, "%s: %s[%lld] differs in class from the reference", what, outs[o].n, (long long)bad);
    }
}

/* The depthwise algorithm (groups == channels): the heuristic's choice
 * (checked) over kernels 1-9 (3, 5, 7 have their own kernel code), strides
 * 1-2, dilations, channel counts on both sides of the 8- and 16-lane tails,
 * every padding mode and layout, f32 / f16 / bf16, epilogues, transposed,
 * 1-3D, bwd_d with W strides 2 and 3 (runs by phase), against the
 * reference (db too, summed by bwd_w's kernels); the same bits for 1 and
 * 3 threads. NCX rows of
 * 28 pixels or more with 9 taps or fewer take the plane path, the others the
 * channels-last run kernels (NXC directly, NCX and strided through a copy). */
static void test_depthwise(void) {
    nconv_context *ref, *ctx, *forced;
    contexts("ref", NULL, &ref, &ctx);
    nconv_context_create(&forced);
    nconv_context_set_algorithm(forced, "depthwise");
    uint64_t rng = 31;
    /* ndims, C, spatial size, kernel, stride, padding, dilation, padding mode, pad_end, transposed */
    const int64_t cases[][10] = {
        {2, 24, 30, 3, 1, 1, 1, 0, 1, 0}, {2, 20, 9, 5, 2, 2, 1, 0, 2, 0},  {2, 40, 11, 7, 1, 3, 1, 0, 3, 0},
        {2, 17, 13, 3, 2, 1, 2, 1, 1, 0}, {1, 16, 40, 9, 1, 4, 1, 0, 4, 0}, {3, 16, 6, 3, 1, 1, 1, 0, 1, 0},
        {2, 33, 8, 2, 1, 0, 1, 0, 1, 0},  {2, 48, 16, 5, 1, 2, 1, 2, 2, 0}, {2, 16, 29, 3, 2, 1, 1, 3, 1, 0},
        {2, 8, 32, 1, 1, 0, 1, 0, 0, 0},  {2, 24, 20, 4, 2, 1, 1, 0, 1, 0}, {2, 16, 8, 3, 2, 1, 1, 0, 1, 1},
        {2, 16, 30, 7, 2, 3, 1, 0, 3, 0}, {1, 9, 33, 3, 1, 1, 3, 0, 3, 0},  {2, 16, 14, 5, 3, 2, 2, 0, 2, 0},
        {2, 16, 12, 3, 2, 2, 2, 0, 2, 0}, /* the last two: bwd_d phases with taps d apart, one phase without taps */
        /* channels-last rows read in place: pixels whose taps all lie in the padding, dilated taps at
         * stride 2 and stride 2 (the forward's) */
        {1, 16, 100, 3, 1, 3, 1, 0, 3, 0}, {2, 32, 40, 3, 2, 2, 2, 0, 2, 0}, {2, 32, 40, 3, 2, 1, 1, 0, 1, 0}};
    const nconv_padding_mode modes[] = {NCONV_PAD_ZEROS, NCONV_PAD_REFLECT, NCONV_PAD_REPLICATE, NCONV_PAD_CIRCULAR};
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_STRIDED; layout++) {
            nconv_problem p;
            nconv_problem_init(&p, (int)cases[i][0]);
            p.batch = 2, p.in_channels = p.out_channels = p.groups = cases[i][1];
            p.padding_mode = modes[cases[i][7]];
            p.transposed = (int)cases[i][9];
            p.dtype = dts[(i + layout) % 3];
            for (int d = 0; d < p.ndims; d++) {
                p.in_size[d] = cases[i][2] + d, p.kernel[d] = cases[i][3], p.stride[d] = cases[i][4];
                p.pad_begin[d] = cases[i][5], p.dilation[d] = cases[i][6], p.pad_end[d] = cases[i][8];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "depthwise case %d: %s", i, nconv_last_error());
            for (int dir = 0; dir < 3; dir++) {
                const char *chosen = "";
                int applies = 0;
                nconv_algorithm_applies("depthwise", &p, (nconv_direction)dir, &applies, NULL);
                nconv_algorithm_chosen(ctx, &p, (nconv_direction)dir, &chosen);
                CHECK(applies == (dir != NCONV_DIR_BWD_D || p.padding_mode == NCONV_PAD_ZEROS),
                      "depthwise case %d dir %d: applies %d", i, dir, applies);
                CHECK(!applies || !strcmp(chosen, "depthwise") || !strcmp(chosen, "depthwise_planes") ||
                          !strcmp(chosen, "depthwise_flat"),
                      "depthwise case %d dir %d: the heuristic chose %s", i, dir, chosen);
            }
            operands r, a, b;
            operands_make3(&r, &a, &b, &p, layout, &rng);
            r.has_b = a.has_b = b.has_b = i % 2 == 0;
            r.has_z = a.has_z = b.has_z = i % 3 == 1;
            r.epi = a.epi = b.epi = (nconv_epilogue){i % 4 < 2 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.5};
            /* an infinite weight: fwd and bwd_d decline and go on, with the reference's NaN / Inf pattern */
            const int special = i == 0 && layout == LAYOUT_NXC;
            for (int k = 0; special && k < 3; k++) nconv__store1((k == 0 ? &r : k == 1 ? &a : &b)->w.buf, p.dtype, 0, INFINITY);
            /* forced where it applies in every direction (zero padding): NCX rows the heuristic gives
             * depthwise_planes */
            run_ref_1_3(ref, p.padding_mode == NCONV_PAD_ZEROS ? forced : ctx, &p, &r, &a, &b);
            struct { const char *n; tensor *x, *y, *z; } outs[] = {{"y", &a.y, &r.y, &b.y}, {"dx", &a.dx, &r.dx, &b.dx},
                                                              {"dw", &a.dw, &r.dw, &b.dw}, {"db", &a.db, &r.db, &b.db}};
            for (int o = 0; o < 3 + r.has_b; o++) {
                if (special) {
                    if (o == 2) continue; /* dw follows relu's mask of a y with NaN */
                    const int64_t bad = class_differs(outs[o].x, outs[o].y, p.dtype);
                    CHECK(bad < 0, "depthwise case %d: with an Inf weight %s[%lld] differs in class from the reference",
                          i, outs[o].n, (long long)bad);
                    continue;
                }
                const double e = rel_err(outs[o].x, outs[o].y, p.dtype);
                CHECK(e <= tolerance(p.dtype), "depthwise case %d layout %d dtype %d: %s err %g", i, layout, (int)p.dtype,
                      outs[o].n, e);
                CHECK(!memcmp(outs[o].x->buf, outs[o].z->buf, outs[o].x->bytes),
                      "depthwise case %d layout %d: %s differs between 1 and 3 threads", i, layout, outs[o].n);
            }
            operands_free(&r), operands_free(&a), operands_free(&b);
        }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
    nconv_context_destroy(forced);
}

/* Outputs y, dx, dw and (with four) db of runs a (1 thread) and b (3 threads) against the
 * reference's r: within p's dtype's tolerance, and the same bits for 1 and 3 threads. */
static void check_1_3(const char *what, int i, int layout, const nconv_problem *p, operands *r, operands *a,
                      operands *b, int four) {
    struct { const char *n; tensor *x, *y, *z; } outs[] = {{"y", &a->y, &r->y, &b->y}, {"dx", &a->dx, &r->dx, &b->dx},
                                                      {"dw", &a->dw, &r->dw, &b->dw}, {"db", &a->db, &r->db, &b->db}};
    for (int o = 0; o < (four ? 4 : 3); o++) {
        const double e = rel_err(outs[o].x, outs[o].y, p->dtype);
        CHECK(e <= tolerance(p->dtype), "%s case %d layout %d: %s err %g", what, i, layout, outs[o].n, e);
        CHECK(!memcmp(outs[o].x->buf, outs[o].z->buf, outs[o].x->bytes),
              "%s case %d layout %d: %s differs between 1 and 3 threads", what, i, layout, outs[o].n);
    }
}

/* igemm_planes' 1x1 backward-weights by dot products of pixel rows (NCHW f32 with few channels on
 * one side and planes of 512 pixels or more): planes split into blocks (one image's pixels, with a
 * tail) or whole, row tiles and column tiles short of 6 and 4, threads over row or column tiles,
 * groups, 1D / 2D / 3D, with and without db (its column in the first column tile), against the
 * reference, the same bits on 1 and 3 threads; NCONV_VERBOSE names the path where the heuristic
 * takes it (checked both ways: small planes, wide channels, channels-last, f16). */
static void test_dot_products(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 67;
    /* ndims, N, C, O, G, size (W one more), f16, taken */
    const int64_t cases[][8] = {{2, 3, 16, 96, 1, 24, 0, 1}, {2, 2, 40, 13, 1, 33, 0, 1}, {2, 3, 48, 14, 2, 23, 0, 1},
                                {2, 2, 64, 64, 1, 31, 0, 1}, {1, 2, 5, 3, 1, 700, 0, 1},  {3, 2, 8, 12, 1, 8, 0, 1},
                                {2, 4, 16, 96, 1, 14, 0, 0}, {2, 1, 80, 56, 1, 24, 0, 0}, {2, 2, 16, 24, 1, 24, 1, 0}};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const int64_t *q = cases[i];
        nconv_problem p;
        nconv_problem_init(&p, (int)q[0]);
        p.batch = q[1], p.in_channels = q[2], p.out_channels = q[3], p.groups = q[4];
        p.dtype = q[6] ? NCONV_F16 : NCONV_F32;
        for (int d = 0; d < p.ndims; d++) p.in_size[d] = q[5] + (d == p.ndims - 1);
        CHECK(nconv_problem_validate(&p) == NCONV_OK, "dot case %d: %s", i, nconv_last_error());
        for (int layout = 0; layout < (test_light() ? 1 : 2); layout++)
            for (int bias = test_light(); bias < 2; bias++) { /* light runs: with db */
                operands r, a, b;
                char text[1 << 15] = "";
                operands_make3(&r, &a, &b, &p, layout ? LAYOUT_NXC : LAYOUT_NCX, &rng);
                r.has_b = a.has_b = b.has_b = bias;
                r.epi = a.epi = b.epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
                ref_1_3 call = {ref, ctx, &p, &r, &a, &b};
                test_verbose_run(run_ref_1_3_call, &call, text, sizeof text);
                const int ran = verbose_ran(text, "core=bwd_w,", "path=dot products");
                CHECK(ran == (q[7] && !layout), "dot case %d layout %d: by dot products %d, in\n%s", i, layout, ran, text);
                check_1_3("dot", i, layout, &p, &r, &a, &b, bias);
                operands_free(&r), operands_free(&a), operands_free(&b);
            }
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm_planes' outputs over 32 MiB (the whole call's, which runs in pieces) are written with
 * streamed stores by 16-lane kernels: a 1x1 forward of 2 to 128 channels (NCONV_VERBOSE names the
 * path on its forward, not on its small dx) and a backward-data of 128 to 2 (the reverse); every direction
 * with bias and relu against the reference, the same bits for 1 and 3 threads (test_big_cases). */
static void test_planes_stream(void) {
    if (!test_big_cases()) return;
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 79;
    const int64_t chans[2][2] = {{2, 128}, {128, 2}};
    for (int i = 0; i < 2; i++) {
        nconv_problem p;
        nconv_problem_init(&p, 2);
        p.batch = 2, p.in_channels = chans[i][0], p.out_channels = chans[i][1];
        p.in_size[0] = 182, p.in_size[1] = 183;
        CHECK(nconv_problem_validate(&p) == NCONV_OK, "planes stream case %d: %s", i, nconv_last_error());
        operands r, a, b;
        char text[1 << 14] = "";
        run_epi_1_3(ref, ctx, &p, LAYOUT_NCX, 1, &rng, &r, &a, &b, text, sizeof text);
        const char *fp = "core=fwd,algo=igemm_planes,", *bp = "core=bwd_d,algo=igemm_planes,";
        const char *fwd = strstr(text, fp), *bwd_d = strstr(text, bp);
        CHECK(fwd && bwd_d, "planes stream case %d: not on igemm_planes in\n%s", i, text);
        if (fwd && bwd_d) {
            const int fs = !strncmp(fwd + strlen(fp), "path=streamed stores", 20);
            const int bs = !strncmp(bwd_d + strlen(bp), "path=streamed stores", 20);
            const int lanes16 = nconv__kernels()->dw_vl >= 16;
            CHECK(fs == (lanes16 && i == 0) && bs == (lanes16 && i == 1),
                  "planes stream case %d: streamed stores on the wrong direction in\n%s", i, text);
        }
        check_1_3("planes stream", i, LAYOUT_NCX, &p, &r, &a, &b, 1);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* igemm_planes' units across images (1x1 at stride 1 on small planes whose pixels are not whole
 * 16-pixel tiles; f16 / bf16 over reductions of one block): a unit runs over the pixels of
 * consecutive images, tiles across two images through a buffer. f32, f16 and bf16, planes of 20
 * to 210 pixels (fewer than 64 only with reductions of one block: else not igemm_planes'), an
 * f32 reduction of two blocks (a tile across images read back before the second adds to it),
 * groups, 1D, units of at most 8 tiles over a run of 119; every epilogue (a forward with z:
 * per-image units, or igemm where planes are small) against the reference, the same bits for 1
 * and 3 threads (threads take runs of images, or of tiles where (group, image) pairs are fewer
 * than threads). NCONV_VERBOSE names the path on the 1-thread run where it must run. */
static void test_planes_span(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 83;
    /* ndims, N, C, O, G, size (2D: W one more) */
    const int64_t cases[][6] = {{2, 5, 40, 70, 1, 7},  {2, 3, 300, 24, 1, 13}, {2, 3, 24, 36, 2, 5},
                                {1, 7, 16, 40, 1, 20}, {2, 2, 300, 40, 1, 7},  {2, 9, 100, 40, 1, 14}};
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16};
    int spans = 0;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        for (int di = 0; di < 3; di++) {
            nconv_problem p;
            nconv_problem_init(&p, (int)cases[i][0]);
            p.batch = cases[i][1], p.in_channels = cases[i][2], p.out_channels = cases[i][3], p.groups = cases[i][4];
            p.dtype = dts[di];
            int64_t P = 1;
            for (int d = 0; d < p.ndims; d++) P *= p.in_size[d] = cases[i][5] + d;
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "planes span case %d: %s", i, nconv_last_error());
            for (int epi = 0; epi < 4; epi++) {
                operands r, a, b;
                char text[1 << 14] = "";
                run_epi_1_3(ref, ctx, &p, LAYOUT_NCX, epi, &rng, &r, &a, &b, text, sizeof text);
                /* reductions: fwd over input channels, bwd_d over output channels, per group */
                const int64_t red[2] = {p.in_channels / p.groups, p.out_channels / p.groups};
                const char *core[2] = {"core=fwd,", "core=bwd_d,"};
                for (int d = 0; d < 2; d++) {
                    const int want = (d == 1 || !r.has_z) && /* z: fwd's */
                                     (p.dtype == NCONV_F32 ? P >= 64 || red[d] <= 256 : red[d] <= 256);
                    const int ran = verbose_ran(text, core[d], "algo=igemm_planes,path=units across images");
                    CHECK(ran == want, "planes span case %d dtype %d epi %d: %s across images %d, expected %d, in\n%s",
                          i, (int)p.dtype, epi, core[d], ran, want, text);
                    spans += ran;
                }
                check_1_3("planes span", i, LAYOUT_NCX, &p, &r, &a, &b, r.has_b);
                operands_free(&r), operands_free(&a), operands_free(&b);
            }
        }
    CHECK(spans >= 48, "units across images ran %d times only", spans);
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* Depthwise rows in channel blocks (NCONV_VERBOSE names them): a small image at stride 1 in
 * blocks whose ring stays in L1 (fwd and bwd_d; bwd_w keeps one block), and rows of 1000
 * channels in blocks, units of a few rows; 64 channels in one block, the channels-last source
 * rows of fwd and (with 16-lane vectors) bwd_d read in place, on rows of 25 pixels and (with
 * 16-lane vectors: 3 taps a row) of 6; a stride-2 bwd_d whose
 * channels-last dx (over 8 MiB) is written with streamed stores, of 40 channels (a part vector
 * with 16 lanes), its forward's smaller output not (test_big_cases); every direction and the bias gradient
 * (summed by bwd_w's kernels) against the reference, the same bits for 1 and 3 threads,
 * channels-last and planar operands (the planes of rows of 14 or more on depthwise_planes:
 * checked). */
static void test_depthwise_blocks(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 57;
    /* C, spatial size, stride, expected path of fwd, bwd_d, bwd_w (NULL: none named), whether
     * they are named for channels-last operands only, and for 16-lane vectors only (3 taps a row
     * on rows of 6, a third of whose pixels read the padding) */
    const struct { int64_t C, size, stride; const char *path[3]; int nxc, vl16; } cases[] = {
        {200, 14, 1, {"path=channel blocks in L1", "path=channel blocks in L1", NULL}, 0, 0},
        {1000, 20, 1, {"path=channel blocks,", "path=channel blocks,", "path=channel blocks,"}, 0, 0},
        {64, 24, 1, {"path=rows in place", "path=rows in place", NULL}, 1, 0},
        {64, 5, 1, {"path=rows in place", "path=rows in place", NULL}, 1, 1},
        {40, 239, 2, {NULL, "path=streamed stores", NULL}, 0, 0}};
    for (int i = 0; i < (test_big_cases() ? 5 : 4); i++)
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_NXC; layout++) {
            nconv_problem p;
            nconv_problem_init(&p, 2);
            p.batch = 2, p.in_channels = p.out_channels = p.groups = cases[i].C;
            for (int d = 0; d < 2; d++)
                p.in_size[d] = cases[i].size + d, p.kernel[d] = 3, p.pad_begin[d] = p.pad_end[d] = 1,
                p.stride[d] = cases[i].stride;
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "depthwise blocks case %d: %s", i, nconv_last_error());
            operands r, a, b;
            char text[1 << 15] = "";
            run_epi_1_3(ref, ctx, &p, layout, 1 + 2 * i, &rng, &r, &a, &b, text, sizeof text);
            const char *dirs[] = {"core=fwd,algo=depthwise,", "core=bwd_d,algo=depthwise,", "core=bwd_w,algo=depthwise,"};
            for (int dir = 0; dir < 3; dir++) {
                /* planes with rows of 14 pixels or more at stride 1 (bwd_w: up to 28, with 16-lane
                 * vectors), and bwd_d at stride 2 (by phases): depthwise_planes (a forward with z
                 * declined: depthwise) */
                const int64_t ow = cases[i].size + 1;
                const char *planes[] = {"core=fwd,algo=depthwise_planes,", "core=bwd_d,algo=depthwise_planes,",
                                        "core=bwd_w,algo=depthwise_planes,"};
                const int s1 = cases[i].stride == 1, vl16 = nconv__kernels()->dw_vl >= 16;
                if (layout == LAYOUT_NCX && ow >= 14 &&
                    ((dir == 1 && (s1 || ow >= 28)) || (s1 && dir == 0 && !r.has_z) ||
                     (s1 && vl16 && dir == 2 && ow <= 28))) {
                    CHECK(strstr(text, planes[dir]), "depthwise blocks case %d: %s not on depthwise_planes in\n%s", i,
                          dirs[dir], text);
                    continue;
                }
                const char *line = strstr(text, dirs[dir]), *end = line ? strchr(line, '\n') : NULL;
                /* bwd_d reads its rows in place with 16-lane vectors only */
                const char *want = cases[i].path[dir];
                if ((cases[i].nxc && layout != LAYOUT_NXC) ||
                    (want && strstr(want, "rows in place") && (dir == 1 || cases[i].vl16) && !vl16))
                    want = NULL;
                const char *at = line ? strstr(line, "path=") : NULL;
                CHECK(line && end, "depthwise blocks case %d: no %s in\n%s", i, dirs[dir], text);
                if (!line || !end) continue;
                CHECK(want ? at && at < end && !strncmp(at, want, strlen(want)) : !at || at > end,
                      "depthwise blocks case %d layout %d: %s, not %s, in\n%s", i, layout, dirs[dir],
                      want ? want : "one block", text);
            }
            check_1_3("depthwise blocks", i, layout, &p, &r, &a, &b, 1);
            operands_free(&r), operands_free(&a), operands_free(&b);
        }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* depthwise_planes' runs: forward and backward-data on f (where the user's direction's core
 * applies, else on h), dw and db on h; the reference's on ref (everything). */
typedef struct planes_call {
    nconv_context *ref, *f, *h;
    const nconv_problem *p;
    operands *r, *a, *b;
    int fwd_on_f, dx_on_f, dw_on_f;
} planes_call;

static nconv_status planes_all(const planes_call *c, operands *o) {
    const nconv_epilogue *e = &o->epi;
    nconv_status st = nconv_forward(c->fwd_on_f ? c->f : c->h, c->p, e, &o->x.t, &o->w.t, o->has_b ? &o->b.t : NULL,
                                    o->has_z ? &o->z.t : NULL, &o->y.t, NULL, 0);
    if (!st)
        st = nconv_backward(c->dx_on_f ? c->f : c->h, c->p, e, &o->x.t, &o->w.t, &o->y.t, &o->dy.t, &o->dx.t, NULL,
                            NULL, o->has_z ? &o->dz.t : NULL, NULL, 0);
    if (!st)
        st = nconv_backward(c->dw_on_f ? c->f : c->h, c->p, e, &o->x.t, &o->w.t, &o->y.t, &o->dy.t, NULL, &o->dw.t,
                            o->has_b ? &o->db.t : NULL, NULL, NULL, 0);
    return st;
}

static int planes_call_run(void *arg) {
    const planes_call *c = arg;
    CHECK(run_all(c->ref, c->p, c->r) == NCONV_OK, "ref: %s", nconv_last_error());
    for (int t = 1; t <= 3; t += 2) {
        nconv_context_set_threads(c->f, t);
        nconv_context_set_threads(c->h, t);
        CHECK(planes_all(c, t == 1 ? c->a : c->b) == NCONV_OK, "%s", nconv_last_error());
    }
    return 0;
}

/* Whether NCONV_VERBOSE's first line in text for core (not the reference's) names algo. */
static int verbose_ran(const char *text, const char *core, const char *algo) {
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *end = strchr(line, '\n'), *at = strstr(line, core);
        if (!end || !at || at > end || (strstr(line, "algo=ref,") && strstr(line, "algo=ref,") < end)) continue;
        const char *a = strstr(line, algo);
        return a && a < end;
    }
    return 0;
}

/* igemm's row GEMM by classes of pixels (fwd, and bwd_d at stride 1, with zero padding on small
 * images): each tile skips the taps that read only padding. 1-3D, kernels 3, 5 and 7, strides 1
 * and 2, dilation, pads that differ at the two ends, groups, panel-major weights, transposed,
 * both layouts, with and without the epilogue, f32, f16 and bf16, against the reference; the
 * same bits on 1 and 3 threads; NCONV_VERBOSE names the path where the heuristic takes it
 * (checked both ways). An infinite weight on a tap that reads the padding: NaN where the
 * reference has it in fwd (that panel sums every tap), the same bits through a plan's prepacked
 * weights, and bwd_d declined. */
static void test_tap_classes(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "igemm", &ref, &ctx);
    uint64_t rng = 61;
    /* ndims, N, C, O, G, size, kernel, stride, pad begin, pad end, dilation, core fwd and bwd_d by
     * classes, one run only (channels-last, no epilogue: weights of 2.25 MiB, panel-major; ASan
     * checks it, not the light runs), transposed (its forward is the core bwd_d) */
    const int64_t cases[][15] = {
        {2, 6, 64, 64, 1, 5, 3, 1, 1, 1, 1, 1, 1, 0, 0},  {3, 3, 48, 64, 1, 4, 3, 1, 1, 1, 1, 1, 1, 0, 0},
        {2, 4, 256, 32, 1, 14, 3, 2, 1, 1, 1, 1, 0, 0, 0}, {2, 6, 96, 72, 1, 8, 3, 1, 2, 2, 2, 1, 1, 0, 0},
        {1, 12, 64, 64, 1, 9, 7, 1, 3, 3, 1, 1, 1, 0, 0},  {2, 6, 128, 128, 2, 5, 3, 1, 2, 0, 1, 1, 1, 0, 0},
        {2, 4, 64, 64, 1, 6, 5, 1, 2, 2, 1, 1, 1, 0, 0},   {2, 2, 64, 64, 1, 28, 3, 1, 1, 1, 1, 0, 0, 0, 0},
        {2, 6, 256, 256, 1, 5, 3, 1, 1, 1, 1, 1, 1, 1, 0}, {2, 6, 80, 64, 1, 5, 3, 1, 1, 1, 1, 1, 1, 0, 1}};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const int64_t *q = cases[i];
        if (q[13] && test_light()) continue;
        nconv_problem p;
        nconv_problem_init(&p, (int)q[0]);
        p.batch = q[1], p.in_channels = q[2], p.out_channels = q[3], p.groups = q[4], p.transposed = (int)q[14];
        for (int d = 0; d < p.ndims; d++) {
            p.in_size[d] = q[5] + (d == 1), p.kernel[d] = q[6], p.stride[d] = q[7];
            p.pad_begin[d] = q[8], p.pad_end[d] = q[9], p.dilation[d] = q[10];
        }
        CHECK(nconv_problem_validate(&p) == NCONV_OK, "classes case %d: %s", i, nconv_last_error());
        /* light runs: channels-last, the epilogue; relu on the large case (and with 16-bit
         * tolerances) would flip on rounding. f16 and bf16 (bf16 on pairs where the kernel table
         * has them) on the small cases: 16-bit NCHW outputs, narrowed through transposes of
         * runs of pixels, keep every tap. */
        for (int di = 0; di < (q[13] || !q[11] || test_light() ? 1 : 3); di++)
            for (int layout = test_light() || q[13]; layout < 2; layout++)
                for (int epi = test_light() && !di ? 3 : 0; epi < (q[13] || di ? 1 : 4); epi += q[11] ? 3 : 2) {
                    p.dtype = di == 0 ? NCONV_F32 : di == 1 ? NCONV_F16 : NCONV_BF16;
                    operands r, a, b;
                    char text[1 << 15] = "";
                    run_epi_1_3(ref, ctx, &p, layout ? LAYOUT_NXC : LAYOUT_NCX, epi, &rng, &r, &a, &b, text,
                                sizeof text);
                    const int fwd = verbose_ran(text, "core=fwd,", "tap classes"),
                              bwd_d = verbose_ran(text, "core=bwd_d,", "tap classes");
                    const int want = di == 0 || layout;
                    CHECK(fwd == (q[11] && want) && bwd_d == (q[12] && want),
                          "classes case %d dtype %d layout %d: fwd %d and bwd_d %d by classes: %s", i, di, layout, fwd,
                          bwd_d, text);
                    const double tol = tolerance(p.dtype), ey = rel_err(&a.y, &r.y, p.dtype),
                                 ex = rel_err(&a.dx, &r.dx, p.dtype), ew = rel_err(&a.dw, &r.dw, p.dtype);
                    CHECK(ey <= tol && ex <= tol && ew <= tol,
                          "classes case %d dtype %d layout %d epi %d: y err %g, dx err %g, dw err %g", i, di, layout,
                          epi, ey, ex, ew);
                    CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes) && !memcmp(a.dx.buf, b.dx.buf, a.dx.bytes),
                          "classes case %d dtype %d layout %d epi %d: results differ between 1 and 3 threads", i, di,
                          layout, epi);
                    operands_free(&r), operands_free(&a), operands_free(&b);
                }
    }
    /* the first case with w[1][2][0][0] infinite: it multiplies the padding of the first row and column */
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = 6, p.in_channels = p.out_channels = 64;
    for (int d = 0; d < 2; d++) p.in_size[d] = 5 + d, p.kernel[d] = 3, p.pad_begin[d] = p.pad_end[d] = 1;
    for (int layout = test_light(); layout < 2; layout++) {
        operands r, a, b;
        char text[1 << 15] = "";
        operands_make3(&r, &a, &b, &p, layout ? LAYOUT_NXC : LAYOUT_NCX, &rng);
        const int64_t at = a.w.t.stride[0] + 2 * a.w.t.stride[1];
        for (int k = 0; k < 3; k++) nconv__store1((k == 0 ? &r : k == 1 ? &a : &b)->w.buf, NCONV_F32, at, INFINITY);
        ref_1_3 call = {ref, ctx, &p, &r, &a, &b};
        test_verbose_run(run_ref_1_3_call, &call, text, sizeof text);
        CHECK(verbose_ran(text, "core=fwd,", "path=tap classes") &&
                  !verbose_ran(text, "core=bwd_d,", "algo=igemm,"),
              "classes, infinite weight, layout %d: fwd by classes, bwd_d declined, in\n%s", layout, text);
        const class_out outs[] = {{"y", &a.y, &r.y}, {"dx", &a.dx, &r.dx}};
        check_classes("classes, infinite weight", outs, 2, NCONV_F32);
        CHECK(!memcmp(a.y.buf, b.y.buf, a.y.bytes),
              "classes, infinite weight, layout %d: y differs between 1 and 3 threads", layout);
        tensor py;
        tensor_make(&py, a.y.rank, a.y.shape, NCONV_F32, layout ? LAYOUT_NXC : LAYOUT_NCX, &rng, 1);
        nconv_plan_desc d;
        nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
        nconv_plan *pl = NULL;
        const nconv_variant_pack vp = {.x = &a.x.t, .y = &py.t};
        nconv_context_set_threads(ctx, 1);
        CHECK(nconv_plan_create(ctx, &p, &d, &pl) == NCONV_OK && nconv_plan_set_weights(pl, &a.w.t, NULL) == NCONV_OK &&
                  nconv_plan_execute(pl, &vp) == NCONV_OK,
              "classes plan: %s", nconv_last_error());
        nconv_plan_destroy(pl);
        CHECK(!memcmp(py.buf, a.y.buf, a.y.bytes),
              "classes, infinite weight, layout %d: the plan's y is not the call's", layout);
        free(py.buf);
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* The depthwise algo on NCHW planes (forced, as the context has it) with non-finite operands, a 3 x
 * 3 layer: an infinite weight, NaN where the reference has it in fwd (the padding's products too),
 * and bwd_d declined; an infinite dy element in a corner (its taps on the padding: NaN) and one
 * inside: bwd_w's NaN and Inf where the reference has them. */
static void check_planes_nonfinite(const char *algo, int64_t stride, nconv_context *ref, nconv_context *forced,
                                   nconv_context *heur, uint64_t *rng) {
    char ran[64], what[96];
    snprintf(ran, sizeof ran, "algo=%s,", algo);
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = 2, p.in_channels = p.out_channels = p.groups = 3;
    for (int d = 0; d < 2; d++)
        p.in_size[d] = 9 + d, p.kernel[d] = 3, p.pad_begin[d] = p.pad_end[d] = 1, p.stride[d] = stride;
    operands r, a, b;
    char text[16384];
    operands_make3(&r, &a, &b, &p, LAYOUT_NCX, rng);
    for (int k = 0; k < 3; k++) nconv__store1((k == 0 ? &r : k == 1 ? &a : &b)->w.buf, p.dtype, 4, INFINITY);
    planes_call call = {ref, forced, heur, &p, &r, &a, &b, 1, 1, 1};
    test_verbose_run(planes_call_run, &call, text, sizeof text);
    CHECK(verbose_ran(text, "core=fwd,", ran) && !verbose_ran(text, "core=bwd_d,", ran),
          "%s, infinite weight: fwd on it, bwd_d declined, in\n%s", algo, text);
    snprintf(what, sizeof what, "%s, infinite weight", algo);
    const class_out outs[] = {{"y", &a.y, &r.y}, {"dx", &a.dx, &r.dx}};
    check_classes(what, outs, 2, p.dtype);
    operands_free(&r), operands_free(&a), operands_free(&b);
    operands_make3(&r, &a, &b, &p, LAYOUT_NCX, rng);
    r.has_b = a.has_b = b.has_b = 1;
    for (int k = 0; k < 3; k++)
        for (int64_t e = 0; e < 2; e++)
            nconv__store1((k == 0 ? &r : k == 1 ? &a : &b)->dy.buf, p.dtype, e ? 45 : 0, INFINITY);
    test_verbose_run(planes_call_run, &call, text, sizeof text);
    CHECK(verbose_ran(text, "core=bwd_w,", ran), "%s, infinite dy: bwd_w not on it in\n%s", algo, text);
    snprintf(what, sizeof what, "%s, infinite dy", algo);
    const class_out grads[] = {{"dw", &a.dw, &r.dw}, {"db", &a.db, &r.db}};
    check_classes(what, grads, 2, p.dtype);
    operands_free(&r), operands_free(&a), operands_free(&b);
}

/* depthwise_planes, depthwise on f32 NCHW planes read in place: forced, over 1-3D, kernels 1-7 (3, 5
 * and 7 with code of their own), strides 1-3 (W stride 1 and 2 read in place, 3 through phases),
 * dilation, padding wider than the kernel's reach (bwd_d: a dy row cut), every padding mode (other
 * than zeros: through the padded row buffer; reflect on rows of 3 and 6 pixels, whose buffer slots
 * reach columns the mode maps out of the row: fuzz_conv's corpus has the input that found it),
 * transposed (its forward is the core bwd_d, with bias and relu), with and without the epilogue,
 * against the reference and 1 vs 3 threads bitwise; the algorithm that ran, checked in
 * NCONV_VERBOSE's lines: depthwise_planes where it applies to planes, another where it declines
 * (channels-last operands, a forward with z); bwd_w (the bias gradient too) wherever its W stride
 * is 1 or 2 and the padding zeros. The heuristic takes it (checked) for rows of 14 to 112 pixels
 * with undilated kernels up to 7 x 7 (14 and 16 output rows: kernel calls of 7 and 8 rows), at
 * strides 1 and 2 (backward-data at stride 2, by phases: dx rows of 28 or more, with 8 lanes
 * 3 x 3 only), and not for rows of 7 pixels, 3 x 3 at 14 with 16 lanes (depthwise_flat's),
 * dilated 5 x 5 or stride 3 (nor, with 8 lanes, 7 x 7 at 14 or 5 x 5 at stride 2 on 14);
 * backward-data by phases forced over kernels of 2 to 7 taps, odd and even
 * sizes, padding 0 to 3, transposed, and an infinite weight declined; bwd_w with vectors
 * of 16 lanes for 3 x 3 taps and output rows of 14 to 28 pixels, at strides 1 and 2 (not 7 or 56
 * output pixels, nor 5 x 5). An infinite weight: NaN where the
 * reference has it in fwd, and bwd_d declined; an infinite dy element: bwd_w's NaN and Inf where
 * the reference has them (the products with zero padding). */
static void test_depthwise_planes(void) {
    nconv_context *ref, *forced, *heur;
    contexts("ref", "depthwise_planes", &ref, &forced);
    nconv_context_create(&heur);
    uint64_t rng = 61;
    /* ndims, C, H, W, kernel, stride, dilation, padding, mode, transposed, epi, heuristic (1: taking
     * depthwise_planes, 2: not, 3: taking it where vectors have 16 lanes, 4: where they have 8:
     * with 16, depthwise_flat's) */
    const int64_t cases[][12] = {
        {2, 5, 9, 21, 3, 1, 1, 1, 0, 0, 1, 0}, {2, 3, 12, 33, 5, 2, 1, 2, 0, 0, 0, 0},
        {2, 4, 11, 20, 7, 1, 1, 3, 0, 0, 1, 0}, {2, 2, 10, 40, 3, 1, 2, 2, 0, 0, 0, 0},
        {2, 3, 13, 31, 3, 3, 1, 1, 0, 0, 1, 0}, {2, 3, 9, 17, 3, 1, 1, 1, 1, 0, 1, 0},
        {2, 3, 9, 18, 5, 2, 1, 2, 3, 0, 0, 0}, {1, 4, 1, 70, 4, 1, 1, 1, 0, 0, 1, 0},
        {3, 3, 5, 14, 3, 1, 1, 1, 0, 0, 1, 0}, {2, 3, 12, 26, 3, 2, 1, 1, 0, 1, 1, 0},
        {2, 3, 12, 26, 3, 1, 1, 1, 0, 1, 1, 0}, {2, 4, 10, 30, 1, 1, 1, 0, 0, 0, 2, 0},
        {2, 3, 9, 20, 3, 1, 1, 3, 0, 0, 0, 0}, {1, 2, 1, 6, 3, 2, 1, 2, 1, 0, 1, 0},
        {1, 2, 1, 3, 3, 3, 1, 2, 1, 0, 0, 0},
        {2, 6, 12, 56, 3, 1, 1, 1, 0, 0, 1, 1}, {2, 6, 12, 30, 5, 1, 1, 2, 0, 0, 1, 1},
        {2, 6, 12, 56, 7, 1, 1, 3, 0, 0, 0, 1}, {2, 6, 12, 28, 3, 1, 1, 1, 0, 0, 1, 1},
        {2, 6, 12, 27, 3, 1, 1, 1, 0, 0, 1, 1}, {2, 6, 12, 57, 3, 2, 1, 1, 0, 0, 1, 1},
        {2, 6, 12, 112, 3, 2, 1, 1, 0, 0, 1, 1}, {2, 6, 12, 90, 3, 3, 1, 1, 0, 0, 1, 2},
        {2, 6, 12, 56, 3, 2, 1, 1, 0, 0, 1, 1},  {2, 6, 9, 7, 3, 1, 1, 1, 0, 0, 1, 2},
        {2, 6, 12, 14, 3, 1, 1, 1, 0, 0, 1, 4},  {2, 6, 16, 14, 7, 1, 1, 3, 0, 0, 1, 3},
        {2, 6, 16, 28, 5, 2, 1, 2, 0, 0, 1, 3},  {2, 6, 9, 7, 7, 1, 1, 3, 0, 0, 1, 2},
        {2, 6, 12, 30, 5, 1, 2, 4, 0, 0, 1, 2},  {2, 4, 11, 19, 2, 2, 1, 0, 0, 0, 1, 0},
        {2, 3, 13, 21, 4, 2, 1, 1, 0, 0, 0, 0},  {2, 3, 10, 15, 7, 2, 1, 3, 0, 1, 1, 0},
        {2, 3, 17, 30, 3, 2, 1, 1, 0, 0, 2, 0},  {2, 6, 9, 14, 3, 2, 1, 1, 0, 0, 1, 2}};
    const nconv_padding_mode modes[] = {NCONV_PAD_ZEROS, NCONV_PAD_REFLECT, NCONV_PAD_REPLICATE, NCONV_PAD_CIRCULAR};
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < ncases; i++)
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_NXC; layout++) {
            const int64_t *cs = cases[i];
            nconv_problem p;
            nconv_problem_init(&p, (int)cs[0]);
            p.batch = 2, p.in_channels = p.out_channels = p.groups = cs[1];
            p.padding_mode = modes[cs[8]], p.transposed = (int)cs[9];
            for (int d = 0; d < p.ndims; d++) {
                const int w = d == p.ndims - 1;
                p.in_size[d] = w ? cs[3] : cs[2] - d, p.kernel[d] = cs[4], p.stride[d] = cs[5];
                p.dilation[d] = cs[6], p.pad_begin[d] = p.pad_end[d] = cs[7];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "depthwise planes case %d: %s", i, nconv_last_error());
            operands r, a, b;
            operands_make3(&r, &a, &b, &p, layout, &rng);
            r.has_b = cs[10] & 1, r.has_z = cs[10] >= 2;
            r.epi = (nconv_epilogue){cs[10] == 1 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.75};
            a.has_b = b.has_b = r.has_b, a.has_z = b.has_z = r.has_z, a.epi = b.epi = r.epi;
            /* the core bwd_d applies with zero padding at stride 1, or at stride 2 by phases (2D,
             * undilated, 2 to 8 taps): the user's forward when transposed */
            const int phases = cs[0] == 2 && cs[5] == 2 && cs[6] == 1 && cs[4] >= 2 && cs[4] <= 8;
            const int bwd_d_core = (cs[5] == 1 || phases) && cs[8] == 0;
            const int fwd_on_f = !cs[11] && (!p.transposed || bwd_d_core);
            const int dx_on_f = !cs[11] && (p.transposed || bwd_d_core);
            const int dw_on_f = !cs[11] && cs[5] <= 2 && cs[8] == 0; /* bwd_w: W stride 1 or 2, zero padding */
            planes_call call = {ref, cs[11] ? heur : forced, heur, &p, &r, &a, &b, fwd_on_f, dx_on_f, dw_on_f};
            char text[16384];
            test_verbose_run(planes_call_run, &call, text, sizeof text);
            const int ncx = layout == LAYOUT_NCX; /* z declined: the forward's only */
            const char *fwd = p.transposed ? "core=bwd_d," : "core=fwd,";
            const char *bwd = p.transposed ? "core=fwd," : "core=bwd_d,";
            const int taken = cs[11] == 1 || (cs[11] == 3 && nconv__kernels()->dw_vl >= 16) ||
                              (cs[11] == 4 && nconv__kernels()->dw_vl < 16);
            /* by phases: dx rows of 28 pixels or more, with 8-lane vectors for 3 x 3 kernels only */
            const int bwd_taken = cs[5] == 1 ? taken
                                             : cs[11] && phases && cs[3] >= 28 &&
                                                   (nconv__kernels()->dw_vl >= 16 || cs[4] <= 3);
            const int64_t ow = (cs[3] + 2 * cs[7] - cs[6] * (cs[4] - 1) - 1) / cs[5] + 1;
            const int dw_taken = cs[11] && nconv__kernels()->dw_vl >= 16 && cs[0] == 2 && cs[4] == 3 && cs[6] == 1 &&
                                 ow >= 14 && ow <= 28 && cs[5] <= 2 && cs[8] == 0;
            const struct { const char *core; int want; } dirs[] = {{fwd, ncx && !r.has_z && (taken || fwd_on_f)},
                                                                   {bwd, ncx && ((bwd_taken && bwd_d_core) || dx_on_f)},
                                                                   {"core=bwd_w,", ncx && (dw_taken || dw_on_f)}};
            for (int dir = 0; dir < 3; dir++)
                CHECK(verbose_ran(text, dirs[dir].core, "algo=depthwise_planes,") == dirs[dir].want,
                      "depthwise planes case %d layout %d: %s%s depthwise_planes in\n%s", i, layout, dirs[dir].core,
                      dirs[dir].want ? "not" : "", text);
            check_1_3("depthwise planes", i, layout, &p, &r, &a, &b, r.has_b);
            operands_free(&r), operands_free(&a), operands_free(&b);
        }
    check_planes_nonfinite("depthwise_planes", 1, ref, forced, heur, &rng);
    check_planes_nonfinite("depthwise_planes", 2, ref, forced, heur, &rng); /* bwd_d by phases */
    nconv_context_destroy(ref);
    nconv_context_destroy(forced);
    nconv_context_destroy(heur);
}

/* depthwise_flat, depthwise on f32 NCHW planes of the source's shape (stride 1) flattened: forced
 * over 1-3D, kernels 1-7 (an even one with padding 1 before and 2 after), dilation, planes of 7
 * to 40 pixels a row (vector tails; planes of 1 to 13 vectors), transposed (its forward is the
 * core bwd_d, with bias and relu), with and without the epilogue, NCHW and NHWC, every direction
 * (bwd_w with the bias gradient), against the reference and 1 vs 3 threads bitwise; the
 * algorithm that ran, checked in NCONV_VERBOSE's lines: depthwise_flat on NCHW, another where it
 * declines (channels-last operands, a forward with z). The heuristic takes it (checked) with
 * vectors of 16 lanes for 3 x 3 taps or fewer on rows of 7 to 14 pixels (bwd_w: 7 to 13), not
 * for 5 x 5, rows of 28, 1D or 3D taps. An infinite weight: NaN where the reference has it in
 * fwd (the padding's products too), and bwd_d declined; an infinite dy element: bwd_w's NaN and
 * Inf where the reference has them (the products with zero padding). */
static void test_depthwise_flat(void) {
    nconv_context *ref, *forced, *heur;
    contexts("ref", "depthwise_flat", &ref, &forced);
    nconv_context_create(&heur);
    uint64_t rng = 67;
    /* ndims, C, H, W, kernel, dilation, padding before, after, transposed, epi (1: bias, relu; 2:
     * z), heuristic (1: taking depthwise_flat with 16-lane vectors; 0: not) */
    const int64_t cases[][11] = {
        {2, 5, 9, 14, 3, 1, 1, 1, 0, 1, 1},  {2, 4, 7, 7, 3, 1, 1, 1, 0, 0, 1},  {2, 3, 10, 13, 5, 1, 2, 2, 0, 1, 0},
        {2, 3, 6, 9, 7, 1, 3, 3, 0, 0, 0},   {1, 4, 1, 40, 3, 1, 1, 1, 0, 1, 0}, {3, 3, 4, 6, 3, 1, 1, 1, 0, 1, 0},
        {2, 3, 8, 11, 3, 2, 2, 2, 0, 0, 1},  {2, 3, 9, 12, 4, 1, 1, 2, 0, 1, 0}, {2, 6, 14, 14, 3, 1, 1, 1, 0, 2, 1},
        {2, 4, 9, 12, 3, 1, 1, 1, 1, 1, 1},  {2, 3, 5, 28, 3, 1, 1, 1, 0, 1, 0}, {2, 7, 3, 8, 1, 1, 0, 0, 0, 1, 1}};
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < ncases; i++)
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_NXC; layout++) {
            const int64_t *cs = cases[i];
            nconv_problem p;
            nconv_problem_init(&p, (int)cs[0]);
            p.batch = 2, p.in_channels = p.out_channels = p.groups = cs[1];
            p.transposed = (int)cs[8];
            for (int d = 0; d < p.ndims; d++) {
                const int w = d == p.ndims - 1;
                p.in_size[d] = w ? cs[3] : cs[2] - d, p.kernel[d] = cs[4], p.dilation[d] = cs[5];
                p.pad_begin[d] = cs[6], p.pad_end[d] = cs[7];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "depthwise flat case %d: %s", i, nconv_last_error());
            const int taken = cs[10] && nconv__kernels()->dw_vl >= 16;
            for (int dir = 0; dir < 3; dir++) {
                const char *chosen = "";
                nconv_algorithm_chosen(heur, &p, (nconv_direction)dir, &chosen);
                const int want = taken && (dir != NCONV_DIR_BWD_W || cs[3] < 14);
                CHECK((strcmp(chosen, "depthwise_flat") == 0) == want,
                      "depthwise flat case %d direction %d: the heuristic chose %s", i, dir, chosen);
            }
            operands r, a, b;
            operands_make3(&r, &a, &b, &p, layout, &rng);
            r.has_b = cs[9] == 1, r.has_z = cs[9] == 2;
            r.epi = (nconv_epilogue){cs[9] == 1 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.75};
            a.has_b = b.has_b = r.has_b, a.has_z = b.has_z = r.has_z, a.epi = b.epi = r.epi;
            planes_call call = {ref, forced, heur, &p, &r, &a, &b, 1, 1, 1};
            char text[16384];
            test_verbose_run(planes_call_run, &call, text, sizeof text);
            const int ncx = layout == LAYOUT_NCX;
            const char *fwd = p.transposed ? "core=bwd_d," : "core=fwd,";
            const char *bwd = p.transposed ? "core=fwd," : "core=bwd_d,";
            CHECK(verbose_ran(text, fwd, "algo=depthwise_flat,") == (ncx && !r.has_z) &&
                      verbose_ran(text, bwd, "algo=depthwise_flat,") == ncx &&
                      verbose_ran(text, "core=bwd_w,", "algo=depthwise_flat,") == ncx,
                  "depthwise flat case %d layout %d: depthwise_flat where it should not run, or not where it "
                  "should, in\n%s", i, layout, text);
            check_1_3("depthwise flat", i, layout, &p, &r, &a, &b, r.has_b);
            operands_free(&r), operands_free(&a), operands_free(&b);
        }
    check_planes_nonfinite("depthwise_flat", 1, ref, forced, heur, &rng);
    nconv_context_destroy(ref);
    nconv_context_destroy(forced);
    nconv_context_destroy(heur);
}

/* igemm_cols, backward-data for thin input channels: the heuristic's choice for bwd_d (checked)
 * of 1D and 2D layers of 1-8 input channels, plain and transposed (its forward is the core
 * bwd_d, with bias and relu in the column path's epilogue), every layout, f32, f16 and bf16
 * (16-bit channels-last dy read in place, a tile's rows widened), against the reference; the
 * same bits for 1 and 3 threads; an infinite weight is declined and goes on to gemm, with the
 * reference's NaN / Inf pattern. */
static void test_cols(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 19;
    /* ndims, C, O, spatial size, kernel, stride, padding, transposed */
    const int64_t cases[][8] = {{1, 1, 32, 200, 10, 5, 0, 0}, {2, 3, 24, 29, 7, 2, 3, 0}, {2, 8, 16, 12, 5, 1, 2, 0},
                                {2, 2, 16, 15, 5, 3, 2, 0}, {2, 16, 4, 9, 4, 2, 1, 1}, {1, 32, 2, 40, 3, 1, 1, 1}};
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16};
    for (int ii = 0; ii < 3 * ncases; ii++)
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_STRIDED; layout++) {
            const int i = ii % ncases;
            nconv_problem p;
            nconv_problem_init(&p, (int)cases[i][0]);
            p.dtype = dts[ii / ncases];
            p.batch = 2, p.in_channels = cases[i][1], p.out_channels = cases[i][2], p.transposed = (int)cases[i][7];
            for (int d = 0; d < p.ndims; d++) {
                p.in_size[d] = cases[i][3] + d, p.kernel[d] = cases[i][4], p.stride[d] = cases[i][5];
                p.pad_begin[d] = p.pad_end[d] = cases[i][6];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "cols case %d: %s", i, nconv_last_error());
            const char *chosen = "";
            nconv_algorithm_chosen(ctx, &p, NCONV_DIR_BWD_D, &chosen);
            CHECK(!strcmp(chosen, "igemm_cols"), "cols case %d: bwd_d runs %s", i, chosen);
            operands r, a, b;
            operands_make3(&r, &a, &b, &p, layout, &rng);
            r.has_b = a.has_b = b.has_b = 1;
            r.epi = a.epi = b.epi = (nconv_epilogue){i % 2 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 1.0};
            const int special = i == 2;
            for (int k = 0; special && k < 3; k++) nconv__store1((k == 0 ? &r : k == 1 ? &a : &b)->w.buf, p.dtype, 0, INFINITY);
            run_ref_1_3(ref, ctx, &p, &r, &a, &b);
            struct { const char *n; tensor *x, *y, *z; } outs[] = {{"y", &a.y, &r.y, &b.y}, {"dx", &a.dx, &r.dx, &b.dx}};
            for (int o = 0; o < 2; o++) {
                if (special) {
                    const int64_t bad = class_differs(outs[o].x, outs[o].y, p.dtype);
                    CHECK(bad < 0, "cols case %d dtype %d layout %d: %s[%lld] differs in class from the reference", i,
                          p.dtype, layout, outs[o].n, (long long)bad);
                } else {
                    const double e = rel_err(outs[o].x, outs[o].y, p.dtype);
                    CHECK(e <= tolerance(p.dtype), "cols case %d dtype %d layout %d: %s err %g", i, p.dtype, layout,
                          outs[o].n, e);
                }
                CHECK(!memcmp(outs[o].x->buf, outs[o].z->buf, outs[o].x->bytes),
                      "cols case %d dtype %d layout %d: %s differs between 1 and 3 threads", i, p.dtype, layout,
                      outs[o].n);
            }
            operands_free(&r), operands_free(&a), operands_free(&b);
        }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* stem, few input channels by direct convolution: 1-3D, 1-4 channels, kernels 3-7 with strides 1-4,
 * dilation, padding wider than the kernel's reach, every padding mode, odd output channel counts,
 * bias and relu, against the reference and 1 vs 3 threads bitwise, forward and backward-weights
 * (dw and db); the heuristic's choice (forward: not with 10 taps, nor with 147; backward-weights:
 * not with 147), and the algorithm that ran, in NCONV_VERBOSE's lines: stem on channels-last
 * operands, and on NCHW planes under zero padding at W stride 2 (column phases) and, with 16-lane
 * vectors, 1 (backward-weights: on NCHW planes of up to 128 channels at any stride and padding);
 * declined (another ran) on planes at other strides, strided planes, other padding modes on
 * planes, a forward with z and an infinite weight (whose NaN and Inf then match the reference's);
 * an infinite dy at a pixel whose taps reach into zero padding makes the reference's NaN in dw. */
static nconv_status stem_calls(nconv_context *ctx, const nconv_problem *p, operands *o) {
    const nconv_status st = nconv_forward(ctx, p, &o->epi, &o->x.t, &o->w.t, o->has_b ? &o->b.t : NULL,
                                          o->has_z ? &o->z.t : NULL, &o->y.t, NULL, 0);
    if (st) return st;
    return nconv_backward(ctx, p, NULL, &o->x.t, NULL, NULL, &o->dy.t, NULL, &o->dw.t, &o->db.t, NULL, NULL, 0);
}

/* The forward and backward-weights of ref_1_3's operands: r by the reference, a and b by ctx on 1
 * and 3 threads. */
static int stem_calls_1_3(void *arg) {
    const ref_1_3 *c = arg;
    CHECK(stem_calls(c->ref, c->p, c->r) == NCONV_OK, "ref: %s", nconv_last_error());
    nconv_context_set_threads(c->ctx, 1);
    CHECK(stem_calls(c->ctx, c->p, c->a) == NCONV_OK, "%s", nconv_last_error());
    nconv_context_set_threads(c->ctx, 3);
    CHECK(stem_calls(c->ctx, c->p, c->b) == NCONV_OK, "%s", nconv_last_error());
    return 0;
}

static void test_stem(void) {
    nconv_context *ref, *forced, *ctx;
    contexts("ref", "stem", &ref, &forced);
    nconv_context_create(&ctx);
    uint64_t rng = 23;
    /* ndims, C, O, size, kernel, stride, padding, dilation, padding mode, epilogue (run_epi_1_3) */
    const int64_t cases[][10] = {{2, 3, 32, 30, 3, 2, 1, 1, 0, 1}, {2, 3, 20, 33, 7, 2, 3, 1, 0, 1},
                                 {2, 3, 40, 35, 4, 4, 0, 1, 0, 0}, {3, 2, 17, 9, 3, 2, 1, 1, 0, 1},
                                 {2, 4, 70, 26, 3, 3, 2, 2, 0, 1}, {2, 3, 16, 12, 3, 1, 1, 1, 1, 1},
                                 {2, 1, 33, 19, 5, 1, 6, 1, 0, 1},  {2, 3, 24, 20, 3, 1, 1, 1, 2, 3},
                                 {2, 3, 24, 20, 3, 1, 1, 1, 3, 0},  {1, 1, 24, 90, 10, 5, 0, 1, 0, 1},
                                 {1, 1, 144, 60, 10, 5, 0, 1, 0, 0}};
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < ncases + 1; i++) /* the last: case 0 with an infinite weight and dy */
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_STRIDED; layout++) {
            const int64_t *cs = cases[i < ncases ? i : 0];
            nconv_problem p;
            nconv_problem_init(&p, (int)cs[0]);
            p.batch = 2, p.in_channels = cs[1], p.out_channels = cs[2], p.padding_mode = (nconv_padding_mode)cs[8];
            for (int d = 0; d < p.ndims; d++) {
                p.in_size[d] = cs[3] + d, p.kernel[d] = cs[4], p.stride[d] = cs[5] - (d == 0 && p.ndims == 3);
                p.pad_begin[d] = p.pad_end[d] = cs[6], p.dilation[d] = cs[7];
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "stem case %d: %s", i, nconv_last_error());
            const char *chosen = "";
            nconv_algorithm_chosen(ctx, &p, NCONV_DIR_FWD, &chosen);
            int64_t red = cs[1]; /* reductions too short or long for the heuristic: another's */
            for (int d = 0; d < p.ndims; d++) red *= cs[4];
            CHECK(!strcmp(chosen, "stem") == (red >= 16 && red <= 100), "stem case %d: the heuristic takes %s", i,
                  chosen);
            nconv_algorithm_chosen(ctx, &p, NCONV_DIR_BWD_W, &chosen);
            CHECK(!strcmp(chosen, "stem") == (red <= 100), "stem case %d: the heuristic takes %s for bwd_w", i, chosen);
            operands r, a, b;
            char text[1 << 15] = "";
            operands_make3(&r, &a, &b, &p, layout, &rng);
            const int epi = (int)cs[9];
            r.has_b = a.has_b = b.has_b = epi & 1, r.has_z = a.has_z = b.has_z = epi >= 2;
            r.epi = a.epi = b.epi = (nconv_epilogue){epi == 1 || epi == 3 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.75};
            for (int k = 0; k < 3 && i == ncases; k++) {
                operands *o = k == 0 ? &r : k == 1 ? &a : &b;
                nconv__store1(o->w.buf, p.dtype, 5, INFINITY);
                nconv__store1(o->dy.buf, p.dtype, 0, INFINITY); /* pixel 0: taps in the padding */
            }
            ref_1_3 call = {ref, forced, &p, &r, &a, &b};
            test_verbose_run(stem_calls_1_3, &call, text, sizeof text);
            /* planes: at W stride 2, and 1 with 16-lane vectors (these small rows fit planes_fit) */
            const int planes = layout == LAYOUT_NCX && p.padding_mode == NCONV_PAD_ZEROS &&
                               (cs[5] == 2 || (cs[5] == 1 && nconv__kernels()->dw_vl >= 16));
            const int on = i < ncases && epi < 2 && (layout == LAYOUT_NXC || planes);
            CHECK(verbose_ran(text, "core=fwd,", "algo=stem,") == on, "stem case %d layout %d: stem %s in\n%s", i,
                  layout, on ? "did not run" : "ran", text);
            /* bwd_w: not on strided planes, nor on NCHW planes of more than 128 channels */
            const int on_bw = layout == LAYOUT_NXC || (layout == LAYOUT_NCX && cs[2] <= 128);
            CHECK(verbose_ran(text, "core=bwd_w,", "algo=stem,") == on_bw, "stem case %d layout %d: bwd_w stem %s in\n%s",
                  i, layout, on_bw ? "did not run" : "ran", text);
            const tensor *got[] = {&a.y, &a.dw, &a.db}, *want[] = {&r.y, &r.dw, &r.db}, *other[] = {&b.y, &b.dw, &b.db};
            for (int t = 0; t < 3; t++) {
                if (i == ncases) {
                    const int64_t bad = class_differs(got[t], want[t], p.dtype);
                    CHECK(bad < 0, "stem case %d layout %d: %s[%lld] differs in class from the reference", i, layout,
                          t == 0 ? "y" : t == 1 ? "dw" : "db", (long long)bad);
                    continue;
                }
                const double e = rel_err(got[t], want[t], p.dtype);
                CHECK(e <= tolerance(p.dtype), "stem case %d layout %d: %s err %g", i, layout,
                      t == 0 ? "y" : t == 1 ? "dw" : "db", e);
                CHECK(!memcmp(got[t]->buf, other[t]->buf, got[t]->bytes),
                      "stem case %d layout %d: %s differs between 1 and 3 threads\n%s", i, layout,
                      t == 0 ? "y" : t == 1 ? "dw" : "db", text);
            }
            operands_free(&r), operands_free(&a), operands_free(&b);
        }
    nconv_context_destroy(ref);
    nconv_context_destroy(forced);
    nconv_context_destroy(ctx);
}

/* igemm's backward-weights over pixel chunks (small weights, many pixels:
 * threads take chunks, whose sums are added in chunk order): against the
 * reference, the same bits for 1, 2 and 3 threads, dw and db (whose lanes
 * come from dy^T's packing, or swapped, from dy's rows in place); 1x1, a
 * W-folded input layer (swapped tiles, dy from NCHW planes; x^T read in place
 * with a pixel stride of 6, 2 and 9 floats, blocks starting mid-row), grouped,
 * and more input than output channels (swapped from 2 threads on: the same bits);
 * f32, f16 and bf16 (16-bit NCHW dy widened a panel's runs at a time for the swapped tiles). */
static void test_bw_chunks(void) {
    nconv_context *ref, *ctx;
    contexts("ref", "igemm", &ref, &ctx);
    uint64_t rng = 11;
    /* C, O, G, spatial size, kernel, stride, padding */
    const int64_t cases[][7] = {
        {16, 24, 1, 48, 1, 1, 0}, {3, 20, 1, 70, 7, 2, 3}, {8, 12, 2, 40, 3, 1, 1}, {48, 20, 1, 40, 1, 1, 0},
        {2, 20, 1, 45, 5, 1, 2}, {3, 12, 1, 61, 3, 3, 1}};
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16};
    for (int i = 0; i < 18; i++)
        for (int layout = LAYOUT_NCX; layout <= LAYOUT_NXC; layout++) {
            nconv_problem p;
            nconv_problem_init(&p, 2);
            p.dtype = dts[i / 6];
            p.batch = 2, p.in_channels = cases[i % 6][0], p.out_channels = cases[i % 6][1], p.groups = cases[i % 6][2];
            for (int d = 0; d < 2; d++) {
                p.in_size[d] = cases[i % 6][3], p.kernel[d] = cases[i % 6][4], p.stride[d] = cases[i % 6][5];
                p.pad_begin[d] = p.pad_end[d] = cases[i % 6][6];
            }
            uint64_t fill = test_rng(&rng);
            operands r, a[3];
            operands_make(&r, &p, layout, &rng, &fill);
            r.epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
            r.has_b = 1;
            CHECK(run_all(ref, &p, &r) == NCONV_OK, "ref: %s", nconv_last_error());
            for (int t = 0; t < 3; t++) {
                operands_make(&a[t], &p, layout, &rng, &fill);
                a[t].epi = r.epi;
                a[t].has_b = 1;
                nconv_context_set_threads(ctx, t + 1);
                CHECK(run_all(ctx, &p, &a[t]) == NCONV_OK, "%s", nconv_last_error());
            }
            const double e = rel_err(&a[0].dw, &r.dw, p.dtype);
            CHECK(e <= tolerance(p.dtype), "chunk case %d layout %d: dw err %g", i, layout, e);
            CHECK(!memcmp(a[0].dw.buf, a[1].dw.buf, a[0].dw.bytes) && !memcmp(a[0].dw.buf, a[2].dw.buf, a[0].dw.bytes),
                  "chunk case %d layout %d: dw differs between 1, 2 and 3 threads", i, layout);
            const double eb = rel_err(&a[0].db, &r.db, p.dtype);
            CHECK(eb <= tolerance(p.dtype), "chunk case %d layout %d: db err %g", i, layout, eb);
            CHECK(!memcmp(a[0].db.buf, a[1].db.buf, a[0].db.bytes) && !memcmp(a[0].db.buf, a[2].db.buf, a[0].db.bytes),
                  "chunk case %d layout %d: db differs between 1, 2 and 3 threads", i, layout);
            operands_free(&r), operands_free(&a[0]), operands_free(&a[1]), operands_free(&a[2]);
        }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* Calls over a context memory limit below their workspace run in pieces (images, then bands
 * of rows; see src/split.c): every algorithm that takes them, against the reference, with
 * the epilogue, transposed problems, padding modes and 1D / 2D / 3D, bitwise the same on 1-3
 * threads. Fails if a piece's rows, padding or offsets are off, or if bwd_w drops a piece. */
static void test_split(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 23;
    /* ndims, N, C, O, G, size, kernel, stride, padding, dilation, transposed, mode, algorithm */
    const struct { int nd; int64_t n, c, o, g, size, k, s, pad, d; int tr, mode; const char *algo; } cases[] = {
        {2, 4, 8, 16, 1, 30, 3, 1, 1, 1, 0, 0, NULL},       {2, 4, 8, 16, 1, 30, 3, 1, 1, 1, 0, 0, "igemm"},
        {2, 1, 8, 16, 1, 40, 3, 1, 2, 2, 0, 0, "winograd"}, {2, 3, 5, 7, 1, 31, 3, 2, 1, 1, 0, 0, "igemm"},
        {2, 1, 3, 16, 1, 40, 7, 2, 3, 1, 0, 0, NULL},       {1, 1, 3, 16, 1, 900, 5, 1, 2, 1, 0, 0, NULL},
        {1, 2, 4, 24, 1, 600, 5, 2, 0, 1, 0, 0, "igemm"},   {3, 1, 4, 8, 1, 12, 3, 1, 1, 1, 0, 0, NULL},
        {2, 3, 32, 32, 4, 24, 3, 1, 1, 1, 0, 0, "grouped"}, {2, 2, 16, 16, 16, 30, 3, 1, 1, 1, 0, 0, "depthwise"},
        {2, 3, 8, 6, 1, 15, 4, 2, 1, 1, 1, 0, NULL},        {2, 1, 8, 6, 1, 30, 3, 1, 1, 1, 1, 0, "igemm"},
        {2, 4, 6, 6, 1, 24, 3, 1, 1, 1, 0, 2, NULL},        {2, 2, 3, 16, 1, 30, 3, 2, 1, 1, 0, 0, NULL},
        {2, 4, 16, 24, 1, 30, 1, 1, 0, 1, 0, 0, NULL}};
    int split[2] = {0, 0}, split16 = 0;
    /* f16 and bf16 (pieces in forward and backward-data; dw whole) on a case of each kind */
    const size_t ncases = sizeof cases / sizeof cases[0], cases16[] = {0, 1, 2, 6, 9, 10, 12};
    const nconv_dtype dts[] = {NCONV_F32, NCONV_F16, NCONV_BF16};
    for (size_t ci = 0; ci < ncases + 2 * sizeof cases16 / sizeof cases16[0]; ci++) {
        const nconv_dtype dt = dts[ci < ncases ? 0 : 1 + (ci - ncases) % 2];
        const size_t i = ci < ncases ? ci : cases16[(ci - ncases) / 2];
        nconv_problem p;
        nconv_problem_init(&p, cases[i].nd);
        p.dtype = dt;
        p.batch = cases[i].n, p.in_channels = cases[i].c, p.out_channels = cases[i].o, p.groups = cases[i].g;
        p.transposed = cases[i].tr, p.padding_mode = (nconv_padding_mode)cases[i].mode;
        for (int d = 0; d < p.ndims; d++) {
            p.in_size[d] = cases[i].size - d, p.kernel[d] = cases[i].k, p.stride[d] = cases[i].s;
            p.pad_begin[d] = p.pad_end[d] = cases[i].pad, p.dilation[d] = cases[i].d;
        }
        char desc[512] = "";
        nconv_problem_to_desc(&p, desc, sizeof desc);
        CHECK(nconv_problem_validate(&p) == NCONV_OK, "case %zu: %s", i, nconv_last_error());
        nconv_context_set_memory_limit(ctx, 0);
        nconv_context_set_algorithm(ctx, cases[i].algo);
        /* Most of a small call's workspace does not shrink with the piece (packed weights,
         * per-thread blocks): the limits take fractions of the activations' copies off the
         * whole call's need. */
        int64_t xs[5], ws[5], ys[5], nx = 1, ny = 1;
        nconv_problem_shapes(&p, xs, ws, ys);
        for (int d = 0; d < p.ndims + 2; d++) nx *= xs[d], ny *= ys[d];
        const size_t copies = sizeof(float) * (size_t)(nx + ny);
        for (int op = 0; op < 2; op++) {
            size_t whole, need;
            nconv_context_set_memory_limit(ctx, 0);
            nconv_context_set_threads(ctx, 1);
            nconv_workspace_size(ctx, &p, (nconv_op)op, NULL, &whole);
            for (int frac = 2; frac <= 8; frac *= 2) {
                const int layout = (int)test_int(&rng, LAYOUT_NCX, LAYOUT_STRIDED);
                uint64_t fill = test_rng(&rng);
                operands r, a[4];
                operands_make(&r, &p, layout, &rng, &fill);
                r.has_b = 1, r.has_z = (int)test_int(&rng, 0, 1);
                r.epi = (nconv_epilogue){test_int(&rng, 0, 1) ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.5};
                CHECK(run_all(ref, &p, &r) == NCONV_OK, "ref: %s", nconv_last_error());
                const size_t limit = whole - copies + copies / (size_t)frac;
                nconv_context_set_memory_limit(ctx, limit);
                nconv_context_set_threads(ctx, 1);
                nconv_workspace_size(ctx, &p, (nconv_op)op, &r.epi, &need);
                /* a[0]: 1 thread, workspace allocated within the limit; a[1..3]: 1-3 threads with
                 * the caller's workspace of the query's size (the pieces the query planned, the
                 * same for every thread count) */
                nconv_status st[4];
                for (int t = 0; t < 4; t++) {
                    operands_make(&a[t], &p, layout, &rng, &fill);
                    a[t].has_b = r.has_b, a[t].has_z = r.has_z, a[t].epi = r.epi;
                    if (op) memcpy(a[t].y.buf, r.y.buf, r.y.bytes); /* relu's mask */
                    nconv_context_set_threads(ctx, t ? t : 1);
                    size_t bytes = 0;
                    if (t) nconv_workspace_size(ctx, &p, (nconv_op)op, &r.epi, &bytes);
                    void *ws = t ? malloc(bytes) : NULL;
                    st[t] = op ? nconv_backward(ctx, &p, &a[t].epi, &a[t].x.t, &a[t].w.t, &a[t].y.t, &a[t].dy.t, &a[t].dx.t,
                                                &a[t].dw.t, &a[t].db.t, a[t].has_z ? &a[t].dz.t : NULL, ws, bytes)
                               : nconv_forward(ctx, &p, &a[t].epi, &a[t].x.t, &a[t].w.t, &a[t].b.t,
                                               a[t].has_z ? &a[t].z.t : NULL, &a[t].y.t, ws, bytes);
                    free(ws);
                    CHECK(st[t] == NCONV_OK || (need > limit && st[t] == NCONV_OUT_OF_MEMORY && !t), "case %zu: %s", i,
                          nconv_last_error());
                }
                if (dt == NCONV_F32) split[op] += need <= limit && need < whole;
                else split16 += !op && need <= limit && need < whole;
                for (int t = 0; t < 4; t++) {
                    struct { const char *n; tensor *x, *y; int on; } outs[] = {
                        {"y", &a[t].y, &r.y, !op}, {"dx", &a[t].dx, &r.dx, op}, {"dw", &a[t].dw, &r.dw, op},
                        {"db", &a[t].db, &r.db, op}, {"dz", &a[t].dz, &r.dz, op && r.has_z}};
                    for (size_t j = 0; j < sizeof outs / sizeof outs[0] && st[t] == NCONV_OK; j++) {
                        if (!outs[j].on) continue;
                        const double e = rel_err(outs[j].x, outs[j].y, dt);
                        CHECK(e <= tolerance(dt),
                              "split case %zu dtype %d (1/%d of the copies, layout %d, run %d): %s err %.3e on %s", i,
                              (int)dt, frac, layout, t, outs[j].n, e, desc);
                    }
                }
                for (int t = 2; t < 4; t++)
                    CHECK(!memcmp(a[1].y.buf, a[t].y.buf, a[1].y.bytes) && !memcmp(a[1].dx.buf, a[t].dx.buf, a[1].dx.bytes) &&
                              !memcmp(a[1].dw.buf, a[t].dw.buf, a[1].dw.bytes) && !memcmp(a[1].db.buf, a[t].db.buf, a[1].db.bytes),
                          "split case %zu (1/%d): results differ between 1 and %d threads", i, frac, t);
                operands_free(&r);
                for (int t = 0; t < 4; t++) operands_free(&a[t]);
            }
        }
    }
    CHECK(split[0] >= 20 && split[1] >= 20, "only %d forward and %d backward calls ran in pieces", split[0], split[1]);
    CHECK(split16 >= 10, "only %d f16 / bf16 forward calls ran in pieces", split16);
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* f64 on gemm: the heuristic's choice (checked) for every f64 problem, on problems across the
 * f64 GEMM's blocks (reductions past 256, more than 96 rows, more than 1024 columns, column
 * chunks), groups, strides, dilation, every padding mode and layout, transposed, 1-3D, the
 * epilogue; within 1e-12 of the reference, the same bits for 1 and 3 threads. */
static void test_f64(void) {
    nconv_context *ref, *ctx;
    contexts("ref", NULL, &ref, &ctx);
    uint64_t rng = 64;
    /* ndims, batch, C, O, G, spatial size, kernel, stride, padding, dilation, transposed, padding mode */
    const int64_t cases[][12] = {
        {2, 3, 70, 100, 1, 12, 3, 1, 1, 1, 0, 0}, {1, 2, 3, 13, 1, 3000, 5, 1, 2, 1, 0, 1},
        {2, 2, 64, 20, 1, 30, 3, 1, 1, 1, 0, 0},  {2, 2, 16, 14, 2, 9, 3, 2, 2, 2, 0, 1},
        {3, 2, 6, 8, 2, 5, 3, 1, 1, 1, 0, 3},     {2, 4, 24, 12, 3, 7, 3, 2, 1, 1, 1, 0},
        {2, 1, 40, 7, 1, 6, 1, 1, 0, 1, 0, 2},    {1, 5, 9, 33, 3, 40, 4, 3, 1, 2, 1, 0}};
    const nconv_padding_mode modes[] = {NCONV_PAD_ZEROS, NCONV_PAD_REFLECT, NCONV_PAD_REPLICATE, NCONV_PAD_CIRCULAR};
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const int layout = i % 3;
        nconv_problem p;
        nconv_problem_init(&p, (int)cases[i][0]);
        p.batch = cases[i][1], p.in_channels = cases[i][2], p.out_channels = cases[i][3], p.groups = cases[i][4];
        p.transposed = (int)cases[i][10];
        p.padding_mode = modes[cases[i][11]];
        p.dtype = NCONV_F64;
        for (int d = 0; d < p.ndims; d++) {
            p.in_size[d] = cases[i][5] + d, p.kernel[d] = cases[i][6], p.stride[d] = cases[i][7];
            p.pad_begin[d] = p.pad_end[d] = cases[i][8], p.dilation[d] = cases[i][9];
        }
        char desc[512] = "";
        nconv_problem_to_desc(&p, desc, sizeof desc);
        CHECK(nconv_problem_validate(&p) == NCONV_OK, "f64 case %d: %s", i, nconv_last_error());
        for (int dir = 0; dir < 3; dir++) {
            const char *chosen = "";
            nconv_algorithm_chosen(ctx, &p, (nconv_direction)dir, &chosen);
            CHECK(!strcmp(chosen, "gemm"), "f64 %s dir %d: the heuristic chose %s", desc, dir, chosen);
        }
        operands r, a, b;
        operands_make3(&r, &a, &b, &p, layout, &rng);
        r.has_b = a.has_b = b.has_b = 1;
        r.has_z = a.has_z = b.has_z = i % 2;
        r.epi = a.epi = b.epi = (nconv_epilogue){i % 3 == 1 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.75};
        run_ref_1_3(ref, ctx, &p, &r, &a, &b);
        struct { const char *n; tensor *x, *y, *z; } outs[] = {{"y", &a.y, &r.y, &b.y}, {"dx", &a.dx, &r.dx, &b.dx},
                                                          {"dw", &a.dw, &r.dw, &b.dw}, {"db", &a.db, &r.db, &b.db}};
        for (int o = 0; o < 4; o++) {
            const double e = rel_err(outs[o].x, outs[o].y, p.dtype);
            CHECK(e <= tolerance(p.dtype), "f64 %s layout %d: %s err %g", desc, layout, outs[o].n, e);
            CHECK(!memcmp(outs[o].x->buf, outs[o].z->buf, outs[o].x->bytes), "f64 %s layout %d: %s differs between 1 and 3 threads",
                  desc, layout, outs[o].n);
        }
        operands_free(&r), operands_free(&a), operands_free(&b);
    }
    nconv_context_destroy(ref);
    nconv_context_destroy(ctx);
}

/* With an argument K/N (as under valgrind, where one run is too long for one core), the tests
 * whose index in this list is K modulo N; else all of them. The order makes the three parts of
 * the valgrind build take about as long as each other (there the Winograd, bf16, split and
 * chunk tests are the long ones). */
int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {
        {"winograd_blocks", test_winograd_blocks},
        {"bf16_pairs", test_bf16_pairs},
        {"split", test_split},
        {"panel_major", test_panel_major},
        {"tap_classes", test_tap_classes},
        {"planes", test_planes},
        {"bw_chunks", test_bw_chunks},
        {"depthwise_blocks", test_depthwise_blocks},
        {"f64", test_f64},
        {"winograd_slices", test_winograd_slices},
        {"winograd", test_winograd},
        {"cols", test_cols},
        {"many_taps", test_many_taps},
        {"depthwise", test_depthwise},
        {"wide_channels", test_wide_channels},
        {"depthwise_planes", test_depthwise_planes},
        {"depthwise_flat", test_depthwise_flat},
        {"bias_lanes", test_bias_lanes},
        {"winograd_weights16", test_winograd_weights16},
        {"determinism", test_determinism},
        {"pointwise", test_pointwise},
        {"against_reference", test_against_reference},
        {"grouped", test_grouped},
        {"adjoint", test_adjoint},
        {"winograd_nonfinite", test_winograd_nonfinite},
        {"planes16_out", test_planes16_out},
        {"planes_stream", test_planes_stream},
        {"planes_span", test_planes_span},
        {"stem", test_stem},
        {"dot_products", test_dot_products},
    };
    const int n = (int)(sizeof tests / sizeof tests[0]);
    int part = 0, parts = 1;
    if (argc > 1 && (sscanf(argv[1], "%d/%d", &part, &parts) != 2 || parts < 1 || part < 0 || part >= parts)) {
        fprintf(stderr, "usage: %s [K/N]: the tests whose index is K modulo N (0 <= K < N)\n", argv[0]);
        return 2;
    }
    for (int i = part; i < n; i += parts) {
        const double t0 = test_seconds();
        tests[i].run();
        fprintf(stderr, "%-24s %8.2f s\n", tests[i].name, test_seconds() - t0);
    }
    return test_summary();
}
