/*
 * Forward and backward on a CUDA context: a validated call becomes a short
 * sequence of cuDNN graphs (the steps), each executed through an execution
 * plan chosen once per graph and kept in the context's cache, as PyTorch's
 * cuDNN frontend keys its plans by the convolution's parameters.
 */
#include "cuda_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- the context */

typedef struct cached_plan {
    nconv_gspec key;
    unsigned settings; /* the context's that chose it: deterministic, TF32, benchmark policy */
    cudnnBackendDescriptor_t plan;
    nconv_cudnn_graph graph;
    int64_t workspace;
} cached_plan;

struct nconv_cuda {
    const nconv_cuda_lib *lib;
    int device;
    cudaStream_t stream;
    cudnnHandle_t handle;
    int allow_tf32;
    pthread_mutex_t lock; /* the cache and the kept workspace */
    cached_plan *cache;
    size_t n, cap;
    void *ws; /* device memory kept between calls */
    size_t ws_size;
    CUmodule modules[2];   /* kernels/pad.cu and kernels/elementwise.cu, loaded when first needed */
    CUfunction fn[6][4];   /* by kernel kind and dtype (see kernels_of) */
};

static nconv_status cuda_fail(const nconv_cuda_lib *lib, cudaError_t e, const char *what) {
    return nconv__error(e == cudaErrorMemoryAllocation ? NCONV_OUT_OF_MEMORY : NCONV_UNSUPPORTED,
                        "nconv: %s failed: %s (%s)", what, lib->GetErrorString(e), lib->GetErrorName(e));
}

nconv_status nconv__cuda_open(int device, nconv_cuda **out) {
    const nconv_cuda_lib *lib = nconv__cuda_lib();
    if (!lib) return NCONV_UNSUPPORTED;
    int count = 0;
    cudaError_t e = lib->GetDeviceCount(&count);
    if (e != cudaSuccess) {
        lib->GetLastError(); /* a failed device query is sticky in the runtime's last error */
        return cuda_fail(lib, e, "cudaGetDeviceCount");
    }
    if (device < 0 || device >= count)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: device = %d: this machine has %d CUDA device%s", device,
                            count, count == 1 ? "" : "s");
    if ((e = lib->SetDevice(device)) != cudaSuccess) return cuda_fail(lib, e, "cudaSetDevice");
    nconv_cuda *c = calloc(1, sizeof *c);
    if (!c) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a CUDA context");
    c->lib = lib, c->device = device;
    cudnnStatus_t s = lib->cudnnCreate(&c->handle);
    if (s != CUDNN_STATUS_SUCCESS) {
        free(c);
        return nconv__cudnn_fail(lib, s, "cudnnCreate");
    }
    if (pthread_mutex_init(&c->lock, NULL)) {
        lib->cudnnDestroy(c->handle);
        free(c);
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot create the CUDA context's mutex");
    }
    *out = c;
    return NCONV_OK;
}

/* Device memory of the context: its allocator where one was given, else cudaMalloc. */
static void *dev_alloc(nconv_context *ctx, nconv_cuda *c, size_t bytes) {
    if (nconv__ctx_has_allocator(ctx)) return nconv__alloc(ctx, bytes);
    void *p = NULL;
    if (c->lib->SetDevice(c->device) != cudaSuccess || c->lib->Malloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        c->lib->GetLastError();
        return NULL;
    }
    return p;
}

static void dev_free(nconv_context *ctx, nconv_cuda *c, void *p) {
    if (!p) return;
    if (nconv__ctx_has_allocator(ctx)) nconv__free(ctx, p);
    else c->lib->Free(p);
}

void nconv__cuda_release(nconv_context *ctx, nconv_cuda *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        c->lib->BackendDestroyDescriptor(c->cache[i].plan);
        nconv__cudnn_graph_destroy(c->lib, &c->cache[i].graph);
    }
    c->n = 0;
    dev_free(ctx, c, c->ws);
    c->ws = NULL, c->ws_size = 0;
}

