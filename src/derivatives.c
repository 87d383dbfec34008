/*
 * Higher derivatives, composed from the public directions. Double backward
 * of y = conv(x, w) + b: the first backward (dx, dw, db) is linear in dy and
 * bilinear in (dy, x) and (dy, w), so with L = <dx, ggx> + <dw, ggw> + <db, ggb>
 *   ggy = conv(ggx, w) + conv(x, ggw) + ggb,  gx = bwd_d(dy, ggw),  gw = bwd_w(ggx, dy).
 */
#include "internal.h"

#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

/* t := bias broadcast over dim 1 (zeros when bias is NULL), for a tensor of
 * the problem's dtype and logical shape [a, b, spatial...]. */
static void fill(const nconv_problem *p, const nconv_tensor *t, const int64_t *shape, const nconv_tensor *bias) {
    nconv_view v, bv;
    nconv__make_view(p->ndims, p->dtype, t, 0, shape[0], shape[1], shape + 2, &v);
    if (bias) {
        memset(&bv, 0, sizeof bv);
        bv.data = bias->data, bv.dt = p->dtype, bv.rank = 1, bv.shape[0] = shape[1], bv.stride[0] = bias->stride[0];
    }
    nconv__fill(&v, bias ? &bv : NULL);
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
        if (in[i].needed && !in[i].t) return INVALID("%s is NULL but required for the given gradients", in[i].name);
    const int64_t oc = p->out_channels;
    const nconv_operand_check chk[] = {
        {"x", x, r, xs, 0, 0, 0},     {"w", w, r, ws, 0, 0, 0},     {"dy", dy, r, ys, 0, 0, 0},
        {"ggx", ggx, r, xs, 0, 0, 0}, {"ggw", ggw, r, ws, 0, 0, 0}, {"ggb", ggb, 1, &oc, 0, 0, 0},
        {"ggy", ggy, r, ys, 0, 0, 1}, {"gx", gx, r, xs, 0, 0, 1},   {"gw", gw, r, ws, 0, 0, 1}};
    if ((st = nconv__check_operands(p->dtype, chk, 9))) return st;
    int64_t ny = 1;
    for (int i = 0; i < r; i++) ny *= ys[i];

    /* All memory before any output is written: conv(x, ggw) when it has a
     * partner, and one workspace that serves every call below in turn, which
     * the calls' threads fit in with the temporary under the memory limit. */
    const int two_terms = ggy && ggw && ggx;
    const size_t tmp_size = two_terms ? nconv_dtype_size(p->dtype) * (size_t)ny : 0;
    const size_t room = nconv__ctx_room(ctx, tmp_size);
    size_t fwd_ws, bwd_ws;
    if ((st = nconv__workspace_within(ctx, p, NCONV_OP_FORWARD, NULL, room, &fwd_ws)) ||
        (st = nconv__workspace_within(ctx, p, NCONV_OP_BACKWARD, NULL, room, &bwd_ws)))
        return st;
    const size_t wsz = fwd_ws > bwd_ws ? fwd_ws : bwd_ws;
    if ((st = nconv__check_memory(ctx, wsz + tmp_size, "the double backward"))) return st;
    void *tmp = NULL, *wsp;
    if (tmp_size && !(tmp = nconv__alloc(ctx, tmp_size)))
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a temporary of %zu bytes", tmp_size);
    /* described even when empty (batch 0): the forward calls below check it */
    nconv_tensor t;
    nconv_tensor_init(&t, tmp, r, ys, NCONV_LAYOUT_NCX);
    if (!(wsp = nconv__ctx_ws_acquire(ctx, wsz))) {
        nconv__free(ctx, tmp);
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of workspace", wsz);
    }
    if (ggy) {
        if (two_terms) { /* ggy = conv(ggx, w) + ggb + conv(x, ggw) */
            const nconv_epilogue sum = {NCONV_ACT_IDENTITY, 1.0};
            if (!(st = nconv_forward(ctx, p, NULL, x, ggw, NULL, NULL, &t, wsp, wsz)))
                st = nconv_forward(ctx, p, &sum, ggx, w, ggb, &t, ggy, wsp, wsz);
        } else if (ggx) {
            st = nconv_forward(ctx, p, NULL, ggx, w, ggb, NULL, ggy, wsp, wsz);
        } else if (ggw) {
            st = nconv_forward(ctx, p, NULL, x, ggw, ggb, NULL, ggy, wsp, wsz);
        } else {
            fill(p, ggy, ys, ggb); /* the bias alone, or zeros */
        }
    }
    if (gx && !st) {
        if (ggw) st = nconv_backward(ctx, p, NULL, NULL, ggw, NULL, dy, gx, NULL, NULL, NULL, wsp, wsz);
        else fill(p, gx, xs, NULL);
    }
    if (gw && !st) {
        if (ggx) st = nconv_backward(ctx, p, NULL, ggx, NULL, NULL, dy, NULL, gw, NULL, NULL, wsp, wsz);
        else fill(p, gw, ws, NULL);
    }
    nconv__ctx_ws_release(ctx, wsp, wsz);
    nconv__free(ctx, tmp);
    return st;
}
