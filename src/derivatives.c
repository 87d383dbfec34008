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

/* ------------------------------------------------------------------- jvp */

/* The forward-mode derivative of y = act(conv(x, w) + bias + alpha * z), linear in each
 * operand: ty = act'(pre) * (conv(tx, w) + conv(x, tw) + tb + alpha * tz). Each term is a
 * forward call on the tangent in its operand's place; with both tx and tw the second term
 * goes to a temporary t like y, added as the first call's z. */
nconv_status nconv_forward_jvp(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                               const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                               const nconv_tensor *z, const nconv_tensor *tx, const nconv_tensor *tw,
                               const nconv_tensor *tb, const nconv_tensor *tz, const nconv_tensor *y,
                               const nconv_tensor *ty) {
    nconv__clear_error();
    if (p && nconv__is_complex(p->dtype)) {
        const nconv_status cuda_st = nconv__ctx_cpu_only(ctx, "a complex nconv_forward_jvp");
        if (cuda_st) return cuda_st;
        return nconv__complex_forward_jvp(ctx, p, epi, x, w, bias, z, tx, tw, tb, tz, y, ty);
    }
    nconv_oplan o;
    nconv_fwd_ops v;
    nconv_status st = nconv__oplan_prepare(&o, p, epi, 0, 0);
    if (st || (st = nconv__fwd_ops(&o, x, w, bias, z, y, &v))) return st;
    if (!ty) return INVALID("ty is NULL");
    if (tb && !bias) return INVALID("tb is given without bias: an absent bias has no tangent");
    if (tz && !z) return INVALID("tz is given without z: an absent z has no tangent");
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    nconv_problem_shapes(p, xs, ws, ys);
    const int r = p->ndims + 2;
    const int64_t oc = p->out_channels;
    const nconv_operand_check chk[] = {
        {"x", x, r, xs, 0, 0, 0},     {"w", w, r, ws, 0, 0, 0},   {"bias", bias, 1, &oc, 0, 0, 0},
        {"z", z, r, ys, 0, 0, 0},     {"tx", tx, r, xs, 0, 0, 0}, {"tw", tw, r, ws, 0, 0, 0},
        {"tb", tb, 1, &oc, 0, 0, 0},  {"tz", tz, r, ys, 0, 0, 0}, {"y", y, r, ys, 0, 0, 1},
        {"ty", ty, r, ys, 0, 0, 1}};
    if ((st = nconv__check_operands(p->dtype, chk, 10))) return st;
    if (nconv__ctx_cuda(ctx)) return nconv__cuda_forward_jvp(ctx, p, epi, x, w, bias, z, tx, tw, tb, tz, y, ty);

    /* All memory before any output is written: one workspace for every call in turn, and t. */
    const nconv_epilogue te = {NCONV_ACT_IDENTITY, epi ? epi->alpha : 1.0}, one = {NCONV_ACT_IDENTITY, 1.0};
    size_t need = 0, need_t = 0;
    const nconv_epilogue *epis[] = {epi, &te, &one};
    for (int i = 0; i < 3; i++) {
        size_t b = 0;
        if ((st = nconv_workspace_size(ctx, p, NCONV_OP_FORWARD, epis[i], &b))) return st;
        if (b > need) need = b;
    }
    if (tx && tw) {
        int64_t ny = 1;
        for (int i = 0; i < r; i++) ny *= ys[i]; /* validated shapes do not overflow */
        need_t = nconv__ws_round(nconv_dtype_size(p->dtype) * (size_t)ny);
    }
    if ((st = nconv__check_memory(ctx, need + need_t, "the forward jvp"))) return st;
    char *mem = need + need_t ? nconv__alloc(ctx, need + need_t) : NULL;
    if (need + need_t && !mem)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes for the forward jvp", need + need_t);
    void *wsp = mem ? mem + need_t : NULL;

    if (tx && tw) {
        nconv_tensor t;
        const int nxc = ty->stride[1] == 1 && oc > 1; /* t in ty's layout */
        nconv_tensor_init(&t, mem, r, ys, nxc ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX);
        if (!(st = nconv_forward(ctx, p, &te, x, tw, NULL, tz, &t, wsp, need)))
            st = nconv_forward(ctx, p, &one, tx, w, tb, &t, ty, wsp, need);
    } else if (tx || tw) {
        st = nconv_forward(ctx, p, &te, tx ? tx : x, tx ? w : tw, tb, tz, ty, wsp, need);
    } else {
        fill(p, ty, ys, tb);
        if (tz) {
            nconv_view vt, vz;
            nconv__make_view(p->ndims, p->dtype, ty, 0, ys[0], ys[1], ys + 2, &vt);
            nconv__make_view(p->ndims, p->dtype, tz, 0, ys[0], ys[1], ys + 2, &vz);
            nconv__add_scaled(&vt, &vz, te.alpha);
        }
    }
    if (!st) st = nconv_forward(ctx, p, epi, x, w, bias, z, y, wsp, need);
    if (!st && epi && epi->activation == NCONV_ACT_RELU) {
        nconv_view vt, vy;
        nconv__make_view(p->ndims, p->dtype, ty, 0, ys[0], ys[1], ys + 2, &vt);
        nconv__make_view(p->ndims, p->dtype, y, 0, ys[0], ys[1], ys + 2, &vy);
        nconv__relu_grad(&vt, &vt, &vy);
    }
    nconv__free(ctx, mem);
    return st;
}
