/*
 * A validated call as a short sequence of steps: cuDNN graphs for the convolutions, nconv's
 * own kernels (kernels/) for what surrounds them, and the temporaries between them.
 */
#include "cuda_internal.h"

#include <string.h>

static int64_t alignment(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    const uintptr_t low = a & (~a + 1);
    return !a || low >= 16 ? 16 : (int64_t)low;
}

/* The cuDNN tensor of a rank-5 view (1-d problems get a unit dim before their spatial dim;
 * 2-d ones drop the leading unit dim). crop shortens the spatial dims by the amounts
 * given (the convolution input's unread tail). */
static void from_view(const nconv_oplan *o, const nconv_view *v, int64_t uid, const int64_t *crop, nconv_gtensor *t) {
    const int nd = o->p.ndims;
    memset(t, 0, sizeof *t);
    t->uid = uid, t->dt = o->p.dtype, t->align = alignment(v->data);
    t->rank = nd == 3 ? 5 : 4;
    t->dims[0] = v->shape[0], t->strides[0] = v->stride[0];
    t->dims[1] = v->shape[1], t->strides[1] = v->stride[1];
    const int first = t->rank - nd; /* the first spatial dim of the user's problem */
    if (nd == 1) t->dims[2] = 1, t->strides[2] = v->shape[4] * v->stride[4];
    for (int i = 0; i < nd; i++) {
        t->dims[first + i] = v->shape[5 - nd + i] - (crop ? crop[i] : 0);
        t->strides[first + i] = v->stride[5 - nd + i];
    }
}

/* A channel vector (bias) as the [1, C, 1, ...] tensor cuDNN broadcasts. */
static void from_vector(const nconv_oplan *o, const nconv_view *v, int64_t uid, nconv_gtensor *t) {
    memset(t, 0, sizeof *t);
    t->uid = uid, t->dt = o->p.dtype, t->align = alignment(v->data);
    t->rank = o->p.ndims == 3 ? 5 : 4;
    for (int i = 0; i < t->rank; i++) t->dims[i] = 1, t->strides[i] = v->stride[0];
    t->dims[1] = v->shape[0], t->strides[0] = v->shape[0] * v->stride[0];
}

size_t nconv__cuda_dense_view(const nconv_view *v, nconv_view *t) {
    nconv__view_dense_like(t, NULL, v->dt, v);
    return (size_t)nconv__view_numel(t) * nconv_dtype_size(v->dt);
}

static step *add_step(call *k, nconv_gkind kind, const char *name) {
    step *s = &k->s[k->n++];
    memset(s, 0, sizeof *s);
    const nconv_oplan *o = k->o;
    s->g.kind = kind, s->name = name;
    s->g.spatial = o->p.ndims;
    s->g.compute = o->p.dtype == NCONV_F64 ? NCONV_F64 : NCONV_F32;
    s->g.alpha = 1.0;
    s->dt = o->p.dtype;
    return s;
}

/* The convolution's geometry; the direct convolution's input may not be padded by a
 * negative amount in cuDNN, so its unread tail is cut off instead (crop). */
static void geometry(const nconv_oplan *o, nconv_gspec *g, int64_t crop[3]) {
    const nconv_problem *p = &o->p;
    crop[0] = crop[1] = crop[2] = 0;
    for (int i = 0; i < p->ndims; i++) {
        g->stride[i] = p->stride[i], g->dil[i] = p->dilation[i];
        if (p->padding_mode != NCONV_PAD_ZEROS) continue; /* its input is padded already (pad_step) */
        g->pre[i] = p->pad_begin[i];
        /* The direct convolution's input is x, or a transposed problem's y, whose extra
         * output-padding rows no window reads. */
        const int64_t post = p->transposed ? p->pad_end[i] - p->output_padding[i] : p->pad_end[i];
        g->post[i] = post > 0 ? post : 0;
        crop[i] = post < 0 ? -post : 0;
    }
}

static int any_crop(const int64_t crop[3]) { return crop[0] || crop[1] || crop[2]; }

/* The convolution step of kind (cuDNN's roles) whose direct input is `in` (cropped; in_tmp:
 * its temporary, or IN_USER), weights w and direct output `out` (out_tmp likewise). Where
 * the written tensor is the cropped input (backward-data), the convolution writes a zeroed
 * dense temporary B of the whole input, and *whole receives its view (else its data stays
 * the caller's): the caller copies it out. */