void nconv__cuda_close(nconv_context *ctx, nconv_cuda *c) {
    if (!c) return;
    nconv__cuda_release(ctx, c);
    for (int i = 0; i < 2; i++)
        if (c->modules[i]) nconv__cuda_driver()->ModuleUnload(c->modules[i]);
    free(c->cache);
    c->lib->cudnnDestroy(c->handle);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int nconv__cuda_device(const nconv_cuda *c) { return c->device; }

nconv_status nconv__cuda_set_stream(nconv_cuda *c, void *stream) {
    const cudnnStatus_t s = c->lib->cudnnSetStream(c->handle, (cudaStream_t)stream);
    if (s != CUDNN_STATUS_SUCCESS) return nconv__cudnn_fail(c->lib, s, "cudnnSetStream");
    c->stream = (cudaStream_t)stream;
    return NCONV_OK;
}

void nconv__cuda_set_tf32(nconv_cuda *c, int allow) { c->allow_tf32 = allow != 0; }

/* ------------------------------------------------------- the call's steps */

/* Buffers a step's tensors live in: the caller's memory or the call's temporaries. */
enum { IN_USER = 0, IN_TMP_A = 1, IN_TMP_B = 2, IN_TMP_C = 3, NTMP = 4 };

/* Steps that are nconv's own kernels rather than cuDNN graphs (kernels/pad.cu,
 * kernels/elementwise.cu). Their operands go by uid: X the input (a), Z the second input (b),
 * BIAS, Y the output. */
enum { KERNEL_NONE = 0, KERNEL_PAD, KERNEL_FOLD, KERNEL_EPILOGUE, KERNEL_MASK, KERNEL_CHSUM };

typedef struct step {
    nconv_gspec g;
    void *ptr[NCONV_U_COUNT]; /* by uid, user memory */
    int in[NCONV_U_COUNT];    /* by uid: IN_USER or a temporary */
    int zero;                 /* a temporary to set to zeros first, or 0 */
    const char *name;
    int kernel;               /* KERNEL_* */
    nconv_dtype dt;           /* a kernel's element type */
    nconv_pad_geom pad;
    nconv_ew_geom ew;
} step;

/* The most steps a call runs: backward with relu, dz, db, a padded dx (two) and dw (two). */
enum { MAX_STEPS = 8 };

typedef struct call {
    step s[MAX_STEPS];
    int n;
    size_t tmp[NTMP]; /* bytes of temporaries A, B and C */
    const nconv_oplan *o;
} call;

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

/* A dense temporary of v's shape in C order (its data NULL: the step names the temporary);
 * its bytes. The same memory as a dense cuDNN tensor of the view (unit dims aside). */
static size_t dense_view(const nconv_view *v, nconv_view *t) {
    *t = *v;
    t->data = NULL;
    int64_t s = 1;
    for (int d = 4; d >= 0; d--) t->stride[d] = s, s *= t->shape[d];
    return (size_t)s * nconv_dtype_size(v->dt);
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
        k->tmp[IN_TMP_B] = dense_view(in, whole);
        nconv_gtensor dense;
        from_view(o, whole, NCONV_U_X, NULL, &dense);
        for (int i = 0; i < s->g.x.rank; i++) s->g.x.strides[i] = dense.strides[i];
        s->g.x.align = 16;
        s->in[NCONV_U_X] = IN_TMP_B, s->zero = IN_TMP_B, s->ptr[NCONV_U_X] = NULL;
    }
    return s;
}

/* An elementwise kernel step over out's shape (kernel: KERNEL_EPILOGUE, _MASK or _CHSUM);
 * a, b and bias may be NULL, their data NULL with a temporary named in *_tmp. */
static step *ew_step(call *k, int kernel, const char *name, const nconv_view *out, int out_tmp, const nconv_view *a,
                     int a_tmp, const nconv_view *b, int b_tmp, const nconv_view *bias) {
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
    step *s = ew_step(k, KERNEL_EPILOGUE, "epilogue", &v->y, IN_USER, a, a_tmp, v->e.z ? &v->z : NULL, IN_USER,
                      v->e.bias ? &v->bias : NULL);
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
    const int last = x->stride[1] == 1 && x->shape[1] > 1;
    static const int ncx[5] = {4, 3, 2, 1, 0}, nxc[5] = {1, 4, 3, 2, 0}; /* innermost first */
    int64_t st = 1;
    for (int i = 0; i < 5; i++) {
        const int d = last ? nxc[i] : ncx[i];
        xp->stride[d] = st, st *= xp->shape[d];
    }
    return (size_t)st * nconv_dtype_size(x->dt);
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
static void forward_steps(call *k, const nconv_fwd_ops *v, int fused) {
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
    k->tmp[IN_TMP_A] = dense_view(&v->y, &pre);
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
static void backward_steps(call *k, const nconv_bwd_ops *v) {
    const nconv_oplan *o = k->o;
    k->n = 0, memset(k->tmp, 0, sizeof k->tmp);
    nconv_view dpre = v->dy;
    int dpre_in = IN_USER;
    if (o->relu) {
        k->tmp[IN_TMP_A] = dense_view(&v->dy, &dpre);
        dpre_in = IN_TMP_A;
        ew_step(k, KERNEL_MASK, "relu backward", &dpre, IN_TMP_A, &v->dy, IN_USER, &v->y, IN_USER, NULL);
    }
    if (v->outputs & NCONV_OUT_DZ) {
        step *s = ew_step(k, KERNEL_EPILOGUE, "dz", &v->dz, IN_USER, &dpre, dpre_in, NULL, IN_USER, NULL);
        s->ew.alpha_a = o->alpha;
    }
    if (v->outputs & NCONV_OUT_DB) ew_step(k, KERNEL_CHSUM, "db", &v->db, IN_USER, &dpre, dpre_in, NULL, 0, NULL);
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
                ew_step(k, KERNEL_EPILOGUE, "copy", &v->dx, IN_USER, &whole, IN_TMP_B, NULL, IN_USER, NULL);
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

/* -------------------------------------------------- engines and execution */

#define ATTR_EXECUTION_PLAN_HANDLE ((cudnnBackendAttributeName_t)400) /* deprecated in 9.x, by number */
#define MAX_CONFIGS 64

/* Whether an engine config may run under the context's settings: no non-deterministic
 * engine when the context is deterministic, no TF32 tensor-core engine for f32 unless
 * allowed (PyTorch's allow_tf32 off). 0: not allowed; 1: allowed; 2: allowed, but it compiles
 * its kernels at run time (seconds per shape), so it comes after every other. */
static int config_allowed(const nconv_cuda_lib *lib, cudnnBackendDescriptor_t cfg, int deterministic, int f32,
                          int allow_tf32) {
    cudnnBackendDescriptor_t engine = NULL;
    int64_t n = 0;
    int ok = 1;
    if (lib->BackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return 0;
    if (lib->BackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) ==
        CUDNN_STATUS_SUCCESS) {
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        int64_t count = 0;
        if (lib->BackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < count; i++) {
                if (deterministic && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) ok = 0;
                if (f32 && !allow_tf32 &&
                    (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
                    ok = 0;
            }
        else ok = 0;
        cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
        if (ok && lib->BackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                           CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, behavior) == CUDNN_STATUS_SUCCESS)
            for (int64_t i = 0; i < count; i++)
                if (behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) ok = 2;
    } else {
        ok = 0;
    }
    lib->BackendDestroyDescriptor(engine);
    return ok;
}

/* The engine configs cuDNN's heuristics list for graph (mode A, then its fallback list). */
static int heuristic_configs(const nconv_cuda_lib *lib, cudnnBackendDescriptor_t graph, cudnnBackendDescriptor_t *cfg,
                             int cap) {
    int n = 0;
    const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int m = 0; m < 2 && n < cap; m++) {
        cudnnBackendDescriptor_t heur = NULL;
        if (lib->BackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS) break;
        int64_t count = 0;
        if (lib->BackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &graph) == CUDNN_STATUS_SUCCESS &&
            lib->BackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]) ==
                CUDNN_STATUS_SUCCESS &&
            lib->BackendFinalize(heur) == CUDNN_STATUS_SUCCESS &&
            lib->BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                     NULL) == CUDNN_STATUS_SUCCESS) {
            if (count > cap - n) count = cap - n;
            int made = 0;
            while (made < count &&
                   lib->BackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[n + made]) ==
                       CUDNN_STATUS_SUCCESS)
                made++;
            int64_t got = 0;
            if (made && lib->BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                 made, &got, &cfg[n]) == CUDNN_STATUS_SUCCESS) {
                for (int64_t i = got; i < made; i++) lib->BackendDestroyDescriptor(cfg[n + i]);
                n += (int)got;
            } else {
                for (int i = 0; i < made; i++) lib->BackendDestroyDescriptor(cfg[n + i]);
            }
        }
        lib->BackendDestroyDescriptor(heur);
    }
    return n;
}

