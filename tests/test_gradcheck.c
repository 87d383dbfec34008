/*
 * Reference gradients against central finite differences in f64, for every
 * direction and feature: L = <act(conv(x, w) + b + alpha * z), r>, and
 * dL/dx, dL/dw, dL/db, dL/dz from nconv_backward with dy = r, checked at
 * random elements: |fd - analytic| <= 1e-6 * (1 + |analytic|); the same for
 * batched operands (vmap rules) in every combination, for the double
 * backward's three outputs (batched: against the unbatched call per slice),
 * and for the forward-mode derivative (jvp) along every subset of tangents.
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

/* (L(v + h) - L(v - h)) / 2h for one element v of an operand of setup s. */
typedef double (*loss_fn)(nconv_context *ctx, void *s);
static double central_difference(loss_fn loss, nconv_context *ctx, void *s, double *v) {
    const double h = 1e-6, keep = *v;
    *v = keep + h;
    const double lp = loss(ctx, s);
    *v = keep - h;
    const double lm = loss(ctx, s);
    *v = keep;
    return (lp - lm) / (2 * h);
}

static double loss(nconv_context *ctx, void *arg) {
    setup *s = arg;
    nconv_forward(ctx, &s->p, &s->epi, &s->x.t, &s->w.t, &s->b.t, &s->z.t, &s->y.t, NULL, 0);
    double l = 0;
    for (int64_t i = 0; i < s->y.n; i++) l += s->y.v[i] * s->r.v[i];
    return l;
}

