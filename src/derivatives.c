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

nconv_status nconv__double_run(const nconv_plan *pl, const nconv_variant_pack *vp) {
    const nconv_problem *p = &pl->p;
    nconv_context *ctx = pl->ctx;
    const nconv_tensor *x = vp->x, *dy = vp->dy, *ggx = vp->ggx, *ggw = vp->ggw, *ggb = vp->ggb;
    const nconv_tensor *ggy = vp->ggy, *gx = vp->gx, *gw = vp->gw;
    const nconv_tensor *w = vp->w ? vp->w : pl->has_w ? &pl->w : NULL;
    const void *packed = vp->w ? NULL : pl->packed[p->transposed ? NCONV_DIR_BWD_D : NCONV_DIR_FWD];
    const unsigned given = (ggy ? NCONV_OUT_GGY : 0u) | (gx ? NCONV_OUT_GX : 0u) | (gw ? NCONV_OUT_GW : 0u);
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    nconv_status st = nconv__check_outputs(given, pl->desc.outputs);
    if (st || (st = nconv_problem_shapes(p, xs, ws, ys))) return st;
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
    if (!given) return NCONV_OK;

    /* The operands of each call, checked before any output is written. ggy = conv(ggx, w) +
     * ggb + conv(x, ggw): with both terms the second goes to a temporary t like y first, and
     * the first adds it as its z (ggy stands in for t until it has memory). */
    const nconv_oplan *f = &pl->f;
    const int two_terms = ggy && ggw && ggx;
    nconv_fwd_ops f1, f2; /* conv(x, ggw), conv(ggx, w) */
    nconv_bwd_ops b1, b2; /* gx, gw */
    if ((ggy && ggw &&
         ((st = nconv__fwd_ops(f, x, ggw, ggx ? NULL : ggb, NULL, ggy, &f1)) || (st = nconv__fwd_check_layout(f, &f1)))) ||
        (ggy && ggx &&
         ((st = nconv__fwd_ops(f, ggx, w, ggb, NULL, ggy, &f2)) || (st = nconv__fwd_check_layout(f, &f2)))) ||
        (gx && ggw && ((st = nconv__bwd_ops(&pl->b, NULL, ggw, NULL, dy, gx, NULL, NULL, NULL, &b1)) ||
                       (st = nconv__bwd_check_layout(&pl->b, &b1)))) ||
        (gw && ggx && ((st = nconv__bwd_ops(&pl->b, ggx, NULL, NULL, dy, NULL, gw, NULL, NULL, &b2)) ||
                       (st = nconv__bwd_check_layout(&pl->b, &b2)))))
        return st;

    /* All memory before any output is written: the temporary and one workspace that serves
     * every call below in turn. */
    char *wsp = vp->workspace;
    void *owned = NULL;
    if (wsp) {
        if (vp->workspace_size < pl->need)
            return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace_size = %zu: this call needs %zu bytes",
                                vp->workspace_size, pl->need);
    } else {
        if ((st = nconv__check_memory(ctx, pl->need, "the double backward"))) return st;
        if (!(wsp = owned = nconv__ctx_ws_acquire(ctx, pl->need)))
            return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of workspace", pl->need);
    }
    char *calls = wsp + pl->tmp;
    const size_t calls_size = (owned ? pl->need : vp->workspace_size) - pl->tmp;
    if (two_terms) {
        nconv_tensor t;
        nconv_tensor_init(&t, wsp, r, ys, pl->desc.layout == NCONV_LAYOUT_NXC ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX);
        if (!(st = nconv__fwd_ops(f, x, ggw, NULL, NULL, &t, &f1)) &&
            !(st = nconv__fwd_run(ctx, f, &f1, NULL, calls, calls_size)) &&
            !(st = nconv__fwd_ops(f, ggx, w, ggb, &t, ggy, &f2)))
            st = nconv__fwd_run(ctx, f, &f2, packed, calls, calls_size);
    } else if (ggy && ggx) {
        st = nconv__fwd_run(ctx, f, &f2, packed, calls, calls_size);
    } else if (ggy && ggw) {
        st = nconv__fwd_run(ctx, f, &f1, NULL, calls, calls_size);
    } else if (ggy) {
        fill(p, ggy, ys, ggb); /* the bias alone, or zeros */
    }
    if (gx && !st) {
        if (ggw) st = nconv__bwd_run(ctx, &pl->b, &b1, NULL, calls, calls_size);
        else fill(p, gx, xs, NULL);
    }
    if (gw && !st) {
        if (ggx) st = nconv__bwd_run(ctx, &pl->b, &b2, NULL, calls, calls_size);
        else fill(p, gw, ws, NULL);
    }
    nconv__ctx_ws_release(ctx, owned, pl->need);
    return st;
}