static cudnnBackendDescriptor_t execution_plan(const nconv_cuda_lib *lib, cudnnHandle_t handle,
                                               cudnnBackendDescriptor_t cfg, int64_t *workspace) {
    cudnnBackendDescriptor_t plan = NULL;
    if (lib->BackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
        return NULL;
    int64_t n = 0;
    lib->BackendSetAttribute(plan, ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (lib->BackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &cfg) != CUDNN_STATUS_SUCCESS ||
        lib->BackendFinalize(plan) != CUDNN_STATUS_SUCCESS ||
        lib->BackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                 workspace) != CUDNN_STATUS_SUCCESS) {
        lib->BackendDestroyDescriptor(plan);
        return NULL;
    }
    return plan;
}

/* Runs plan on the step's pointers (temporaries from tmp, workspace ws). */
static cudnnStatus_t execute(const nconv_cuda_lib *lib, cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                             const step *s, void *const tmp[NTMP], void *ws) {
    int64_t uids[NCONV_U_COUNT];
    void *ptrs[NCONV_U_COUNT];
    int64_t n = 0;
    /* z's scale, by value (host memory cuDNN reads as it launches) */
    float alpha_f = (float)s->g.alpha;
    double alpha_d = s->g.alpha;
    if (s->g.fused && s->g.z.uid && s->g.alpha != 1.0)
        uids[n] = NCONV_U_ALPHA, ptrs[n++] = s->g.compute == NCONV_F64 ? (void *)&alpha_d : (void *)&alpha_f;
    for (int u = 1; u < NCONV_U_COUNT; u++) {
        if (!s->ptr[u] && s->in[u] == IN_USER) continue;
        uids[n] = u, ptrs[n] = s->in[u] == IN_USER ? s->ptr[u] : tmp[s->in[u]];
        n++;
    }
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t st = lib->BackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if ((st = lib->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids)) ==
            CUDNN_STATUS_SUCCESS &&
        (st = lib->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs)) ==
            CUDNN_STATUS_SUCCESS &&
        (st = lib->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws)) ==
            CUDNN_STATUS_SUCCESS &&
        (st = lib->BackendFinalize(vp)) == CUDNN_STATUS_SUCCESS)
        st = lib->BackendExecute(handle, plan, vp);
    lib->BackendDestroyDescriptor(vp);
    return st;
}

/* The median of three runs of plan on step s's operands, in ms (< 0: it failed). */
static float time_plan(nconv_context *ctx, nconv_cuda *c, cudnnBackendDescriptor_t plan, int64_t need, const step *s,
                       void *const tmp[NTMP]) {
    const nconv_cuda_lib *lib = c->lib;
    void *w = need ? dev_alloc(ctx, c, (size_t)need) : NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    int good = (!need || w) && lib->EventCreate(&t0) == cudaSuccess && lib->EventCreate(&t1) == cudaSuccess;
    float runs[3] = {0, 0, 0};
    for (int r = 0; good && r < 3; r++)
        good = lib->EventRecord(t0, c->stream) == cudaSuccess &&
               execute(lib, c->handle, plan, s, tmp, w) == CUDNN_STATUS_SUCCESS &&
               lib->EventRecord(t1, c->stream) == cudaSuccess && lib->EventSynchronize(t1) == cudaSuccess &&
               lib->EventElapsedTime(&runs[r], t0, t1) == cudaSuccess;
    if (t0) lib->EventDestroy(t0);
    if (t1) lib->EventDestroy(t1);
    dev_free(ctx, c, w);
    if (!good) return -1;
    const float lo = runs[0] < runs[1] ? runs[0] : runs[1], hi = runs[0] < runs[1] ? runs[1] : runs[0];
    return runs[2] < lo ? lo : runs[2] > hi ? hi : runs[2];
}

