/*
 * Double backward and forward-mode derivatives on a CUDA context, composed of
 * the CUDA forward and backward calls and elementwise graphs as on the CPU
 * (derivatives.c), with device temporaries the size of y.
 */
#include "cuda_internal.h"

#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

/* A dense device temporary of shape `shape` (rank r) in out's layout. */
static nconv_status temp_like(nconv_context *ctx, const nconv_problem *p, const int64_t *shape, const nconv_tensor *out,
                              nconv_tensor *t, void **mem) {
    const int r = p->ndims + 2;
    int64_t n = 1;
    for (int i = 0; i < r; i++) n *= shape[i]; /* validated shapes do not overflow */
    if (!(*mem = nconv__cuda_temp(ctx, (size_t)n * nconv_dtype_size(p->dtype)))) return NCONV_OUT_OF_MEMORY;
    const int nxc = out->stride[1] == 1 && shape[1] > 1;
    return nconv_tensor_init(t, *mem, r, shape, nxc ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX);
}

nconv_status nconv__cuda_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_tensor *x,
                                         const nconv_tensor *w, const nconv_tensor *dy, const nconv_tensor *ggx,
                                         const nconv_tensor *ggw, const nconv_tensor *ggb, const nconv_tensor *ggy,
                                         const nconv_tensor *gx, const nconv_tensor *gw) {
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    nconv_status st = nconv_problem_shapes(p, xs, ws, ys);
    if (st) return st;
    const int r = p->ndims + 2;
    const int64_t oc = p->out_channels;
    const nconv_operand_check chk[] = {
        {"x", x, r, xs, 0, 0, 0},      {"w", w, r, ws, 0, 0, 0},     {"dy", dy, r, ys, 0, 0, 0},
        {"ggx", ggx, r, xs, 0, 0, 0},  {"ggw", ggw, r, ws, 0, 0, 0}, {"ggb", ggb, 1, &oc, 0, 0, 0},
        {"ggy", ggy, r, ys, 0, 0, 1},  {"gx", gx, r, xs, 0, 0, 1},   {"gw", gw, r, ws, 0, 0, 1}};
    if ((st = nconv__check_operands(p->dtype, chk, 9))) return st;
    if ((ggw && ggy && !x) || (ggx && ggy && !w) || (((gx && ggw) || (gw && ggx)) && !dy))
        return INVALID("%s is NULL but required for the given gradients",
                       ggw && ggy && !x ? "x" : ggx && ggy && !w ? "w" : "dy");
    if (ggy) { /* ggy = conv(ggx, w) + conv(x, ggw) + ggb */
        const nconv_epilogue with_t = {NCONV_ACT_IDENTITY, 1.0};
        if (ggx && ggw) {
            nconv_tensor t;
            void *mem;
            if ((st = temp_like(ctx, p, ys, ggy, &t, &mem))) return st;
            if (!(st = nconv_forward(ctx, p, NULL, x, ggw, NULL, NULL, &t, NULL, 0)))
                st = nconv_forward(ctx, p, &with_t, ggx, w, ggb, &t, ggy, NULL, 0);
            nconv__cuda_temp_free(ctx, mem);
        } else if (ggx || ggw) {
            st = nconv_forward(ctx, p, NULL, ggx ? ggx : x, ggx ? w : ggw, ggb, NULL, ggy, NULL, 0);
        } else {
            st = nconv__cuda_pointwise(ctx, p, ys, NULL, NULL, ggb, NULL, 1.0, ggy);
        }
    }
    if (!st && gx) /* gx = backward-data of (dy, ggw) */
        st = ggw ? nconv_backward(ctx, p, NULL, NULL, ggw, NULL, dy, gx, NULL, NULL, NULL, NULL, 0)
                 : nconv__cuda_pointwise(ctx, p, xs, NULL, NULL, NULL, NULL, 1.0, gx);
    if (!st && gw) /* gw = backward-weights of (ggx, dy) */
        st = ggx ? nconv_backward(ctx, p, NULL, ggx, NULL, NULL, dy, NULL, gw, NULL, NULL, NULL, 0)
                 : nconv__cuda_pointwise(ctx, p, ws, NULL, NULL, NULL, NULL, 1.0, gw);
    return st;
}

/* ty = act'(pre) * (conv(tx, w) + conv(x, tw) + tb + alpha * tz): the tangent sum goes to ty,
 * or with relu to a temporary that relu's mask (y > 0) then writes to ty. */
nconv_status nconv__cuda_forward_jvp(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                     const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                                     const nconv_tensor *z, const nconv_tensor *tx, const nconv_tensor *tw,
                                     const nconv_tensor *tb, const nconv_tensor *tz, const nconv_tensor *y,
                                     const nconv_tensor *ty) {
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    nconv_problem_shapes(p, xs, ws, ys);
    const int relu = epi && epi->activation == NCONV_ACT_RELU;
    const nconv_epilogue te = {NCONV_ACT_IDENTITY, epi ? epi->alpha : 1.0}, one = {NCONV_ACT_IDENTITY, 1.0};
    nconv_tensor t, sum;
    void *mem_t = NULL, *mem_sum = NULL;
    nconv_status st = NCONV_OK;
    if (tx && tw) st = temp_like(ctx, p, ys, ty, &t, &mem_t);
    if (!st && relu) st = temp_like(ctx, p, ys, ty, &sum, &mem_sum);
    const nconv_tensor *out = relu ? &sum : ty;
    if (!st) {
        if (tx && tw) {
            if (!(st = nconv_forward(ctx, p, &te, x, tw, NULL, tz, &t, NULL, 0)))
                st = nconv_forward(ctx, p, &one, tx, w, tb, &t, out, NULL, 0);
        } else if (tx || tw) {
            st = nconv_forward(ctx, p, &te, tx ? tx : x, tx ? w : tw, tb, tz, out, NULL, 0);
        } else {
            st = nconv__cuda_pointwise(ctx, p, ys, NULL, NULL, tb, tz, te.alpha, out);
        }
    }
    if (!st) st = nconv_forward(ctx, p, epi, x, w, bias, z, y, NULL, 0);
    if (!st && relu) st = nconv__cuda_pointwise(ctx, p, ys, &sum, y, NULL, NULL, 1.0, ty);
    nconv__cuda_temp_free(ctx, mem_t);
    nconv__cuda_temp_free(ctx, mem_sum);
    return st;
}