static step *conv_step(call *k, nconv_gkind kind, const nconv_view *in, int in_tmp, const nconv_view *w,
                       const nconv_view *out, int out_tmp, const char *name, nconv_view *whole) {
    const nconv_oplan *o = k->o;
    step *s = add_step(k, kind, name);
    int64_t crop[3];
    geometry(o, &s->g, crop);
    from_view(o, in, NCONV_U_X, crop, &s->g.x);
    from_view(o, w, NCONV_U_W, NULL, &s->g.w);
    from_view(o, out, NCONV_U_Y, NULL, &s->g.y);
    s->ptr[NCONV_U_X] = in->data, s->ptr[NCONV_U_W] = w->data, s->ptr[NCONV_U_Y] = out->data;
    s->in[NCONV_U_X] = in_tmp, s->in[NCONV_U_Y] = out_tmp;
    if (whole) *whole = *in;
    if (kind == NCONV_G_CONV_BWD_D && any_crop(crop)) {
        k->tmp[IN_TMP_B] = nconv__cuda_dense_view(in, whole);
        nconv_gtensor dense;
        from_view(o, whole, NCONV_U_X, NULL, &dense);
        for (int i = 0; i < s->g.x.rank; i++) s->g.x.strides[i] = dense.strides[i];
        s->g.x.align = 16;
        s->in[NCONV_U_X] = IN_TMP_B, s->zero = IN_TMP_B, s->ptr[NCONV_U_X] = NULL;
    }
    return s;
}

step *nconv__cuda_ew_step(call *k, int kernel, const char *name, const nconv_view *out, int out_tmp,
                          const nconv_view *a, int a_tmp, const nconv_view *b, int b_tmp, const nconv_view *bias) {
    step *s = add_step(k, NCONV_G_CONV_FWD, name);
    nconv_ew_geom *g = &s->ew;
    const nconv_view *shape = kernel == KERNEL_CHSUM ? a : out;
    s->kernel = kernel;
    g->alpha_a = g->alpha_b = 1.0;
    g->total = kernel == KERNEL_CHSUM ? shape->shape[1] : nconv__view_numel(shape);
    for (int d = 0; d < 5; d++) {
        g->dims[d] = shape->shape[d];
        g->os[d] = kernel == KERNEL_CHSUM ? 0 : out->stride[d];
        g->as[d] = a ? a->stride[d] : 0, g->bs[d] = b ? b->stride[d] : 0;
    }
    if (kernel == KERNEL_CHSUM) g->bias_stride = out->stride[0]; /* out is the [C] vector */
    g->has_a = a != NULL, g->has_b = b != NULL, g->has_bias = bias != NULL;
    if (bias) g->bias_stride = bias->stride[0], s->ptr[NCONV_U_BIAS] = bias->data;
    s->ptr[NCONV_U_Y] = out->data, s->in[NCONV_U_Y] = out_tmp;
    if (a) s->ptr[NCONV_U_X] = a->data, s->in[NCONV_U_X] = a_tmp;
    if (b) s->ptr[NCONV_U_Z] = b->data, s->in[NCONV_U_Z] = b_tmp;
    return s;
}

/* The forward epilogue of `a` (temporary a_tmp) into y: act(a + bias + alpha * z). */
static void epilogue_step(call *k, const nconv_fwd_ops *v, const nconv_view *a, int a_tmp) {
    step *s = nconv__cuda_ew_step(k, KERNEL_EPILOGUE, "epilogue", &v->y, IN_USER, a, a_tmp, v->e.z ? &v->z : NULL,
                                  IN_USER, v->e.bias ? &v->bias : NULL);
    s->ew.alpha_b = k->o->alpha, s->ew.relu = k->o->relu;
}

/* The epilogue in the convolution's graph (tried first; cuDNN may have no engine for it). */
static void fuse_epilogue(call *k, step *s, const nconv_fwd_ops *v) {
    const nconv_oplan *o = k->o;
    s->g.fused = 1, s->g.relu = o->relu, s->g.alpha = o->alpha;
    if (v->e.bias) from_vector(o, &v->bias, NCONV_U_BIAS, &s->g.bias), s->ptr[NCONV_U_BIAS] = v->bias.data;
    if (v->e.z) from_view(o, &v->z, NCONV_U_Z, NULL, &s->g.z), s->ptr[NCONV_U_Z] = v->z.data;
}