static unsigned settings_of(const nconv_context *ctx, const nconv_cuda *c) {
    return (unsigned)nconv__ctx_deterministic(ctx) | (unsigned)c->allow_tf32 << 1 |
           (unsigned)nconv__ctx_benchmarks(ctx) << 2;
}

static cached_plan *cache_find(nconv_cuda *c, const nconv_gspec *key, unsigned settings) {
    for (size_t i = 0; i < c->n; i++)
        if (c->cache[i].settings == settings && !memcmp(&c->cache[i].key, key, sizeof *key)) return &c->cache[i];
    return NULL;
}

/* The execution plan of step s's graph: cached, else built, its engine chosen (the
 * heuristics' first allowed config that finalizes within `room` bytes of workspace; under
 * the benchmark policy the fastest of them, timed on the call's operands) and cached.
 * Called with c->lock held. */
static nconv_status plan_of(nconv_context *ctx, nconv_cuda *c, const step *s, void *const tmp[NTMP], size_t room,
                            cached_plan *out) {
    const nconv_cuda_lib *lib = c->lib;
    const unsigned settings = settings_of(ctx, c);
    cached_plan *hit = cache_find(c, &s->g, settings);
    if (hit) {
        *out = *hit;
        return NCONV_OK;
    }
    if (c->n == c->cap) {
        const size_t cap = c->cap ? 2 * c->cap : 16;
        cached_plan *grown = realloc(c->cache, cap * sizeof *grown);
        if (!grown) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot grow the CUDA plan cache");
        c->cache = grown, c->cap = cap;
    }
    cached_plan e;
    memset(&e, 0, sizeof e);
    e.key = s->g, e.settings = settings;
    nconv_status st = nconv__cudnn_graph(lib, &s->g, c->handle, &e.graph);
    if (st) return st;
    cudnnBackendDescriptor_t cfg[MAX_CONFIGS];
    const int ncfg = heuristic_configs(lib, e.graph.graph, cfg, MAX_CONFIGS);
    const int timed = nconv__ctx_benchmarks(ctx);
    float best_ms = 0;
    int64_t ws_least = -1;
    int kind[MAX_CONFIGS];
    for (int i = 0; i < ncfg; i++)
        kind[i] = config_allowed(lib, cfg[i], nconv__ctx_deterministic(ctx),
                                 s->g.compute == NCONV_F32 && s->g.x.dt == NCONV_F32, c->allow_tf32);
    /* Engines with precompiled kernels first; those that compile at run time only where
     * none of them serves. */
    for (int pass = 1; pass <= 2 && !e.plan; pass++)
        for (int i = 0; i < ncfg && !(e.plan && !timed); i++) {
            int64_t need = 0;
            if (kind[i] != pass) continue;
            cudnnBackendDescriptor_t plan = execution_plan(lib, c->handle, cfg[i], &need);
            if (!plan) continue;
            if (ws_least < 0 || need < ws_least) ws_least = need;
            if (room && (size_t)need > room) {
                lib->BackendDestroyDescriptor(plan);
                continue;
            }
            if (!timed) {
                e.plan = plan, e.workspace = need;
                break;
            }
            const float ms = time_plan(ctx, c, plan, need, s, tmp);
            if (ms >= 0 && (!e.plan || ms < best_ms)) {
                if (e.plan) lib->BackendDestroyDescriptor(e.plan);
                e.plan = plan, e.workspace = need, best_ms = ms;
            } else {
                lib->BackendDestroyDescriptor(plan);
            }
        }
    for (int i = 0; i < ncfg; i++) lib->BackendDestroyDescriptor(cfg[i]);
    if (!e.plan) {
        nconv__cudnn_graph_destroy(lib, &e.graph);
        if (ws_least >= 0)
            return nconv__error(NCONV_OUT_OF_MEMORY,
                                "nconv: cuDNN's engines for the %s step need at least %" PRId64
                                " bytes of workspace, more than the %zu available",
                                s->name, ws_least, room);
        return nconv__error(NCONV_UNSUPPORTED,
                            "nconv: cuDNN %zu has no engine for the %s step (of %d configs listed, none %s)",
                            lib->cudnnGetVersion(), s->name, ncfg,
                            ncfg ? "allowed and finalized (determinism and TF32 settings filter them)" : "at all");
    }
    c->cache[c->n++] = e;
    *out = e;
    return NCONV_OK;
}

/* ------------------------------------------------------------- the calls */

