/* The CUDA / cuDNN backend's internal declarations: the run-time loaded
 * libraries, the problem-to-graph mapping and the context state. Compiled
 * only where the cuDNN headers were found (NCONV_CUDNN). */
#ifndef NCONV_CUDA_INTERNAL_H
#define NCONV_CUDA_INTERNAL_H

#include "../internal.h"

#include <stdbool.h> /* cuDNN's boolean attributes are C++ bools */

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include "kernels/geom.h"

/* ----------------------------------------------------------- the libraries */

/* The entry points nconv calls, resolved from libcudart.so.13 and libcudnn.so.9 with
 * dlopen (NCONV_CUDART_LIBRARY / NCONV_CUDNN_LIBRARY name other files), so that a build
 * with the backend runs on machines without CUDA. */
typedef struct nconv_cuda_lib {
    cudaError_t (*GetDeviceCount)(int *);
    cudaError_t (*SetDevice)(int);
    cudaError_t (*GetDevice)(int *);
    cudaError_t (*Malloc)(void **, size_t);
    cudaError_t (*Free)(void *);
    cudaError_t (*MemsetAsync)(void *, int, size_t, cudaStream_t);
    cudaError_t (*Memset2DAsync)(void *, size_t, int, size_t, size_t, cudaStream_t);
    cudaError_t (*StreamSynchronize)(cudaStream_t);
    cudaError_t (*PointerGetAttributes)(struct cudaPointerAttributes *, const void *);
    cudaError_t (*GetLastError)(void);
    const char *(*GetErrorString)(cudaError_t);
    const char *(*GetErrorName)(cudaError_t);
    cudaError_t (*EventCreate)(cudaEvent_t *);
    cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t);
    cudaError_t (*EventSynchronize)(cudaEvent_t);
    cudaError_t (*EventElapsedTime)(float *, cudaEvent_t, cudaEvent_t);
    cudaError_t (*EventDestroy)(cudaEvent_t);

    size_t (*cudnnGetVersion)(void);
    const char *(*cudnnGetErrorString)(cudnnStatus_t);
    void (*cudnnGetLastErrorString)(char *, size_t);
    cudnnStatus_t (*cudnnCreate)(cudnnHandle_t *);
    cudnnStatus_t (*cudnnDestroy)(cudnnHandle_t);
    cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*BackendCreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*BackendDestroyDescriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendFinalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendSetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*BackendGetAttribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*BackendExecute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} nconv_cuda_lib;

/* The driver API's calls that load and launch nconv's own kernels (libcuda.so.1, loaded
 * when a call first needs them). */
typedef struct nconv_cuda_driver {
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*GetErrorName)(CUresult, const char **);
} nconv_cuda_driver;

const nconv_cuda_driver *nconv__cuda_driver(void);

/* The PTX of kernels/pad.cu and kernels/elementwise.cu (generated at build time; size 0
 * where nvcc was not found). */
extern const char nconv__pad_ptx[], nconv__elementwise_ptx[];
extern const size_t nconv__pad_ptx_size, nconv__elementwise_ptx_size;

/* The loaded libraries (the same table for every caller), or NULL with the reason in the
 * thread's last error (NCONV_UNSUPPORTED). */
const nconv_cuda_lib *nconv__cuda_lib(void);
/* The cuDNN library alone: the descriptor calls need no GPU (the mapping tests use this). */
const nconv_cuda_lib *nconv__cudnn_lib(void);

/* ---------------------------------------------------------------- graphs */

/* One tensor of a graph: its uid (the variant pack's key), shape and strides in cuDNN's
 * order (N, C, spatial...; rank 4 for 1-2 spatial dims, 5 for 3), dtype and alignment. */
typedef struct nconv_gtensor {
    int64_t uid;
    int rank;
    int64_t dims[5], strides[5];
    nconv_dtype dt;
    int64_t align;  /* bytes, a power of two <= 16 */
    int is_virtual; /* an intermediate that only lives inside the graph */
} nconv_gtensor;

/* The graphs the backend runs: a convolution, in cuDNN's three directions. */
typedef enum nconv_gkind {
    NCONV_G_CONV_FWD = 0,   /* y = conv(x, w) */
    NCONV_G_CONV_BWD_D = 1, /* dx = conv_bwd_data(dy, w) */
    NCONV_G_CONV_BWD_W = 2  /* dw = conv_bwd_filter(x, dy) */
} nconv_gkind;

/* Uids of a graph's tensors (the roles of its variant pack); ALPHA is the by-value scalar
 * that scales z, PRE .. T4 the fused epilogue's intermediates. */
enum {
    NCONV_U_X = 1, NCONV_U_W, NCONV_U_Y, NCONV_U_BIAS, NCONV_U_Z, NCONV_U_ALPHA,
    NCONV_U_PRE, NCONV_U_T1, NCONV_U_T2, NCONV_U_T3, NCONV_U_T4, NCONV_U_COUNT
};