static void check_grad(nconv_context *ctx, setup *s, buf *param, const buf *grad, const char *name, uint64_t *rng,
                       const char *desc) {
    for (int k = 0; k < 6 && param->n > 0; k++) {
        const int64_t i = test_int(rng, 0, param->n - 1);
        const double fd = central_difference(loss, ctx, s, &param->v[i]), an = grad->v[i];
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

/* Batched operands (nconv_forward_batched / nconv_backward_batched): each of
 * x, w, b, z batched or shared, the batch dim outermost or second (strides),
 * L = sum_b <y[b], r[b]>; the gradient of a shared operand is the sum of its
 * per-b gradients. */
typedef struct bbuf {
    double *v;
    int64_t n, slice; /* elements in all, per b (0: shared operand, n == slice) */
    nconv_tensor t;
    int64_t bstride;
} bbuf;

static void bmake(bbuf *b, int rank, const int64_t *shape, int64_t B, int batched, int inner, uint64_t *rng) {
    b->slice = 1;
    for (int i = 0; i < rank; i++) b->slice *= shape[i];
    b->n = batched ? B * b->slice : b->slice;
    b->v = calloc((size_t)(b->n ? b->n : 1), sizeof(double));
    for (int64_t i = 0; rng && i < b->n; i++) b->v[i] = test_uniform(rng);
    nconv_tensor_init(&b->t, b->v, rank, shape, NCONV_LAYOUT_NCX);
    b->bstride = batched ? b->slice : 0;
    if (batched && inner && rank > 1) { /* memory [d0][B][rest]: the batch dim second */
        b->t.stride[0] *= B;
        b->bstride = b->slice / shape[0];
    }
}

typedef struct bsetup {
    nconv_problem p;
    nconv_epilogue epi;
    nconv_batch bt;
    bbuf x, w, b, z, r, y, dx, dw, db, dz;
} bsetup;

static double bloss(nconv_context *ctx, void *arg) {
    bsetup *s = arg;
    CHECK(nconv_forward_batched(ctx, &s->p, &s->epi, &s->bt, &s->x.t, &s->w.t, &s->b.t, &s->z.t, &s->y.t) ==
              NCONV_OK,
          "%s", nconv_last_error());
    double l = 0;
    for (int64_t i = 0; i < s->y.n; i++) l += s->y.v[i] * s->r.v[i];
    return l;
}

/* Element i of param (as stored) -> the same logical element's gradient,
 * summed over b when param is shared. Gradients are dense [B, slice]. */
static void bcheck(nconv_context *ctx, bsetup *s, bbuf *param, const bbuf *grad, int rank, const int64_t *shape,
                   const char *name, uint64_t *rng, int64_t B, const char *what) {
    for (int k = 0; k < 4; k++) {
        /* A random logical element (b, index): its memory offset and its gradient. */
        const int64_t b = param->bstride ? test_int(rng, 0, B - 1) : 0;
        int64_t rem = test_int(rng, 0, param->slice - 1), off = b * param->bstride, lin = rem;
        for (int d = rank - 1; d >= 0; d--) off += (rem % shape[d]) * param->t.stride[d], rem /= shape[d];
        double an = 0;
        for (int64_t bb = 0; bb < B; bb++)
            if (!param->bstride || bb == b) an += grad->v[bb * grad->slice + lin];
        const double fd = central_difference(bloss, ctx, s, &param->v[off]);
        CHECK(fabs(fd - an) <= 1e-6 * (1 + fabs(an)), "batched d%s: fd %.10g, analytic %.10g (%s)", name, fd, an, what);
    }
}

static void batched_one(nconv_context *ctx, const nconv_problem *p, int mask, uint64_t *rng) {
    const int64_t B = 3;
    bsetup s;
    memset(&s, 0, sizeof s);
    s.p = *p;
    s.epi.activation = mask & 32 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY;
    s.epi.alpha = 0.75;
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    const int r = p->ndims + 2, inner = (mask & 16) != 0;
    bmake(&s.x, r, xs, B, mask & 1, inner, rng), bmake(&s.w, r, ws, B, mask & 2, inner, rng);
    bmake(&s.b, 1, &oc, B, mask & 4, 0, rng), bmake(&s.z, r, ys, B, mask & 8, inner, rng);
    bmake(&s.r, r, ys, B, 1, 0, rng), bmake(&s.y, r, ys, B, 1, 0, NULL);
    bmake(&s.dx, r, xs, B, 1, 0, NULL), bmake(&s.dw, r, ws, B, 1, 0, NULL);
    bmake(&s.db, 1, &oc, B, 1, 0, NULL), bmake(&s.dz, r, ys, B, 1, 0, NULL);
    s.bt = (nconv_batch){B, s.x.bstride, s.w.bstride, s.b.bstride, s.z.bstride, s.y.bstride, s.r.bstride,
                         s.dx.bstride, s.dw.bstride, s.db.bstride, s.dz.bstride};
    bloss(ctx, &s);
    char what[600] = "", desc[512] = "";
    nconv_problem_to_desc(p, desc, sizeof desc);
    snprintf(what, sizeof what, "batched x %d w %d b %d z %d, bdim %d, relu %d: %s", mask & 1, (mask >> 1) & 1,
             (mask >> 2) & 1, (mask >> 3) & 1, inner, (mask >> 5) & 1, desc);
    CHECK(nconv_backward_batched(ctx, p, &s.epi, &s.bt, &s.x.t, &s.w.t, &s.y.t, &s.r.t, &s.dx.t, &s.dw.t, &s.db.t,
                                 &s.dz.t) == NCONV_OK,
          "%s: %s", what, nconv_last_error());
    bcheck(ctx, &s, &s.x, &s.dx, r, xs, "x", rng, B, what);
    bcheck(ctx, &s, &s.w, &s.dw, r, ws, "w", rng, B, what);
    bcheck(ctx, &s, &s.b, &s.db, 1, &oc, "b", rng, B, what);
    bcheck(ctx, &s, &s.z, &s.dz, r, ys, "z", rng, B, what);
    bbuf *all[] = {&s.x, &s.w, &s.b, &s.z, &s.r, &s.y, &s.dx, &s.dw, &s.db, &s.dz};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->v);
}

/* Double backward: L2 = <dx, ggx> + <dw, ggw> + <db, ggb> with (dx, dw, db) =
 * nconv_backward(x, w, dy); ggy, gx, gw from nconv_double_backward are its
 * gradients with respect to dy, x and w. */
typedef struct dsetup {
    nconv_problem p;
    buf x, w, dy, ggx, ggw, ggb, dx, dw, db, ggy, gx, gw;
} dsetup;

static double dloss(nconv_context *ctx, void *arg) {
    dsetup *s = arg;
    nconv_backward(ctx, &s->p, NULL, &s->x.t, &s->w.t, NULL, &s->dy.t, &s->dx.t, &s->dw.t, &s->db.t, NULL, NULL, 0);
    double l = 0;
    for (int64_t i = 0; i < s->dx.n; i++) l += s->dx.v[i] * s->ggx.v[i];
    for (int64_t i = 0; i < s->dw.n; i++) l += s->dw.v[i] * s->ggw.v[i];
    for (int64_t i = 0; i < s->db.n; i++) l += s->db.v[i] * s->ggb.v[i];
    return l;
}

static void dcheck(nconv_context *ctx, dsetup *s, buf *param, const buf *grad, const char *name, uint64_t *rng,
                   const char *desc) {
    for (int k = 0; k < 5 && param->n > 0; k++) {
        const int64_t i = test_int(rng, 0, param->n - 1);
        const double fd = central_difference(dloss, ctx, s, &param->v[i]), an = grad->v[i];
        CHECK(fabs(fd - an) <= 1e-6 * (1 + fabs(an)), "double backward %s[%lld]: fd %.10g, analytic %.10g on %s", name,
              (long long)i, fd, an, desc);
    }
}

static void double_one(nconv_context *ctx, const nconv_problem *p, uint64_t *rng) {
    dsetup s;
    memset(&s, 0, sizeof s);
    s.p = *p;
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    const int r = p->ndims + 2;
    make(&s.x, r, xs, rng, 1), make(&s.w, r, ws, rng, 1), make(&s.dy, r, ys, rng, 1);
    make(&s.ggx, r, xs, rng, 1), make(&s.ggw, r, ws, rng, 1), make(&s.ggb, 1, &oc, rng, 1);
    make(&s.dx, r, xs, rng, 0), make(&s.dw, r, ws, rng, 0), make(&s.db, 1, &oc, rng, 0);
    make(&s.ggy, r, ys, rng, 0), make(&s.gx, r, xs, rng, 0), make(&s.gw, r, ws, rng, 0);
    char desc[512] = "";
    nconv_problem_to_desc(p, desc, sizeof desc);
    CHECK(nconv_double_backward(ctx, p, &s.x.t, &s.w.t, &s.dy.t, &s.ggx.t, &s.ggw.t, &s.ggb.t, &s.ggy.t, &s.gx.t,
                                &s.gw.t) == NCONV_OK,
          "%s: %s", desc, nconv_last_error());
    dcheck(ctx, &s, &s.dy, &s.ggy, "ggy", rng, desc);
    dcheck(ctx, &s, &s.x, &s.gx, "gx", rng, desc);
    dcheck(ctx, &s, &s.w, &s.gw, "gw", rng, desc);
    buf *all[] = {&s.x, &s.w, &s.dy, &s.ggx, &s.ggw, &s.ggb, &s.dx, &s.dw, &s.db, &s.ggy, &s.gx, &s.gw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->v);
}

/* nconv_forward_jvp against central differences along the tangents: with the operands in
 * mask (bit 0 x, 1 w, 2 b, 3 z) moved by h times their tangents, (y(+h) - y(-h)) / 2h at every
 * element of ty; y itself bit for bit nconv_forward's. */
static void jvp_one(nconv_context *ctx, const nconv_problem *p, nconv_activation act, double alpha, int mask,
                    uint64_t *rng) {
    const nconv_epilogue epi = {act, alpha};
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    const int r = p->ndims + 2;
    buf x, w, b, z, t[4], y, ty, yp, ym, y0;
    make(&x, r, xs, rng, 1), make(&w, r, ws, rng, 1), make(&b, 1, &oc, rng, 1), make(&z, r, ys, rng, 1);
    make(&t[0], r, xs, rng, 1), make(&t[1], r, ws, rng, 1), make(&t[2], 1, &oc, rng, 1), make(&t[3], r, ys, rng, 1);
    make(&y, r, ys, rng, 0), make(&ty, r, ys, rng, 0), make(&yp, r, ys, rng, 0), make(&ym, r, ys, rng, 0);
    make(&y0, r, ys, rng, 0);
    const nconv_tensor *tan[4];
    for (int k = 0; k < 4; k++) tan[k] = mask >> k & 1 ? &t[k].t : NULL;
    char desc[512] = "";
    nconv_problem_to_desc(p, desc, sizeof desc);
    CHECK(nconv_forward_jvp(ctx, p, &epi, &x.t, &w.t, &b.t, &z.t, tan[0], tan[1], tan[2], tan[3], &y.t, &ty.t) ==
              NCONV_OK,
          "jvp on %s: %s", desc, nconv_last_error());
    nconv_forward(ctx, p, &epi, &x.t, &w.t, &b.t, &z.t, &y0.t, NULL, 0);
    CHECK(!memcmp(y.v, y0.v, sizeof(double) * (size_t)y.n), "jvp's y differs from nconv_forward's on %s", desc);
    buf *prim[4] = {&x, &w, &b, &z};
    const double h = 1e-6;
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int k = 0; k < 4; k++)
            for (int64_t i = 0; tan[k] && i < prim[k]->n; i++) prim[k]->v[i] += sign * h * t[k].v[i];
        nconv_forward(ctx, p, &epi, &x.t, &w.t, &b.t, &z.t, sign > 0 ? &yp.t : &ym.t, NULL, 0);
        for (int k = 0; k < 4; k++)
            for (int64_t i = 0; tan[k] && i < prim[k]->n; i++) prim[k]->v[i] -= sign * h * t[k].v[i];
    }
    int64_t bad = -1;
    for (int64_t i = 0; i < ty.n && bad < 0; i++) {
        const double fd = (yp.v[i] - ym.v[i]) / (2 * h);
        if (!(fabs(fd - ty.v[i]) <= 1e-6 * (1 + fabs(ty.v[i])))) bad = i;
    }
    CHECK(bad < 0, "jvp (tangents %d, relu %d) ty[%lld]: fd %.10g, analytic %.10g on %s", mask,
          act == NCONV_ACT_RELU, (long long)bad, bad < 0 ? 0 : (yp.v[bad] - ym.v[bad]) / (2 * h), bad < 0 ? 0 : ty.v[bad],
          desc);
    buf *all[] = {&x, &w, &b, &z, &t[0], &t[1], &t[2], &t[3], &y, &ty, &yp, &ym, &y0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->v);
}