static nconv_status check_device(const nconv_cuda *c, const char *name, const nconv_view *v) {
    if (!v->data || !nconv__view_numel(v)) return NCONV_OK;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    const cudaError_t e = c->lib->PointerGetAttributes(&a, v->data);
    if (e != cudaSuccess) {
        c->lib->GetLastError();
        return cuda_fail(c->lib, e, "cudaPointerGetAttributes");
    }
    if (a.type == cudaMemoryTypeManaged || (a.type == cudaMemoryTypeDevice && a.device == c->device)) return NCONV_OK;
    if (a.type == cudaMemoryTypeDevice)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: %s.data = %p is memory of CUDA device %d, not of the "
                                                    "context's device %d", name, v->data, a.device, c->device);
    return nconv__error(NCONV_INVALID_ARGUMENT,
                        "nconv: %s.data = %p is host memory: a CUDA context computes on device memory", name, v->data);
}

/* Sets an output to zeros (an empty batch's dw and db): one memset where its elements fill
 * their span. */
static nconv_status zero_output(const nconv_cuda *c, const char *name, const nconv_view *v) {
    int64_t numel = nconv__view_numel(v), span = 1;
    for (int i = 0; i < v->rank; i++)
        if (v->shape[i] > 1) span += (v->shape[i] - 1) * (v->stride[i] < 0 ? -v->stride[i] : v->stride[i]);
    if (!numel) return NCONV_OK;
    if (span != numel)
        return nconv__error(NCONV_UNSUPPORTED, "nconv: %s: a CUDA context zeroes an empty batch's gradients only "
                                               "in tensors without gaps", name);
    const cudaError_t e =
        c->lib->MemsetAsync(v->data, 0, (size_t)numel * nconv_dtype_size(v->dt), c->stream);
    return e == cudaSuccess ? NCONV_OK : cuda_fail(c->lib, e, "cudaMemsetAsync");
}

#define ALIGN_UP(n) (((n) + 255) & ~(size_t)255)

static nconv_status driver_fail(const nconv_cuda_driver *d, CUresult r, const char *what) {
    const char *name = "unknown";
    d->GetErrorName(r, &name);
    return nconv__error(NCONV_UNSUPPORTED, "nconv: %s failed: %s", what, name);
}

/* nconv's kernels on c's device, loaded at their first use (c->lock held): by kernel kind
 * (KERNEL_PAD .. KERNEL_CHSUM) and dtype (f32, f64, f16, bf16; the padding gather by element
 * size: 2, 4, 8 bytes in the slots of f16, f32, f64). */
static nconv_status kernels_of(nconv_cuda *c) {
    if (c->modules[0]) return NCONV_OK;
    if (!nconv__pad_ptx_size || !nconv__elementwise_ptx_size)
        return nconv__error(NCONV_UNSUPPORTED, "nconv: this build has no CUDA kernels of its own (nvcc was not "
                                               "found), which padding modes and the elementwise steps need");
    const nconv_cuda_driver *d = nconv__cuda_driver();
    if (!d) return NCONV_UNSUPPORTED;
    static const char *const kinds[] = {NULL, "pad", "fold", "epilogue", "mask", "chsum"};
    static const char *const types[4] = {"f32", "f64", "f16", "bf16"}, *const sizes[4] = {"b4", "b8", "b2", NULL};
    const char *ptx[2] = {nconv__pad_ptx, nconv__elementwise_ptx};
    CUresult r = CUDA_SUCCESS;
    CUmodule m[2] = {NULL, NULL};
    for (int i = 0; r == CUDA_SUCCESS && i < 2; i++) r = d->ModuleLoadData(&m[i], ptx[i]);
    for (int kind = KERNEL_PAD; r == CUDA_SUCCESS && kind <= KERNEL_CHSUM; kind++)
        for (int t = 0; r == CUDA_SUCCESS && t < 4; t++) {
            const char *suffix = kind == KERNEL_PAD ? sizes[t] : types[t];
            if (!suffix) continue;
            char name[64];
            snprintf(name, sizeof name, "nconv_%s_%s", kinds[kind], suffix);
            r = d->ModuleGetFunction(&c->fn[kind][t], m[kind <= KERNEL_FOLD ? 0 : 1], name);
        }
    if (r != CUDA_SUCCESS) {
        for (int i = 0; i < 2; i++)
            if (m[i]) d->ModuleUnload(m[i]);
        return driver_fail(d, r, "loading nconv's CUDA kernels");
    }
    c->modules[0] = m[0], c->modules[1] = m[1];
    return NCONV_OK;
}

static int dtype_slot(nconv_dtype dt) {
    return dt == NCONV_F32 ? 0 : dt == NCONV_F64 ? 1 : dt == NCONV_F16 ? 2 : 3;
}