/* A convolution graph to build, optionally with the forward epilogue fused after it
 * (+ bias, + alpha * z, relu). Tensors absent from it have uid 0. */
typedef struct nconv_gspec {
    nconv_gkind kind;
    int spatial;                    /* 1-3: cuDNN's convolution has 2 or 3 (1 gets a unit dim) */
    int64_t pre[3], post[3], stride[3], dil[3];
    nconv_dtype compute;            /* accumulation: f32, or f64 for f64 */
    /* The convolution's input, weights and output in cuDNN's roles (x, w, y for fwd; dx, w,
     * dy for bwd_d; x, dw, dy for bwd_w). */
    nconv_gtensor x, w, y;
    nconv_gtensor bias, z;          /* the fused epilogue's operands (uid 0: absent) */
    int relu;
    double alpha;                   /* z's scale */
    int fused;                      /* the epilogue follows in the same graph */
} nconv_gspec;

/* A finalized operation graph and the descriptors it was built from. */
typedef struct nconv_cudnn_graph {
    cudnnBackendDescriptor_t graph;
    cudnnBackendDescriptor_t d[24];
    int n;
} nconv_cudnn_graph;

/* Builds and finalizes spec's operation graph (handle may be NULL: no device is needed);
 * on failure NCONV_UNSUPPORTED or NCONV_INTERNAL_ERROR with cuDNN's reason, nothing kept. */
nconv_status nconv__cudnn_graph(const nconv_cuda_lib *lib, const nconv_gspec *spec, cudnnHandle_t handle,
                                nconv_cudnn_graph *out);
void nconv__cudnn_graph_destroy(const nconv_cuda_lib *lib, nconv_cudnn_graph *g);
/* The error message of a failed cuDNN call. */
nconv_status nconv__cudnn_fail(const nconv_cuda_lib *lib, cudnnStatus_t s, const char *what);

/* ------------------------------------------------------------- the context */

/* A graph's execution plan, kept by the context (plan NULL: no engine takes the graph). */
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

/* The error of a failed CUDA runtime call. */
nconv_status nconv__cuda_fail(const nconv_cuda_lib *lib, cudaError_t e, const char *what);
/* Device memory of the context: its allocator where one was given, else cudaMalloc. */
void *nconv__cuda_dev_alloc(nconv_context *ctx, nconv_cuda *c, size_t bytes);
void nconv__cuda_dev_free(nconv_context *ctx, nconv_cuda *c, void *p);

/* ------------------------------------------------------------ the steps */

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

/* A dense tensor of v's shape, channels innermost where v has them so, else in C order
 * (data NULL: a step names the temporary it lives in); its bytes. */
size_t nconv__cuda_dense_view(const nconv_view *v, nconv_view *t);
/* The steps of a forward (fused: its epilogue in the convolution's graph) and of a backward. */
void nconv__cuda_forward_steps(call *k, const nconv_fwd_ops *v, int fused);
void nconv__cuda_backward_steps(call *k, const nconv_bwd_ops *v);
/* An elementwise kernel step over out's shape (kernel: KERNEL_EPILOGUE, _MASK or _CHSUM);
 * a, b and bias may be NULL, their data NULL with a temporary named in *_tmp. */
step *nconv__cuda_ew_step(call *k, int kernel, const char *name, const nconv_view *out, int out_tmp,
                          const nconv_view *a, int a_tmp, const nconv_view *b, int b_tmp, const nconv_view *bias);

/* ------------------------------------------------------------ the plans */

/* The context's settings a plan was chosen under (deterministic, TF32, benchmark). */
unsigned nconv__cuda_settings(const nconv_context *ctx, const nconv_cuda *c);
cached_plan *nconv__cuda_cache_find(nconv_cuda *c, const nconv_gspec *key, unsigned settings);
/* The execution plan of step s's graph, from the cache or chosen (engines within `room` bytes of
 * workspace, 0: any; the benchmark policy times them on s's operands, tmp the temporaries).
 * c->lock held. */
nconv_status nconv__cuda_plan_of(nconv_context *ctx, nconv_cuda *c, const step *s, void *const tmp[NTMP],
                                 size_t room, cached_plan *out);
/* Runs plan on step s's pointers (temporaries from tmp, workspace ws). */
cudnnStatus_t nconv__cuda_execute(const nconv_cuda_lib *lib, cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  const step *s, void *const tmp[NTMP], void *ws);

/* The graphs a forward (fwd given; fused: its epilogue in the convolution's graph) or a
 * backward (bwd given) runs, in order, into out (at most cap); their count, and in *kernels
 * the count of its steps that are nconv's own kernels (kernels/). */
int nconv__cuda_steps(const nconv_oplan *o, const nconv_fwd_ops *fwd, const nconv_bwd_ops *bwd, int fused,
                      nconv_gspec *out, int cap, int *kernels);

#endif
