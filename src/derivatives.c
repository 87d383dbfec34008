/*
 * Higher derivatives, composed from the public directions. Double backward
 * of y = conv(x, w) + b: the first backward (dx, dw, db) is linear in dy and
 * bilinear in (dy, x) and (dy, w), so with L = <dx, ggx> + <dw, ggw> + <db, ggb>
 *   ggy = conv(ggx, w) + conv(x, ggw) + ggb,  gx = bwd_d(dy, ggw),  gw = bwd_w(ggx, dy).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

/* t := bias broadcast over dim 1 (zeros when bias is NULL), for a tensor of
 * the problem's dtype and logical shape [a, b, spatial...]. */
static nconv_status fill(const nconv_problem *p, const nconv_tensor *t, const int64_t *shape,
                         const nconv_tensor *bias) {
    nconv_view v, bv;
    memset(&v, 0, sizeof v);
    memset(&bv, 0, sizeof bv);
    v.data = t->data, v.dt = p->dtype, v.rank = 5;
    v.shape[0] = shape[0], v.shape[1] = shape[1], v.stride[0] = t->stride[0], v.stride[1] = t->stride[1];
    v.shape[2] = v.shape[3] = v.shape[4] = 1;
    int64_t n = shape[0] * shape[1];
    for (int i = 0; i < p->ndims; i++) {
        v.shape[5 - p->ndims + i] = shape[2 + i], v.stride[5 - p->ndims + i] = t->stride[2 + i];
        n *= shape[2 + i];
    }
    double *zeros = calloc((size_t)(n ? n : 1), sizeof(double));
    if (!zeros) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a temporary of %lld elements", (long long)n);
    bv.data = bias ? bias->data : NULL, bv.dt = p->dtype, bv.rank = 1, bv.shape[0] = shape[1];
    bv.stride[0] = bias ? bias->stride[0] : 0;
    const nconv_epi e = {&bv, NULL, 1.0, 0};
    nconv__scatter(&v, zeros, 1, bias ? &e : NULL);
    free(zeros);
    return NCONV_OK;
}

nconv_status nconv_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_tensor *x,
                                   const nconv_tensor *w, const nconv_tensor *dy, const nconv_tensor *ggx,
                                   const nconv_tensor *ggw, const nconv_tensor *ggb, const nconv_tensor *ggy,
                                   const nconv_tensor *gx, const nconv_tensor *gw) {
    nconv__clear_error();
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    nconv_status st = nconv_problem_shapes(p, xs, ws, ys);
    if (st) return st;
    const int r = p->ndims + 2;
    struct { const char *name; const nconv_tensor *t; int needed; } in[] = {
        {"x", x, ggw != NULL && ggy != NULL}, {"w", w, ggx != NULL && ggy != NULL},
        {"dy", dy, (gx && ggw) || (gw && ggx)}};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        if (in[i].needed && (!in[i].t || !in[i].t->data))
            return INVALID("%s is NULL but required for the given gradients", in[i].name);
    const nconv_tensor *all[] = {ggx, ggw, ggb, ggy, gx, gw};
    static const char *const names[] = {"ggx", "ggw", "ggb", "ggy", "gx", "gw"};
    for (int i = 0; i < 6; i++)
        if (all[i] && !all[i]->data) return INVALID("%s->data is NULL", names[i]);
    int64_t ny = 1;
    for (int i = 0; i < r; i++) ny *= ys[i];

    /* Temporaries before any output is written: conv(x, ggw) when it has a partner. */
    void *tmp = NULL;
    nconv_tensor t;
    if (ggy && ggw && ggx) {
        tmp = malloc(nconv_dtype_size(p->dtype) * (size_t)(ny ? ny : 1));
        if (!tmp) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a temporary of %lld elements", (long long)ny);
        nconv_tensor_init(&t, tmp, r, ys, NCONV_LAYOUT_NCX);
    }
    if (ggy) {
        if (ggx && ggw) { /* ggy = conv(ggx, w) + ggb + conv(x, ggw) */
            const nconv_epilogue sum = {NCONV_ACT_IDENTITY, 1.0};
            if (!(st = nconv_forward(ctx, p, NULL, x, ggw, NULL, NULL, &t, NULL, 0)))
                st = nconv_forward(ctx, p, &sum, ggx, w, ggb, &t, ggy, NULL, 0);
        } else if (ggx) {
            st = nconv_forward(ctx, p, NULL, ggx, w, ggb, NULL, ggy, NULL, 0);
        } else if (ggw) {
            st = nconv_forward(ctx, p, NULL, x, ggw, ggb, NULL, ggy, NULL, 0);
        } else {
            st = fill(p, ggy, ys, ggb); /* the bias alone, or zeros */
        }
    }
    free(tmp);
    if (st) return st;
    if (gx) {
        if (ggw) st = nconv_backward(ctx, p, NULL, NULL, ggw, NULL, dy, gx, NULL, NULL, NULL, NULL, 0);
        else st = fill(p, gx, xs, NULL);
    }
    if (gw && !st) {
        if (ggx) st = nconv_backward(ctx, p, NULL, ggx, NULL, NULL, dy, NULL, gw, NULL, NULL, NULL, 0);
        else st = fill(p, gw, ws, NULL);
    }
    return st;
}