static nconv_status launch(nconv_cuda *c, const step *s, void *const tmp[NTMP]) {
    const nconv_cuda_driver *d = nconv__cuda_driver();
    void *p[NCONV_U_COUNT];
    for (int u = 0; u < NCONV_U_COUNT; u++) p[u] = s->in[u] ? tmp[s->in[u]] : s->ptr[u];
    const int slot = s->kernel == KERNEL_PAD && s->dt == NCONV_BF16 ? 2 : dtype_slot(s->dt); /* bf16 pads as 2 bytes */
    nconv_pad_geom pg = s->pad;
    nconv_ew_geom eg = s->ew;
    void *pad_args[] = {&p[NCONV_U_X], &p[NCONV_U_Y], &pg};
    void *epi_args[] = {&p[NCONV_U_Y], &p[NCONV_U_X], &p[NCONV_U_BIAS], &p[NCONV_U_Z], &eg};
    void *mask_args[] = {&p[NCONV_U_Y], &p[NCONV_U_X], &p[NCONV_U_Z], &eg};
    void *sum_args[] = {&p[NCONV_U_Y], &p[NCONV_U_X], &eg};
    void **args = s->kernel <= KERNEL_FOLD ? pad_args
                  : s->kernel == KERNEL_EPILOGUE ? epi_args
                  : s->kernel == KERNEL_MASK     ? mask_args
                                                 : sum_args;
    const int64_t total = s->kernel <= KERNEL_FOLD ? pg.total : eg.total;
    /* chsum: a block of 256 threads per channel; the others: grid-stride loops */
    const int64_t blocks = s->kernel == KERNEL_CHSUM ? total : (total + 255) / 256;
    const CUresult r = d->LaunchKernel(c->fn[s->kernel][slot], (unsigned)(blocks < 65536 ? blocks : 65536), 1, 1,
                                       256, 1, 1, 0, (CUstream)c->stream, args, NULL);
    return r == CUDA_SUCCESS ? NCONV_OK : driver_fail(d, r, "launching the kernel of the step");
}

/* The temporaries of k one after the other from base (NULL: only their size), 256-byte
 * aligned; their bytes. */
static size_t temp_layout(const call *k, void *base, void *tmp[NTMP]) {
    size_t off = 0;
    for (int t = 1; t < NTMP; t++) {
        if (base) tmp[t] = (char *)base + off;
        off += ALIGN_UP(k->tmp[t]);
    }
    return off;
}

/* A failed execution's message: the step, the problem's `nconv check` line, cuDNN's version,
 * status and last error, and the PyTorch snippet of the problem on the device. */
static nconv_status execution_failed(const nconv_cuda_lib *lib, cudnnStatus_t cs, const step *s,
                                     const nconv_problem *p) {
    char cli[512] = "", torch[512] = "", what[640], msg[1024];
    nconv_problem_repro(p, NCONV_REPRO_CLI, cli, sizeof cli);
    nconv_problem_repro(p, NCONV_REPRO_PYTORCH, torch, sizeof torch);
    snprintf(what, sizeof what, "executing the %s step of `%s`", s->name, cli);
    const nconv_status st = nconv__cudnn_fail(lib, cs, what);
    /* The snippet on one line, its tensors on the device. */
    size_t n = 0;
    char line[600];
    for (const char *c = torch; *c && n + 16 < sizeof line; c++) {
        if (!strncmp(c, "dtype=", 6)) n += (size_t)snprintf(line + n, sizeof line - n, "device='cuda', ");
        line[n++] = *c == '\n' ? ';' : *c;
    }
    line[n] = '\0';
    snprintf(msg, sizeof msg, "%s; PyTorch: %s", nconv_last_error(), line);
    return nconv__error(st, "%s", msg);
}

/* Plans and runs the steps of k. Fused forward steps without an engine fall back to the
 * unfused steps (refill). */
/* Chooses the plan of each step of k within `room` bytes of cuDNN workspace (0: any); fused
 * forward steps without an engine fall back to the unfused steps. c->lock held. */
static nconv_status plan_steps(nconv_context *ctx, nconv_cuda *c, call *k, const nconv_fwd_ops *fwd, size_t room,
                               cached_plan *plans) {
    nconv_status st = NCONV_OK;
    void *tmp[NTMP] = {NULL, NULL, NULL, NULL}, *bench_tmp = NULL;
    size_t bench_bytes = 0;
    for (int i = 0; !st && i < k->n; i++) {
        if (k->s[i].kernel) {
            st = kernels_of(c);
            plans[i].plan = NULL, plans[i].workspace = 0;
            continue;
        }
        const size_t tmp_bytes = temp_layout(k, NULL, tmp);
        if (nconv__ctx_benchmarks(ctx) && tmp_bytes > bench_bytes) {
            /* Timing runs the steps on the call's operands and on temporaries of their own. */
            dev_free(ctx, c, bench_tmp);
            bench_bytes = 0;
            if (!(bench_tmp = dev_alloc(ctx, c, tmp_bytes))) {
                st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate the timing temporaries");
                break;
            }
            bench_bytes = tmp_bytes;
        }
        if (bench_tmp) temp_layout(k, bench_tmp, tmp);
        st = plan_of(ctx, c, &k->s[i], tmp, room, &plans[i]);
        if (st == NCONV_UNSUPPORTED && fwd && k->s[i].g.fused) { /* no engine fuses it: convolve, then the epilogue */
            forward_steps(k, fwd, 0);
            i = -1, st = NCONV_OK;
        }
    }
    dev_free(ctx, c, bench_tmp);
    return st;
}

/* Drops the cached plans of k's steps (chosen for more workspace than the device has). */
static void evict(nconv_cuda *c, const call *k, unsigned settings) {
    for (int i = 0; i < k->n; i++) {
        cached_plan *e = k->s[i].kernel ? NULL : cache_find(c, &k->s[i].g, settings);
        if (!e) continue;
        c->lib->BackendDestroyDescriptor(e->plan);
        nconv__cudnn_graph_destroy(c->lib, &e->graph);
        *e = c->cache[--c->n];
    }
}

/* Plans and runs the steps of k. Where the device memory their engines want cannot be had,
 * the steps are planned again for engines with half that workspace, down to none. */
