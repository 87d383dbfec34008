/*
 * nconv's graphs as cuDNN graph (backend) API descriptors: tensors with int64
 * sizes and strides, a convolution with pre and post paddings, and the
 * forward epilogue's pointwise nodes after it. Building and finalizing an operation graph needs no GPU, so
 * the mapping is tested everywhere; engines and execution need the device.
 */
#include "cuda_internal.h"

#include <string.h>

/* Every descriptor a graph was built from, destroyed with it (cuDNN's nodes refer to their
 * tensors and convolution descriptors). */
#define MAX_DESCS ((int)(sizeof ((nconv_cudnn_graph *)0)->d / sizeof(cudnnBackendDescriptor_t)))

typedef struct builder {
    const nconv_cuda_lib *lib;
    cudnnBackendDescriptor_t d[MAX_DESCS];
    int n;
    cudnnStatus_t st;
    const char *what; /* the first failed step */
} builder;

static cudnnBackendDescriptor_t create(builder *b, cudnnBackendDescriptorType_t type, const char *what) {
    cudnnBackendDescriptor_t d = NULL;
    if (b->st != CUDNN_STATUS_SUCCESS) return NULL;
    if (b->n == MAX_DESCS) {
        b->st = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, b->what = what;
        return NULL;
    }
    if ((b->st = b->lib->BackendCreateDescriptor(type, &d)) != CUDNN_STATUS_SUCCESS) {
        b->what = what;
        return NULL;
    }
    b->d[b->n++] = d;
    return d;
}

static void set(builder *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count, const void *value, const char *what) {
    if (b->st != CUDNN_STATUS_SUCCESS) return;
    if ((b->st = b->lib->BackendSetAttribute(d, name, type, count, value)) != CUDNN_STATUS_SUCCESS) b->what = what;
}

static void finalize(builder *b, cudnnBackendDescriptor_t d, const char *what) {
    if (b->st != CUDNN_STATUS_SUCCESS) return;
    if ((b->st = b->lib->BackendFinalize(d)) != CUDNN_STATUS_SUCCESS) b->what = what;
}

static cudnnDataType_t data_type(nconv_dtype dt) {
    switch (dt) {
    case NCONV_F64: return CUDNN_DATA_DOUBLE;
    case NCONV_F16: return CUDNN_DATA_HALF;
    case NCONV_BF16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
    }
}

static cudnnBackendDescriptor_t tensor(builder *b, const nconv_gtensor *t, const char *what) {
    cudnnBackendDescriptor_t d = create(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    const cudnnDataType_t dt = data_type(t->dt);
    const bool virt = t->is_virtual != 0;
    set(b, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, what);
    set(b, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t->rank, t->dims, what);
    set(b, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t->rank, t->strides, what);
    set(b, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t->uid, what);
    set(b, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &t->align, what);
    set(b, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, what);
    finalize(b, d, what);
    return d;
}

/* An intermediate like t (shape and strides), in the compute type, living inside the graph. */
static nconv_gtensor virtual_like(const nconv_gtensor *t, int64_t uid, nconv_dtype compute) {
    nconv_gtensor v = *t;
    v.uid = uid, v.dt = compute, v.is_virtual = 1, v.align = 16;
    return v;
}

static void scalar(nconv_dtype compute, double v, cudnnBackendAttributeType_t *type, float *f, double *d) {
    *type = compute == NCONV_F64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
    *f = (float)v, *d = v;
}

/* A pointwise node out = mode(in, in2) (in2 may be NULL). */
static cudnnBackendDescriptor_t pointwise(builder *b, cudnnPointwiseMode_t mode, nconv_dtype compute,
                                          cudnnBackendDescriptor_t in, cudnnBackendDescriptor_t in2,
                                          cudnnBackendDescriptor_t out) {
    const char *what = "pointwise node";
    cudnnBackendDescriptor_t pw = create(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    const cudnnDataType_t prec = compute == NCONV_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, what);
    finalize(b, pw, what);
    cudnnBackendDescriptor_t op = create(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what);
    set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in, what);
    if (in2) set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in2, what);
    set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out, what);
    finalize(b, op, what);
    return op;
}