/* A padding mode's padded input: x's shape with each spatial size pad_begin + in + pad_end,
 * dense, channels innermost where x has them so; its bytes. */
static size_t padded_view(const nconv_oplan *o, const nconv_view *x, nconv_view *xp) {
    const int nd = o->p.ndims;
    *xp = *x;
    xp->data = NULL;
    for (int i = 0; i < nd; i++) xp->shape[5 - nd + i] = o->p.pad_begin[i] + x->shape[5 - nd + i] + o->p.pad_end[i];
    return nconv__cuda_dense_view(xp, xp);
}

static void pad_geom(const nconv_oplan *o, const nconv_view *x, const nconv_view *xp, nconv_pad_geom *g) {
    memset(g, 0, sizeof *g);
    g->n = x->shape[0], g->c = x->shape[1], g->mode = (int)o->p.padding_mode;
    for (int a = 0; a < 3; a++) {
        const int i = a - (3 - o->p.ndims); /* the problem's spatial dim, or < 0 for a unit dim */
        g->in[a] = x->shape[2 + a], g->out[a] = xp->shape[2 + a], g->pb[a] = i >= 0 ? o->p.pad_begin[i] : 0;
    }
    for (int d = 0; d < 5; d++) g->xs[d] = x->stride[d], g->ps[d] = xp->stride[d];
}

/* x padded by the problem's mode into temporary `tmp` (xp: its view). */
static void pad_step(call *k, const nconv_view *x, int tmp, nconv_view *xp) {
    step *s = add_step(k, NCONV_G_CONV_FWD, "padding");
    k->tmp[tmp] = padded_view(k->o, x, xp);
    s->kernel = KERNEL_PAD;
    s->ptr[NCONV_U_X] = x->data, s->in[NCONV_U_Y] = tmp;
    pad_geom(k->o, x, xp, &s->pad);
    s->pad.total = nconv__view_numel(xp);
}

/* dx from the padded input's gradient in temporary `tmp` (view dxp): each element sums
 * the padded elements its mode maps to it. */
static void fold_step(call *k, const nconv_view *dxp, int tmp, const nconv_view *dx) {
    step *s = add_step(k, NCONV_G_CONV_FWD, "padding backward");
    s->kernel = KERNEL_FOLD;
    s->in[NCONV_U_X] = tmp, s->ptr[NCONV_U_Y] = dx->data;
    pad_geom(k->o, dx, dxp, &s->pad);
    s->pad.total = nconv__view_numel(dx);
}

static int has_epilogue(const nconv_fwd_ops *v, const nconv_oplan *o) { return v->e.bias || v->e.z || o->relu; }

/* The steps of a forward: the convolution with its epilogue fused into its graph where cuDNN
 * has an engine for it (fused = 1), else the convolution into temporary A and the epilogue
 * kernel. A padding mode pads x first; a transposed problem whose output padding reaches
 * past its end padding convolves into the zeroed temporary B, and the epilogue (or a copy)
 * writes all of y. */
void nconv__cuda_forward_steps(call *k, const nconv_fwd_ops *v, int fused) {
    const nconv_oplan *o = k->o;
    k->n = 0, memset(k->tmp, 0, sizeof k->tmp);
    step *s;
    nconv_view whole;
    if (o->p.padding_mode != NCONV_PAD_ZEROS) {
        nconv_view xp;
        pad_step(k, &v->x, IN_TMP_B, &xp);
        s = conv_step(k, NCONV_G_CONV_FWD, &xp, IN_TMP_B, &v->w, &v->y, IN_USER, "forward", NULL);
    } else if (o->p.transposed) {
        s = conv_step(k, NCONV_G_CONV_BWD_D, &v->y, IN_USER, &v->w, &v->x, IN_USER, "transposed forward", &whole);
        if (s->in[NCONV_U_X] == IN_TMP_B) {
            epilogue_step(k, v, &whole, IN_TMP_B);
            return;
        }
    } else {
        s = conv_step(k, NCONV_G_CONV_FWD, &v->x, IN_USER, &v->w, &v->y, IN_USER, "forward", NULL);
    }
    if (!has_epilogue(v, o)) return;
    if (fused) {
        fuse_epilogue(k, s, v);
        return;
    }
    /* Unfused: the convolution writes temporary A, dense like y. */
    nconv_view pre;
    k->tmp[IN_TMP_A] = nconv__cuda_dense_view(&v->y, &pre);
    const int written = o->p.transposed ? NCONV_U_X : NCONV_U_Y;
    nconv_gtensor *t = written == NCONV_U_X ? &s->g.x : &s->g.y;
    from_view(o, &pre, written, NULL, t);
    s->in[written] = IN_TMP_A, s->ptr[written] = NULL;
    epilogue_step(k, v, &pre, IN_TMP_A);
}

