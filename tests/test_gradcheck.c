/*
 * Reference gradients against central finite differences in f64, for every
 * direction and feature: L = <act(conv(x, w) + b + alpha * z), r>, and
 * dL/dx, dL/dw, dL/db, dL/dz from nconv_backward with dy = r, checked at
 * random elements: |fd - analytic| <= 1e-6 * (1 + |analytic|).
 */
#include "test_util.h"

typedef struct buf {
    double *v;
    int64_t n;
    nconv_tensor t;
} buf;

static void make(buf *b, int rank, const int64_t *shape, uint64_t *rng, int fill) {
    b->n = 1;
    for (int i = 0; i < rank; i++) b->n *= shape[i];
    b->v = calloc((size_t)(b->n ? b->n : 1), sizeof(double));
    for (int64_t i = 0; fill && i < b->n; i++) b->v[i] = test_uniform(rng);
    nconv_tensor_init(&b->t, b->v, rank, shape, NCONV_LAYOUT_NCX);
}

typedef struct setup {
    nconv_problem p;
    nconv_epilogue epi;
    buf x, w, b, z, r, y, dx, dw, db, dz;
} setup;

static double loss(nconv_context *ctx, setup *s) {
    nconv_forward(ctx, &s->p, &s->epi, &s->x.t, &s->w.t, &s->b.t, &s->z.t, &s->y.t, NULL, 0);
    double l = 0;
    for (int64_t i = 0; i < s->y.n; i++) l += s->y.v[i] * s->r.v[i];
    return l;
}

static void check_grad(nconv_context *ctx, setup *s, buf *param, const buf *grad, const char *name, uint64_t *rng,
                       const char *desc) {
    const double h = 1e-6;
    for (int k = 0; k < 6 && param->n > 0; k++) {
        int64_t i = test_int(rng, 0, param->n - 1);
        double keep = param->v[i];
        param->v[i] = keep + h;
        double lp = loss(ctx, s);
        param->v[i] = keep - h;
        double lm = loss(ctx, s);
        param->v[i] = keep;
        double fd = (lp - lm) / (2 * h), an = grad->v[i];
        CHECK(fabs(fd - an) <= 1e-6 * (1 + fabs(an)), "d%s[%lld]: fd %.10g, analytic %.10g on %s", name, (long long)i,
              fd, an, desc);
    }
}

static void one(nconv_context *ctx, const nconv_problem *p, nconv_activation act, double alpha, uint64_t *rng) {
    setup s;
    memset(&s, 0, sizeof s);
    s.p = *p;
    s.epi.activation = act;
    s.epi.alpha = alpha;
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    int r = p->ndims + 2;
    make(&s.x, r, xs, rng, 1), make(&s.w, r, ws, rng, 1), make(&s.b, 1, &oc, rng, 1);
    make(&s.z, r, ys, rng, 1), make(&s.r, r, ys, rng, 1), make(&s.y, r, ys, rng, 0);
    make(&s.dx, r, xs, rng, 0), make(&s.dw, r, ws, rng, 0), make(&s.db, 1, &oc, rng, 0), make(&s.dz, r, ys, rng, 0);
    loss(ctx, &s);
    nconv_status st = nconv_backward(ctx, p, &s.epi, &s.x.t, &s.w.t, &s.y.t, &s.r.t, &s.dx.t, &s.dw.t, &s.db.t,
                                     &s.dz.t, NULL, 0);
    char desc[512] = "";
    nconv_problem_to_desc(p, desc, sizeof desc);
    CHECK(st == NCONV_OK, "%s", nconv_last_error());
    check_grad(ctx, &s, &s.x, &s.dx, "x", rng, desc);
    check_grad(ctx, &s, &s.w, &s.dw, "w", rng, desc);
    check_grad(ctx, &s, &s.b, &s.db, "b", rng, desc);
    check_grad(ctx, &s, &s.z, &s.dz, "z", rng, desc);
    buf *all[] = {&s.x, &s.w, &s.b, &s.z, &s.r, &s.y, &s.dx, &s.dw, &s.db, &s.dz};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->v);
}

int main(void) {
    nconv_context *ctx;
    nconv_context_create(&ctx);
    nconv_context_set_algorithm(ctx, "ref");
    uint64_t rng = 2024;
    /* Each feature on its own, in 1D, 2D and 3D, then random mixes. */
    for (int nd = 1; nd <= 3; nd++) {
        for (int feature = 0; feature < 10; feature++) {
            nconv_problem p;
            nconv_problem_init(&p, nd);
            p.batch = 2, p.in_channels = 4, p.out_channels = 6, p.dtype = NCONV_F64;
            for (int i = 0; i < nd; i++) p.in_size[i] = 5, p.kernel[i] = 3;
            nconv_activation act = NCONV_ACT_IDENTITY;
            for (int i = 0; i < nd; i++) switch (feature) {
                case 1: p.stride[i] = 2, p.pad_begin[i] = 1; break;
                case 2: p.dilation[i] = 2, p.pad_begin[i] = 2, p.pad_end[i] = 1; break;
                case 3: p.groups = 2; break;
                case 4: p.padding_mode = NCONV_PAD_REFLECT, p.pad_begin[i] = 2, p.pad_end[i] = 1; break;
                case 5: p.padding_mode = NCONV_PAD_REPLICATE, p.pad_begin[i] = 1, p.pad_end[i] = 3; break;
                case 6: p.padding_mode = NCONV_PAD_CIRCULAR, p.pad_begin[i] = 2, p.pad_end[i] = 2; break;
                case 7: p.transposed = 1, p.stride[i] = 2, p.pad_begin[i] = 1, p.pad_end[i] = 0,
                        p.output_padding[i] = 1; break;
                case 8: p.pad_end[i] = -1, p.stride[i] = 2; break;
                case 9: act = NCONV_ACT_RELU, p.pad_begin[i] = 1, p.pad_end[i] = 1; break;
                default: break;
                }
            if (feature == 7) p.groups = 2;
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "feature %d: %s", feature, nconv_last_error());
            one(ctx, &p, act, feature % 2 ? -0.5 : 1.5, &rng);
        }
    }
    nconv_context_destroy(ctx);
    return test_summary();
}