static cudnnBackendDescriptor_t convolution(builder *b, const nconv_gspec *s, cudnnBackendDescriptor_t x,
                                            cudnnBackendDescriptor_t w, cudnnBackendDescriptor_t y) {
    const char *what = "convolution descriptor";
    cudnnBackendDescriptor_t c = create(b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, what);
    /* cuDNN convolves 2 or 3 spatial dims: a 1-d problem gets a unit dim in front. */
    const int64_t nd = s->spatial == 1 ? 2 : s->spatial, off = s->spatial == 1 ? 1 : 0;
    int64_t pre[3] = {0, 0, 0}, post[3] = {0, 0, 0}, st[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
    for (int i = 0; i < s->spatial; i++)
        pre[i + off] = s->pre[i], post[i + off] = s->post[i], st[i + off] = s->stride[i], dil[i + off] = s->dil[i];
    const cudnnDataType_t ct = s->compute == NCONV_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    set(b, c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nd, what);
    set(b, c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct, what);
    set(b, c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, what);
    set(b, c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nd, pre, what);
    set(b, c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nd, post, what);
    set(b, c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nd, st, what);
    set(b, c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nd, dil, what);
    finalize(b, c, what);

    static const cudnnBackendDescriptorType_t types[] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                                        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                                        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    /* The attributes of x, w, y, the convolution, alpha and beta for each kind. */
    static const cudnnBackendAttributeName_t names[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
    const int k = (int)s->kind;
    what = "convolution node";
    cudnnBackendDescriptor_t op = create(b, types[k], what);
    set(b, op, names[k][0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    set(b, op, names[k][1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w, what);
    set(b, op, names[k][2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    set(b, op, names[k][3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, what);
    cudnnBackendAttributeType_t type;
    float f1, f0;
    double d1, d0;
    scalar(s->compute, 1.0, &type, &f1, &d1);
    scalar(s->compute, 0.0, &type, &f0, &d0);
    set(b, op, names[k][4], type, 1, type == CUDNN_TYPE_DOUBLE ? (void *)&d1 : (void *)&f1, what);
    set(b, op, names[k][5], type, 1, type == CUDNN_TYPE_DOUBLE ? (void *)&d0 : (void *)&f0, what);
    finalize(b, op, what);
    return op;
}

/* The by-value scalar alpha (a [1, ...] tensor of the compute type whose value the variant
 * pack gives by host pointer). */
static cudnnBackendDescriptor_t scalar_tensor(builder *b, const nconv_gspec *s, const nconv_gtensor *like) {
    nconv_gtensor t;
    memset(&t, 0, sizeof t);
    t.uid = NCONV_U_ALPHA, t.rank = like->rank, t.dt = s->compute, t.align = 16;
    for (int i = 0; i < t.rank; i++) t.dims[i] = t.strides[i] = 1;
    const char *what = "alpha tensor";
    cudnnBackendDescriptor_t d = create(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    const cudnnDataType_t dt = data_type(t.dt);
    const bool by_value = true;
    set(b, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, what);
    set(b, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t.rank, t.dims, what);
    set(b, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t.rank, t.strides, what);
    set(b, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t.uid, what);
    set(b, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &t.align, what);
    set(b, d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, what);
    finalize(b, d, what);
    return d;
}

/* The epilogue's chain from `a` to the tensor out: + bias, + alpha * z (z scaled by a
 * multiplication with the by-value alpha where alpha is not 1: cuDNN's fusion engines take
 * pointwise nodes with unit alphas only), relu. Appends its nodes to ops; a node's output is
 * virtual but for the last. */
static void epilogue(builder *b, const nconv_gspec *s, cudnnBackendDescriptor_t a, const nconv_gtensor *out,
                     cudnnBackendDescriptor_t *ops, int *nops) {
    const int steps = (s->bias.uid != 0) + (s->z.uid != 0) + (s->relu != 0);
    int done = 0;
    int64_t uid = NCONV_U_T1;
    cudnnBackendDescriptor_t cur = a;
    for (int step = 0; step < 3; step++) {
        const nconv_gtensor *operand = step == 0 ? &s->bias : step == 1 ? &s->z : NULL;
        if ((step < 2 && !operand->uid) || (step == 2 && !s->relu)) continue;
        const nconv_gtensor v = virtual_like(out, uid++, s->compute);
        cudnnBackendDescriptor_t next = ++done == steps ? tensor(b, out, "output tensor") : tensor(b, &v, "virtual");
        if (step < 2) {
            cudnnBackendDescriptor_t t = tensor(b, operand, step == 0 ? "bias tensor" : "z tensor");
            if (step == 1 && s->alpha != 1.0) { /* t = alpha * z */
                const nconv_gtensor scaled = virtual_like(out, uid++, s->compute);
                cudnnBackendDescriptor_t zs = tensor(b, &scaled, "virtual");
                ops[(*nops)++] = pointwise(b, CUDNN_POINTWISE_MUL, s->compute, t, scalar_tensor(b, s, out), zs);
                t = zs;
            }
            ops[(*nops)++] = pointwise(b, CUDNN_POINTWISE_ADD, s->compute, cur, t, next);
        } else {
            ops[(*nops)++] = pointwise(b, CUDNN_POINTWISE_RELU_FWD, s->compute, cur, NULL, next);
        }
        cur = next;
    }
}

/* The deprecated handle attribute of an operation graph (cuDNN 9.0-9.x before it became
 * optional), by number: its enumerator is marked deprecated. */
#define ATTR_OPERATIONGRAPH_HANDLE ((cudnnBackendAttributeName_t)800)

nconv_status nconv__cudnn_graph(const nconv_cuda_lib *lib, const nconv_gspec *s, cudnnHandle_t handle,
                                nconv_cudnn_graph *out) {
    builder b = {.lib = lib, .st = CUDNN_STATUS_SUCCESS};
    cudnnBackendDescriptor_t ops[8];
    int nops = 0;
    /* The convolution writes y (forward), x (backward-data: dx) or w (backward-filter: dw);
     * fused, it writes a virtual tensor the epilogue reads, and the epilogue the output. */
    nconv_gtensor t[3] = {s->x, s->w, s->y};
    const int written = s->kind == NCONV_G_CONV_FWD ? 2 : s->kind == NCONV_G_CONV_BWD_D ? 0 : 1;
    const int fused = written != 1 && s->fused && (s->bias.uid || s->z.uid || s->relu);
    const nconv_gtensor final_out = t[written];
    if (fused) t[written] = virtual_like(&final_out, NCONV_U_PRE, s->compute);
    cudnnBackendDescriptor_t x = tensor(&b, &t[0], "x tensor"), w = tensor(&b, &t[1], "w tensor"),
                             y = tensor(&b, &t[2], "y tensor");
    ops[nops++] = convolution(&b, s, x, w, y);
    if (fused) epilogue(&b, s, written == 2 ? y : x, &final_out, ops, &nops);
    const char *what = "operation graph";
    cudnnBackendDescriptor_t g = create(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, what);
    if (handle) set(&b, g, ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, what);
    set(&b, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops, what);
    finalize(&b, g, what);
    if (b.st != CUDNN_STATUS_SUCCESS) {
        const nconv_status st = nconv__cudnn_fail(lib, b.st, b.what);
        for (int i = b.n - 1; i >= 0; i--) lib->BackendDestroyDescriptor(b.d[i]);
        return st;
    }
    memcpy(out->d, b.d, sizeof b.d);
    out->n = b.n;
    out->graph = g;
    return NCONV_OK;
}

void nconv__cudnn_graph_destroy(const nconv_cuda_lib *lib, nconv_cudnn_graph *g) {
    for (int i = g->n - 1; i >= 0; i--) lib->BackendDestroyDescriptor(g->d[i]);
    g->n = 0, g->graph = NULL;
}