/* Slice b of a batched output against the unbatched call's: the largest difference, relative
 * to the largest magnitude of one (1 when it is all zeros). */
static double slice_err(const bbuf *out, const bbuf *one, int64_t b) {
    double md = 0, mr = 0;
    for (int64_t e = 0; e < one->n; e++) {
        const double d = fabs(out->v[b * out->slice + e] - one->v[e]);
        if (!(d <= md) && !isnan(md)) md = d; /* the first NaN sticks */
        if (fabs(one->v[e]) > mr) mr = fabs(one->v[e]);
    }
    return md / (mr > 0 ? mr : 1);
}

/* nconv_double_backward_batched against nconv_double_backward slice by slice (itself checked
 * against finite differences above): x, w, dy, ggx, ggw, ggb each batched (bit k of mask) or
 * shared, the batch dim outermost or second (bit 6), within 1e-12. */
static void double_batched_one(nconv_context *ctx, const nconv_problem *p, int mask, uint64_t *rng) {
    const int64_t B = 3;
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    const int r = p->ndims + 2, inner = (mask & 64) != 0;
    bbuf in[6], out[3], one[3];
    const int64_t *shape[6] = {xs, ws, ys, xs, ws, &oc}, *oshape[3] = {ys, xs, ws};
    const int rank[6] = {r, r, r, r, r, 1}, orank[3] = {r, r, r};
    for (int i = 0; i < 6; i++) bmake(&in[i], rank[i], shape[i], B, mask >> i & 1, inner && i != 5, rng);
    for (int i = 0; i < 3; i++) bmake(&out[i], orank[i], oshape[i], B, 1, 0, NULL);
    for (int i = 0; i < 3; i++) bmake(&one[i], orank[i], oshape[i], 1, 0, 0, NULL);
    const nconv_double_batch bt = {B, in[0].bstride, in[1].bstride, in[2].bstride, in[3].bstride, in[4].bstride,
                                   in[5].bstride, out[0].bstride, out[1].bstride, out[2].bstride};
    char desc[512] = "";
    nconv_problem_to_desc(p, desc, sizeof desc);
    CHECK(nconv_double_backward_batched(ctx, p, &bt, &in[0].t, &in[1].t, &in[2].t, &in[3].t, &in[4].t, &in[5].t,
                                        &out[0].t, &out[1].t, &out[2].t) == NCONV_OK,
          "batched double backward (mask %d) on %s: %s", mask, desc, nconv_last_error());
    static const char *const names[3] = {"ggy", "gx", "gw"};
    for (int64_t b = 0; b < B; b++) {
        nconv_tensor sl[6];
        for (int i = 0; i < 6; i++) sl[i] = in[i].t, sl[i].data = in[i].v + b * in[i].bstride;
        CHECK(nconv_double_backward(ctx, p, &sl[0], &sl[1], &sl[2], &sl[3], &sl[4], &sl[5], &one[0].t, &one[1].t,
                                    &one[2].t) == NCONV_OK,
              "%s", nconv_last_error());
        for (int i = 0; i < 3; i++) {
            const double e = slice_err(&out[i], &one[i], b);
            CHECK(e <= 1e-12, "batched double backward %s[b = %lld] (mask %d): err %g on %s", names[i], (long long)b,
                  mask, e, desc);
        }
    }
    for (int i = 0; i < 6; i++) free(in[i].v);
    for (int i = 0; i < 3; i++) free(out[i].v), free(one[i].v);
}