static nconv_status run_steps(nconv_context *ctx, nconv_cuda *c, call *k, const nconv_fwd_ops *fwd, void *workspace,
                              size_t workspace_size) {
    const nconv_cuda_lib *lib = c->lib;
    cached_plan plans[MAX_STEPS];
    void *tmp[NTMP] = {NULL, NULL, NULL, NULL}, *base = workspace;
    size_t room = workspace ? workspace_size : nconv__ctx_room(ctx, 0);
    nconv_status st = NCONV_OK;
    pthread_mutex_lock(&c->lock);
    /* The runtime's current device is per thread: this call's may be another's. */
    const cudaError_t dev_err = lib->SetDevice(c->device);
    if (dev_err != cudaSuccess) st = cuda_fail(lib, dev_err, "cudaSetDevice");
    while (!st) {
        const size_t temps = temp_layout(k, NULL, tmp);
        if ((st = plan_steps(ctx, c, k, fwd, room && room > temps ? room - temps : room ? 1 : 0, plans))) break;
        size_t most = 0;
        for (int i = 0; i < k->n; i++)
            if ((size_t)plans[i].workspace > most) most = (size_t)plans[i].workspace;
        const size_t need = temp_layout(k, NULL, tmp) + most;
        if (workspace) {
            if (workspace_size < need)
                st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace_size = %zu: this call needs %zu bytes",
                                  workspace_size, need);
            break;
        }
        if (need <= c->ws_size) {
            base = c->ws;
            break;
        }
        if ((st = nconv__check_memory(ctx, need, "the CUDA workspace"))) break;
        dev_free(ctx, c, c->ws);
        c->ws_size = 0;
        if ((c->ws = dev_alloc(ctx, c, need))) {
            c->ws_size = need, base = c->ws;
            break;
        }
        if (!most)
            st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of device memory", need);
        evict(c, k, settings_of(ctx, c));
        room = most / 2 + temp_layout(k, NULL, tmp);
    }
    if (st) goto done;
    void *ws = (char *)base + temp_layout(k, base, tmp);
    for (int i = 0; i < k->n; i++) {
        const step *s = &k->s[i];
        if (s->zero) {
            const cudaError_t e = lib->MemsetAsync(tmp[s->zero], 0, k->tmp[s->zero], c->stream);
            if (e != cudaSuccess) {
                st = cuda_fail(lib, e, "cudaMemsetAsync");
                break;
            }
        }
        if (s->kernel) {
            if ((st = launch(c, s, tmp))) break;
            continue;
        }
        const cudnnStatus_t cs = execute(lib, c->handle, plans[i].plan, s, tmp, ws);
        if (cs != CUDNN_STATUS_SUCCESS) {
            st = execution_failed(lib, cs, s, &k->o->p);
            break;
        }
    }
done:
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Images per run: cuDNN's engines index with 32-bit integers, so a call whose activations
 * hold 2^31 elements or more runs on runs of images that stay below (one image at least). */
static int64_t images_per_run(const nconv_oplan *o) {
    int64_t per_image = 1, x = 1, y = 1;
    for (int i = 1; i < o->p.ndims + 2; i++) x *= o->xs[i], y *= o->ys[i];
    per_image = x > y ? x : y;
    const int64_t limit = ((int64_t)1 << 31) - 1, n = o->p.batch;
    return n * per_image <= limit ? n : per_image < limit ? limit / per_image : 1;
}

/* The oplan of images n0 .. n0 + nn of o. */
static void run_of(const nconv_oplan *o, int64_t nn, nconv_oplan *r) {
    *r = *o;
    r->p.batch = r->c.N = nn;
    r->xs[0] = r->ys[0] = nn;
}

nconv_status nconv__cuda_forward(nconv_context *ctx, const nconv_oplan *o, const nconv_fwd_ops *v, void *workspace,
                                 size_t workspace_size) {
    nconv_cuda *c = nconv__ctx_cuda(ctx);
    const nconv_view *ops[] = {&v->x, &v->w, &v->y, v->e.bias ? &v->bias : NULL, v->e.z ? &v->z : NULL};
    static const char *const names[] = {"x", "w", "y", "bias", "z"};
    nconv_status st = NCONV_OK;
    for (int i = 0; !st && i < 5; i++)
        if (ops[i]) st = check_device(c, names[i], ops[i]);
    const int64_t per = images_per_run(o);
    for (int64_t n0 = 0; !st && n0 < o->p.batch; n0 += per) {
        const int64_t nn = o->p.batch - n0 < per ? o->p.batch - n0 : per;
        nconv_oplan r;
        nconv_fwd_ops piece = *v;
        run_of(o, nn, &r);
        nconv__piece_view(&v->x, n0, nn, -1, 0, 0, &piece.x);
        nconv__piece_view(&v->y, n0, nn, -1, 0, 0, &piece.y);
        if (v->e.z) nconv__piece_view(&v->z, n0, nn, -1, 0, 0, &piece.z);
        piece.e.bias = v->e.bias ? &piece.bias : NULL, piece.e.z = v->e.z ? &piece.z : NULL;
        call k;
        k.o = &r;
        forward_steps(&k, &piece, 1);
        st = run_steps(ctx, c, &k, &piece, workspace, workspace_size);
    }
    return st;
}