/* The steps of a backward: relu's mask of dy into temporary A (dpre; else dy itself), dz =
 * alpha * dpre, db = channel sums of dpre, dx (backward-data; transposed: forward), dw
 * (backward-filter). A padding mode convolves its padded input: dx through the padded
 * gradient (temporary C) and the fold, dw from x padded into B. */
void nconv__cuda_backward_steps(call *k, const nconv_bwd_ops *v) {
    const nconv_oplan *o = k->o;
    k->n = 0, memset(k->tmp, 0, sizeof k->tmp);
    nconv_view dpre = v->dy;
    int dpre_in = IN_USER;
    if (o->relu) {
        k->tmp[IN_TMP_A] = nconv__cuda_dense_view(&v->dy, &dpre);
        dpre_in = IN_TMP_A;
        nconv__cuda_ew_step(k, KERNEL_MASK, "relu backward", &dpre, IN_TMP_A, &v->dy, IN_USER, &v->y, IN_USER, NULL);
    }
    if (v->outputs & NCONV_OUT_DZ) {
        step *s = nconv__cuda_ew_step(k, KERNEL_EPILOGUE, "dz", &v->dz, IN_USER, &dpre, dpre_in, NULL, IN_USER, NULL);
        s->ew.alpha_a = o->alpha;
    }
    if (v->outputs & NCONV_OUT_DB)
        nconv__cuda_ew_step(k, KERNEL_CHSUM, "db", &v->db, IN_USER, &dpre, dpre_in, NULL, IN_USER, NULL);
    const int padded = o->p.padding_mode != NCONV_PAD_ZEROS;
    if (v->outputs & NCONV_OUT_DX) {
        if (padded) { /* the padded input's gradient, folded back onto dx */
            nconv_view dxp;
            k->tmp[IN_TMP_C] = padded_view(o, &v->dx, &dxp);
            conv_step(k, NCONV_G_CONV_BWD_D, &dxp, IN_TMP_C, &v->w, &dpre, dpre_in, "backward data", NULL);
            fold_step(k, &dxp, IN_TMP_C, &v->dx);
        } else if (o->p.transposed) {
            conv_step(k, NCONV_G_CONV_FWD, &dpre, dpre_in, &v->w, &v->dx, IN_USER, "backward data", NULL);
        } else {
            nconv_view whole;
            const step *s =
                conv_step(k, NCONV_G_CONV_BWD_D, &v->dx, IN_USER, &v->w, &dpre, dpre_in, "backward data", &whole);
            if (s->in[NCONV_U_X] == IN_TMP_B)
                nconv__cuda_ew_step(k, KERNEL_EPILOGUE, "copy", &v->dx, IN_USER, &whole, IN_TMP_B, NULL, IN_USER, NULL);
        }
    }
    if (v->outputs & NCONV_OUT_DW) {
        if (padded) {
            nconv_view xp;
            pad_step(k, &v->x, IN_TMP_B, &xp);
            conv_step(k, NCONV_G_CONV_BWD_W, &xp, IN_TMP_B, &v->dw, &dpre, dpre_in, "backward weights", NULL);
        } else if (o->p.transposed) {
            conv_step(k, NCONV_G_CONV_BWD_W, &dpre, dpre_in, &v->dw, &v->x, IN_USER, "backward weights", NULL);
        } else {
            conv_step(k, NCONV_G_CONV_BWD_W, &v->x, IN_USER, &v->dw, &dpre, dpre_in, "backward weights", NULL);
        }
    }
}

int nconv__cuda_steps(const nconv_oplan *o, const nconv_fwd_ops *fwd, const nconv_bwd_ops *bwd, int fused,
                      nconv_gspec *out, int cap, int *kernels) {
    call k;
    k.o = o;
    if (fwd) nconv__cuda_forward_steps(&k, fwd, fused);
    else nconv__cuda_backward_steps(&k, bwd);
    int n = 0;
    *kernels = 0;
    for (int i = 0; i < k.n; i++) {
        if (k.s[i].kernel) ++*kernels;
        else if (n < cap) out[n++] = k.s[i].g;
    }
    return n;
}