/* nconv_forward_jvp_batched against nconv_forward_jvp slice by slice (itself checked against
 * finite differences above): x, w, bias, z each batched (bit k of mask) or shared, each tangent
 * given (bit 4 + k) and batched where its primal is or on its own (bit 8), the batch dim
 * outermost or second (bit 9), relu or not (bit 10), within 1e-12. */
static void jvp_batched_one(nconv_context *ctx, const nconv_problem *p, int mask, uint64_t *rng) {
    const int64_t B = 3;
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    nconv_problem_shapes(p, xs, ws, ys);
    const int r = p->ndims + 2, inner = (mask & 512) != 0;
    const nconv_epilogue epi = {mask & 1024 ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, -0.75};
    bbuf in[8], out[2], one[2];
    const int64_t *shape[4] = {xs, ws, &oc, ys};
    for (int i = 0; i < 8; i++) {
        const int k = i % 4, batched = i < 4 ? mask >> k & 1 : mask & 256 ? !(mask >> k & 1) : mask >> k & 1;
        bmake(&in[i], k == 2 ? 1 : r, shape[k], B, batched, inner && k != 2, rng);
    }
    for (int i = 0; i < 2; i++) bmake(&out[i], r, ys, B, 1, 0, NULL), bmake(&one[i], r, ys, 1, 0, 0, NULL);
    const nconv_tensor *tan[4];
    for (int k = 0; k < 4; k++) tan[k] = mask >> (4 + k) & 1 ? &in[4 + k].t : NULL;
    const nconv_jvp_batch bt = {B,
                                in[0].bstride,
                                in[1].bstride,
                                in[2].bstride,
                                in[3].bstride,
                                tan[0] ? in[4].bstride : 0,
                                tan[1] ? in[5].bstride : 0,
                                tan[2] ? in[6].bstride : 0,
                                tan[3] ? in[7].bstride : 0,
                                out[0].bstride,
                                out[1].bstride};
    char desc[512] = "";
    nconv_problem_to_desc(p, desc, sizeof desc);
    CHECK(nconv_forward_jvp_batched(ctx, p, &epi, &bt, &in[0].t, &in[1].t, &in[2].t, &in[3].t, tan[0], tan[1],
                                    tan[2], tan[3], &out[0].t, &out[1].t) == NCONV_OK,
          "batched jvp (mask %d) on %s: %s", mask, desc, nconv_last_error());
    static const char *const names[2] = {"y", "ty"};
    for (int64_t b = 0; b < B; b++) {
        nconv_tensor sl[8];
        for (int i = 0; i < 8; i++) sl[i] = in[i].t, sl[i].data = in[i].v + b * in[i].bstride;
        CHECK(nconv_forward_jvp(ctx, p, &epi, &sl[0], &sl[1], &sl[2], &sl[3], tan[0] ? &sl[4] : NULL,
                                tan[1] ? &sl[5] : NULL, tan[2] ? &sl[6] : NULL, tan[3] ? &sl[7] : NULL, &one[0].t,
                                &one[1].t) == NCONV_OK,
              "%s", nconv_last_error());
        for (int i = 0; i < 2; i++) {
            const double e = slice_err(&out[i], &one[i], b);
            CHECK(e <= 1e-12, "batched jvp %s[b = %lld] (mask %d): err %g on %s", names[i], (long long)b, mask, e,
                  desc);
        }
    }
    for (int i = 0; i < 8; i++) free(in[i].v);
    for (int i = 0; i < 2; i++) free(out[i].v), free(one[i].v);
}