nconv_status nconv__cuda_backward(nconv_context *ctx, const nconv_oplan *o, const nconv_bwd_ops *v, void *workspace,
                                  size_t workspace_size) {
    nconv_cuda *c = nconv__ctx_cuda(ctx);
    const nconv_view *ops[] = {&v->dy, &v->x, &v->w, &v->y, &v->dx, &v->dw, &v->db, &v->dz};
    static const char *const names[] = {"dy", "x", "w", "y", "dx", "dw", "db", "dz"};
    nconv_status st = NCONV_OK;
    for (int i = 0; !st && i < 8; i++) st = check_device(c, names[i], ops[i]);
    if (st) return st;
    if (!o->p.batch) {
        if (v->outputs & NCONV_OUT_DW) st = zero_output(c, "dw", &v->dw);
        if (!st && (v->outputs & NCONV_OUT_DB)) st = zero_output(c, "db", &v->db);
        return st;
    }
    /* dx and dz by runs of images where the activations are too large for one (dw and db,
     * sums over every image, in one call). */
    const int64_t per = images_per_run(o);
    const unsigned split = per < o->p.batch ? v->outputs & (NCONV_OUT_DX | NCONV_OUT_DZ) : 0u;
    for (int64_t n0 = 0; !st && split && n0 < o->p.batch; n0 += per) {
        const int64_t nn = o->p.batch - n0 < per ? o->p.batch - n0 : per;
        nconv_oplan r;
        nconv_bwd_ops piece = *v;
        run_of(o, nn, &r);
        piece.outputs = split;
        nconv_view *acts[] = {&piece.dy, &piece.x, &piece.y, &piece.dx, &piece.dz};
        const nconv_view *from[] = {&v->dy, &v->x, &v->y, &v->dx, &v->dz};
        for (int i = 0; i < 5; i++)
            if (from[i]->data) nconv__piece_view(from[i], n0, nn, -1, 0, 0, acts[i]);
        call k;
        k.o = &r;
        backward_steps(&k, &piece);
        st = run_steps(ctx, c, &k, NULL, workspace, workspace_size);
    }
    if (st || !(v->outputs & ~split)) return st;
    nconv_bwd_ops rest = *v;
    rest.outputs &= ~split;
    call k;
    k.o = o;
    backward_steps(&k, &rest);
    return run_steps(ctx, c, &k, NULL, workspace, workspace_size);
}

int nconv__cuda_steps(const nconv_oplan *o, const nconv_fwd_ops *fwd, const nconv_bwd_ops *bwd, int fused,
                      nconv_gspec *out, int cap, int *kernels) {
    call k;
    k.o = o;
    if (fwd) forward_steps(&k, fwd, fused);
    else backward_steps(&k, bwd);
    int n = 0;
    *kernels = 0;
    for (int i = 0; i < k.n; i++) {
        if (k.s[i].kernel) ++*kernels;
        else if (n < cap) out[n++] = k.s[i].g;
    }
    return n;
}

/* -------------------------------------------- elementwise, for the compositions */

void *nconv__cuda_temp(nconv_context *ctx, size_t bytes) {
    if (nconv__check_memory(ctx, bytes, "a CUDA temporary")) return NULL;
    void *p = dev_alloc(ctx, nconv__ctx_cuda(ctx), bytes);
    if (!p) nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of device memory", bytes);
    return p;
}

void nconv__cuda_temp_free(nconv_context *ctx, void *p) { dev_free(ctx, nconv__ctx_cuda(ctx), p); }

nconv_status nconv__cuda_pointwise(nconv_context *ctx, const nconv_problem *p, const int64_t *shape,
                                   const nconv_tensor *a, const nconv_tensor *mask, const nconv_tensor *bias,
                                   const nconv_tensor *z, double alpha, const nconv_tensor *out) {
    nconv_oplan o;
    memset(&o, 0, sizeof o);
    o.p = *p, o.alpha = alpha;
    call k;
    memset(&k, 0, sizeof k);
    k.o = &o;
    nconv_view va, vm, vo, vb, vz;
    nconv__make_view(p->ndims, p->dtype, out, 0, shape[0], shape[1], shape + 2, &vo);
    if (a) nconv__make_view(p->ndims, p->dtype, a, 0, shape[0], shape[1], shape + 2, &va);
    if (mask) {
        nconv__make_view(p->ndims, p->dtype, mask, 0, shape[0], shape[1], shape + 2, &vm);
        ew_step(&k, KERNEL_MASK, "relu mask", &vo, IN_USER, &va, IN_USER, &vm, IN_USER, NULL);
    } else {
        if (bias) {
            const int64_t one[NCONV_MAX_SPATIAL] = {1, 1, 1};
            nconv__make_view(p->ndims, p->dtype, bias, 0, 1, shape[1], one, &vb);
            vb.rank = 1, vb.shape[0] = shape[1], vb.stride[0] = bias->stride[0];
        }
        if (z) nconv__make_view(p->ndims, p->dtype, z, 0, shape[0], shape[1], shape + 2, &vz);
        step *s = ew_step(&k, KERNEL_EPILOGUE, "elementwise", &vo, IN_USER, a ? &va : NULL, IN_USER, z ? &vz : NULL,
                          IN_USER, bias ? &vb : NULL);
        s->ew.alpha_b = alpha;
    }
    return run_steps(ctx, nconv__ctx_cuda(ctx), &k, NULL, NULL, 0);
}