int main(void) {
    nconv_context *ctx;
    nconv_context_create(&ctx);
    nconv_context_set_algorithm(ctx, "ref");
    nconv_context *dflt; /* the heuristic's algorithms */
    nconv_context_create(&dflt);
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
            /* forward-mode: every tangent, then one subset per feature (the ninth: none) */
            jvp_one(dflt, &p, act, feature % 2 ? -0.5 : 1.5, 15, &rng);
            jvp_one(dflt, &p, act, feature % 2 ? -0.5 : 1.5, feature == 9 ? 0 : 1 + (feature + nd) % 14, &rng);
        }
    }
    /* Batched: every combination of batched operands, both bdim positions,
     * groups 1 and 2, transposed or not, 1-3D. */
    for (int mask = 0; mask < 64; mask++)
        for (int variant = 0; variant < 4; variant++) {
            nconv_problem p;
            const int nd = 1 + (mask + variant) % 3;
            nconv_problem_init(&p, nd);
            p.batch = 2, p.in_channels = 4, p.out_channels = 2, p.dtype = NCONV_F64;
            p.groups = 1 + variant % 2;
            p.transposed = variant / 2;
            for (int i = 0; i < nd; i++) {
                p.in_size[i] = 4, p.kernel[i] = 2, p.stride[i] = 1 + i % 2, p.pad_begin[i] = 1;
                if (p.transposed) p.output_padding[i] = i % 2;
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "%s", nconv_last_error());
            batched_one(dflt, &p, mask, &rng);
        }
    /* Double backward, 1-3D, groups, transposed. */
    for (int nd = 1; nd <= 3; nd++)
        for (int variant = 0; variant < 4; variant++) {
            nconv_problem p;
            nconv_problem_init(&p, nd);
            p.batch = 2, p.in_channels = 4, p.out_channels = 6, p.dtype = NCONV_F64;
            p.groups = 1 + variant % 2;
            p.transposed = variant / 2;
            for (int i = 0; i < nd; i++) {
                p.in_size[i] = 4, p.kernel[i] = 3, p.stride[i] = 2, p.pad_begin[i] = 1, p.dilation[i] = 1 + i % 2;
                if (p.transposed) p.output_padding[i] = 1;
            }
            CHECK(nconv_problem_validate(&p) == NCONV_OK, "%s", nconv_last_error());
            double_one(dflt, &p, &rng);
            for (int mask = variant; mask < 128; mask += 9) double_batched_one(dflt, &p, mask, &rng);
            /* Forward mode under vmap: the batch folded into N (w, bias and their tangents
             * shared: masks with bits 1, 2, 5, 6 and 8 clear) and into the groups. */
            for (int mask = variant; mask < 2048; mask += 37) jvp_batched_one(dflt, &p, mask, &rng);
            jvp_batched_one(dflt, &p, 1 | 8 | 16 | 128, &rng);
            jvp_batched_one(dflt, &p, 1 | 16 | 32 | 64 | 1024, &rng);
        }
    nconv_context_destroy(dflt);
    nconv_context_destroy(ctx);
    return test_summary();
}
