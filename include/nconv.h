/*
 * nconv: N-dimensional convolution on CPUs (and on NVIDIA GPUs through cuDNN).
 *
 * One public header. Every function returns an nconv_status; on failure the
 * calling thread's last-error message (nconv_last_error) names the offending
 * parameter and its value, and no output tensor has been written.
 *
 * Conventions
 * - A problem (nconv_problem) describes the geometry: 1, 2 or 3 spatial dims,
 *   batch N, channels, groups, per-dim input size, kernel, stride, dilation,
 *   begin/end padding, transposed flag, output padding, padding mode, dtype.
 * - Tensors are a data pointer plus strides in elements over the logical
 *   order: activations [N, C, spatial...], weights [O, I/groups, k...] for a
 *   convolution and [I, O/groups, k...] for a transposed convolution (as in
 *   PyTorch). Contiguous NCHW, channels-last NHWC and any strided view are
 *   all expressible; nconv_tensor_init fills strides for the two common
 *   layouts.
 * - Complex dtypes (NCONV_C64, NCONV_C128) store each element as two reals,
 *   real part first (C's float complex / double complex, NumPy's complex64 /
 *   complex128); strides count complex elements. They take every call and
 *   feature but relu, with PyTorch's conventions: gradients are dL/d(re) +
 *   i dL/d(im) of a real loss, so dx = conv_transpose(dy, conj(w)) and
 *   dw = conv_w(conj(x), dy). Each runs as one real convolution of twice the
 *   channels; channels-first complex activations and the weights are copied
 *   to their real form (memory through the context, within its limit, beside
 *   the workspace that nconv_workspace_size gives).
 * - For a transposed problem, in_channels/in_size describe the transposed
 *   convolution's input and out_channels its output, exactly as in
 *   torch.nn.functional.conv_transpose{1,2,3}d.
 * - Sizes are int64_t and checked for overflow.
 *
 * Memory: the library allocates through the context's allocator (malloc /
 * free by default, or without a context; nconv_context_create_with_allocator
 * puts the context itself there too), never keeps pointers to caller
 * memory after a call returns, and uses the caller's workspace when one is
 * given (see nconv_workspace_size). A call gets all the memory it needs
 * before it writes any output: when an allocation fails or the context's
 * memory limit would be exceeded it returns NCONV_OUT_OF_MEMORY, has freed
 * what it took and has left every output untouched.
 *
 * Aliasing: an output may not share memory with any input or other output,
 * nor with itself (two indices mapping to one element); such calls fail with
 * NCONV_INVALID_ARGUMENT. The test is on address ranges, so interleaved
 * views that never touch the same element are rejected too.
 *
 * Threads: all functions may be called concurrently. A context may be shared
 * between threads; its plan cache and kept workspace are protected by a
 * mutex. Its settings (nconv_context_set_*) must not change while calls on it
 * are running. The last-error message is thread-local.
 */
#ifndef NCONV_H
#define NCONV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NCONV_API __attribute__((visibility("default")))
#else
#define NCONV_API
#endif

#define NCONV_VERSION_MAJOR 0
#define NCONV_VERSION_MINOR 1
#define NCONV_VERSION_PATCH 0

/** Maximum number of spatial dimensions. */
#define NCONV_MAX_SPATIAL 3
/** Maximum tensor rank: batch/channel dims plus spatial dims. */
#define NCONV_MAX_DIMS (NCONV_MAX_SPATIAL + 2)
/** Most elements of x, w, y (and of the padded input the windows sweep) that
 *  a problem may have: 2^48, far beyond any memory, so that every size the
 *  library derives fits in int64 and size_t. */
#define NCONV_MAX_ELEMENTS ((int64_t)1 << 48)

typedef enum nconv_status {
    NCONV_OK = 0,
    NCONV_INVALID_ARGUMENT = 1, /* a parameter is out of range or inconsistent */
    NCONV_UNSUPPORTED = 2,      /* valid, but not provided (e.g. forced algorithm does not apply) */
    NCONV_OUT_OF_MEMORY = 3,    /* an allocation failed or the workspace is too small */
    NCONV_INTERNAL_ERROR = 4    /* a bug: please report with the repro line */
} nconv_status;

typedef enum nconv_dtype {
    NCONV_F32 = 0,  /* float, f32 accumulation */
    NCONV_F64 = 1,  /* double, f64 accumulation */
    NCONV_F16 = 2,  /* IEEE half storage (uint16_t), f32 accumulation */
    NCONV_BF16 = 3, /* bfloat16 storage (uint16_t), f32 accumulation (with AVX512-BF16 on AMD CPUs, of
                     * the products of bf16 pairs for forward and backward-data: docs/engine.md) */
    NCONV_C64 = 4,  /* complex: interleaved (real, imaginary) float pairs, f32 accumulation */
    NCONV_C128 = 5  /* complex: interleaved (real, imaginary) double pairs, f64 accumulation */
} nconv_dtype;

typedef enum nconv_padding_mode {
    NCONV_PAD_ZEROS = 0,
    NCONV_PAD_REFLECT = 1,   /* padding < input size, as PyTorch */
    NCONV_PAD_REPLICATE = 2,
    NCONV_PAD_CIRCULAR = 3   /* padding <= input size, as PyTorch */
} nconv_padding_mode;

typedef enum nconv_activation {
    NCONV_ACT_IDENTITY = 0,
    NCONV_ACT_RELU = 1
} nconv_activation;

typedef enum nconv_layout {
    NCONV_LAYOUT_NCX = 0, /* NCHW-like: channels outside spatial */
    NCONV_LAYOUT_NXC = 1, /* NHWC-like: channels innermost */
    NCONV_LAYOUT_ANY = 2  /* plans only (nconv_plan_desc): any strides, known at execution */
} nconv_layout;

/** The three core directions; transposed problems map onto them. */
typedef enum nconv_direction {
    NCONV_DIR_FWD = 0,   /* y = conv(x, w) (+ epilogue) */
    NCONV_DIR_BWD_D = 1, /* dx = d<y, dy>/dx */
    NCONV_DIR_BWD_W = 2  /* dw (and db) */
} nconv_direction;

/** Algorithm selection policy of a context. */
typedef enum nconv_algo_policy {
    NCONV_POLICY_HEURISTIC = 0, /* first applicable algorithm in preference order */
    NCONV_POLICY_BENCHMARK = 1, /* time the applicable algorithms that fit the heuristic's workspace once
                                   per problem (on trial operands, where they fit the memory limit; else the
                                   heuristic's choice), cache the winner */
    NCONV_POLICY_FORCED = 2     /* the algorithm named by nconv_context_set_algorithm */
} nconv_algo_policy;

/**
 * Convolution problem. Initialise with nconv_problem_init, then set fields.
 * Arrays are indexed by spatial dim (0 .. ndims-1, outermost first).
 */
typedef struct nconv_problem {
    int ndims;                                  /* spatial dims: 1, 2 or 3 */
    int64_t batch;                              /* N >= 0 */
    int64_t in_channels;                        /* channels of the input x */
    int64_t out_channels;                       /* channels of the output y */
    int64_t groups;                             /* divides both channel counts */
    int64_t in_size[NCONV_MAX_SPATIAL];         /* spatial size of x */
    int64_t kernel[NCONV_MAX_SPATIAL];
    int64_t stride[NCONV_MAX_SPATIAL];          /* >= 1 */
    int64_t dilation[NCONV_MAX_SPATIAL];        /* >= 1 (1 = dense) */
    int64_t pad_begin[NCONV_MAX_SPATIAL];       /* >= 0 */
    int64_t pad_end[NCONV_MAX_SPATIAL];         /* may be negative: trailing input not read */
    int64_t output_padding[NCONV_MAX_SPATIAL];  /* transposed only; < max(stride, dilation) */
    int transposed;                             /* 0 or 1 */
    nconv_padding_mode padding_mode;            /* non-zero modes: non-transposed only */
    nconv_dtype dtype;
} nconv_problem;

/**
 * A tensor: data pointer and strides (in elements) over the logical order
 * [N, C, spatial...] (activations) or [O, I/g, k...] (weights), or [C] for a
 * bias. Only the first rank entries of stride are read.
 */
typedef struct nconv_tensor {
    void *data;
    int64_t stride[NCONV_MAX_DIMS];
} nconv_tensor;

/** Fused forward epilogue: y = act(conv(x, w) + bias + alpha * z). */
typedef struct nconv_epilogue {
    nconv_activation activation;
    double alpha; /* scale of z; ignored when z is NULL */
} nconv_epilogue;

typedef struct nconv_context nconv_context;

/* ------------------------------------------------------------------ errors */

/** The calling thread's message for the last failed call ("" if none). */
NCONV_API const char *nconv_last_error(void);
/** A static name for a status code. */
NCONV_API const char *nconv_status_string(nconv_status s);

/* ----------------------------------------------------------------- problem */

/** Defaults: ndims given, batch 1, 1 channel in/out, groups 1, size 1, kernel 1,
 *  stride 1, dilation 1, no padding, not transposed, zeros, f32. */
NCONV_API nconv_status nconv_problem_init(nconv_problem *p, int ndims);

/** Fills padding like PyTorch's padding='same' (stride must be 1: extra
 *  padding of even kernels goes at the end) from kernel and dilation. */
NCONV_API nconv_status nconv_problem_set_padding_same(nconv_problem *p);

/** Checks every rule; on failure the message names the parameter. */
NCONV_API nconv_status nconv_problem_validate(const nconv_problem *p);

/** Output spatial sizes (ndims entries). Validates p. */
NCONV_API nconv_status nconv_problem_output_size(const nconv_problem *p, int64_t out_size[NCONV_MAX_SPATIAL]);

/** Logical shapes (rank = ndims + 2; bias rank 1) of x, w, y. Validates p. */
NCONV_API nconv_status nconv_problem_shapes(const nconv_problem *p, int64_t x_shape[NCONV_MAX_DIMS],
                                  int64_t w_shape[NCONV_MAX_DIMS], int64_t y_shape[NCONV_MAX_DIMS]);

/** Multiply-adds times two of the equivalent direct convolution:
 *  2 * N * O * (I/g) * prod(kernel) * prod(output spatial) (for a transposed
 *  problem, "output" is its input), in real operations (four times that for a
 *  complex dtype). Same for every direction. */
NCONV_API nconv_status nconv_problem_flops(const nconv_problem *p, double *flops);

/** The problem in oneDNN benchdnn descriptor syntax (for a transposed problem,
 *  prefixed by "--transposed "). Fails with NCONV_INVALID_ARGUMENT if cap is too small. */
NCONV_API nconv_status nconv_problem_to_desc(const nconv_problem *p, char *buf, size_t cap);

typedef enum nconv_repro_kind {
    NCONV_REPRO_CLI = 0,    /* an `nconv check` command line */
    NCONV_REPRO_PYTORCH = 1 /* a Python snippet with torch.nn.functional */
} nconv_repro_kind;

/** A reproduction of the problem (does not validate p, so it works for
 *  rejected problems too). */
NCONV_API nconv_status nconv_problem_repro(const nconv_problem *p, nconv_repro_kind kind, char *buf, size_t cap);

/* ------------------------------------------------------------------ tensors */

/** Element size in bytes of a dtype (0 for an invalid value). */
NCONV_API size_t nconv_dtype_size(nconv_dtype dt);

/** Strides of a dense tensor of the given rank and shape in the given layout
 *  (NXC moves dim 1 innermost; rank 1 or 2 tensors ignore layout). */
NCONV_API nconv_status nconv_tensor_init(nconv_tensor *t, void *data, int rank, const int64_t *shape,
                               nconv_layout layout);

/* ------------------------------------------------------------------ context */

/** A context: thread count (default 1), determinism (default on), algorithm
 *  policy (default heuristic) and the plan cache. The kernels are the best
 *  the CPU has, capped by the environment's NCONV_MAX_ISA (generic, avx2,
 *  avx512 or avx512_bf16, AVX-512 with the BF16 instructions, which narrow
 *  bf16 results in one instruction and, on AMD CPUs, multiply bf16 pairs; read once, at
 *  the first call); any other value makes this and every computing call
 *  fail with NCONV_INVALID_ARGUMENT. With threads > 1 it keeps threads - 1
 *  worker threads, started by nconv_context_set_threads and
 *  joined by nconv_context_destroy; between calls they spin for 200 us,
 *  then sleep. One call at a time runs on them: concurrent calls on the same
 *  context start their own threads for the call, as does a call in a fork()
 *  child. */
NCONV_API nconv_status nconv_context_create(nconv_context **ctx);
NCONV_API nconv_status nconv_context_destroy(nconv_context *ctx);
NCONV_API nconv_status nconv_context_set_threads(nconv_context *ctx, int threads);
NCONV_API nconv_status nconv_context_set_deterministic(nconv_context *ctx, int deterministic);
NCONV_API nconv_status nconv_context_set_policy(nconv_context *ctx, nconv_algo_policy policy);
/** Forces the named algorithm (policy FORCED); NULL or "auto" returns to heuristic. */
NCONV_API nconv_status nconv_context_set_algorithm(nconv_context *ctx, const char *name);

/** Memory for the library's allocations on behalf of a context. alloc
 *  returns NULL on failure; free receives only pointers alloc returned. Calls
 *  on a context shared between threads may call both concurrently. */
typedef struct nconv_allocator {
    void *(*alloc)(void *user, size_t bytes);
    void (*free)(void *user, void *ptr);
    void *user;
} nconv_allocator;

/** nconv_context_create with the context itself, and then everything it
 *  allocates, from allocator (NULL: malloc / free). */
NCONV_API nconv_status nconv_context_create_with_allocator(nconv_context **ctx, const nconv_allocator *allocator);
/** Routes the context's allocations (workspace, batch-fold copies,
 *  temporaries, the plan cache) through allocator; NULL returns to malloc /
 *  free. Memory the context keeps is released first. */
NCONV_API nconv_status nconv_context_set_allocator(nconv_context *ctx, const nconv_allocator *allocator);
/** The most bytes one call on ctx may allocate (0, the default: no limit).
 *  An f32 call (f16 / bf16: forward and backward-data) whose workspace would
 *  exceed it runs in smaller pieces (see nconv_workspace_size); one that still needs more fails with
 *  NCONV_OUT_OF_MEMORY before allocating anything, and its message says
 *  what the call's smallest pieces need. Whether a call fits does not depend
 *  on the thread count: the pieces are chosen at one thread, and a call whose
 *  threads' scratch would break the limit runs on as many threads as fit
 *  (with the same bits). A caller-given workspace does not count; a call
 *  given one runs on as many threads as it holds. */
NCONV_API nconv_status nconv_context_set_memory_limit(nconv_context *ctx, size_t bytes);

/* ------------------------------------------------------------- CUDA contexts */

/**
 * A context bound to CUDA device `device`, computing through cuDNN 9's graph
 * API (docs/cuda.md): the calls take the same problems, epilogues and strided
 * tensors as on the CPU, with data pointers in that device's memory (or
 * managed memory; host pointers are refused, naming the operand):
 * nconv_forward, nconv_backward, the batched calls (the unbatched call per
 * batch entry), nconv_double_backward, nconv_forward_jvp and plans (weights
 * given to a plan are copied to device memory it owns). Not on a CUDA context
 * (NCONV_UNSUPPORTED, naming the call): complex dtypes and
 * nconv_workspace_size; nconv_algorithm_chosen answers "cudnn".
 *
 * Calls are enqueued on the context's stream (the default stream until
 * nconv_context_set_stream) and return without waiting for the device: the
 * results are ready once the stream has reached them. Device memory for
 * temporaries and cuDNN's workspace comes from the context's allocator, which
 * must then return device memory (default: cudaMalloc / cudaFree); the
 * context keeps it between calls within its memory limit, or a call uses the
 * workspace it is given (too small: NCONV_OUT_OF_MEMORY, naming the size it
 * needs). Per cuDNN graph the context keeps an execution plan, chosen once
 * under its policy (heuristic: cuDNN's first engine that is allowed;
 * benchmark: the fastest of them, timed on the first call's operands). A
 * deterministic context (the default) excludes cuDNN's non-deterministic
 * engines; f32 excludes TF32 tensor-core engines unless
 * nconv_context_set_allow_tf32 allows them. f16 and bf16 accumulate in f32,
 * f64 in f64.
 *
 * The library loads libcudart.so.13 and libcudnn.so.9 when the first CUDA
 * context is made (the environment's NCONV_CUDART_LIBRARY and
 * NCONV_CUDNN_LIBRARY name other files), and libcuda.so.1 when a call first
 * needs nconv's own kernels. Without them, without a device or in a build
 * without the backend, this fails with NCONV_UNSUPPORTED and says why.
 */
NCONV_API nconv_status nconv_context_create_cuda(nconv_context **ctx, int device);
/** The CUDA stream (a cudaStream_t; NULL: the default stream) of a CUDA context's calls. */
NCONV_API nconv_status nconv_context_set_stream(nconv_context *ctx, void *stream);
/** Whether f32 calls of a CUDA context may use TF32 tensor cores (default 0: f32 results, as
 *  PyTorch gives with torch.backends.cudnn.allow_tf32 = False; PyTorch's own default is True). */
NCONV_API nconv_status nconv_context_set_allow_tf32(nconv_context *ctx, int allow);
/** The CUDA device of ctx, or -1 for a CPU context (or ctx NULL). */
NCONV_API nconv_status nconv_context_device(const nconv_context *ctx, int *device);

/** Number of algorithms and their names, preference order, reference last. */
NCONV_API int nconv_algorithm_count(void);
NCONV_API const char *nconv_algorithm_name(int index);

/** Whether algorithm `name` applies to direction dir of p; if not, *why_not
 *  (may be NULL) gets a static reason. */
NCONV_API nconv_status nconv_algorithm_applies(const char *name, const nconv_problem *p, nconv_direction dir,
                                     int *applies, const char **why_not);

/** The algorithm the context would run for direction dir of p (the core
 *  direction, after mapping a transposed problem onto its direct equivalent). */
NCONV_API nconv_status nconv_algorithm_chosen(nconv_context *ctx, const nconv_problem *p, nconv_direction dir,
                                    const char **name);

/* -------------------------------------------------------------- execution */

typedef enum nconv_op {
    NCONV_OP_FORWARD = 0,        /* nconv_forward */
    NCONV_OP_BACKWARD = 1,       /* nconv_backward with every output requested */
    NCONV_OP_DOUBLE_BACKWARD = 2 /* nconv_double_backward (plans only) */
} nconv_op;

/** Bytes of workspace the call needs (an upper bound for any output mask and
 *  any layout of the operands): for the forced algorithm, else the
 *  heuristic's choice; under the benchmark policy the winner's, the
 *  candidates being the applicable algorithms whose workspace is at most the
 *  heuristic's (timed once per problem, here or at the first call, on
 *  operands of the library's own: zeros in the context's memory).
 *
 *  Bounded: an f32 call (f16 / bf16: forward and backward-data) whose
 *  algorithm would need more than max(16 MiB, its largest operand) (or the context's memory limit, where lower) runs as
 *  smaller convolutions: runs of images, then, when one image is too large,
 *  bands of rows of the outermost spatial dim (zero padding; backward-data
 *  needs stride 1 along it). The pieces are chosen from the workspace at one
 *  thread, so results stay bitwise identical for any thread count; each more
 *  thread adds its scratch (tens to hundreds of KiB; see
 *  nconv_context_set_memory_limit for a limit). With relu, backward's
 *  masked copy of dy comes on top. A call given a workspace runs the pieces
 *  this query planned; without one it plans for its operands' layouts
 *  (channels-last f32 operands are not copied, so they rarely need pieces). */
NCONV_API nconv_status nconv_workspace_size(nconv_context *ctx, const nconv_problem *p, nconv_op op,
                                  const nconv_epilogue *epi, size_t *bytes);

/**
 * Forward: y = act(conv(x, w) + bias + alpha * z); for a transposed problem,
 * the transposed convolution (conv_transpose) with the same epilogue.
 *   x:    [N, in_channels, in_size...]
 *   w:    [out_channels, in_channels/groups, kernel...]   (not transposed)
 *         [in_channels, out_channels/groups, kernel...]   (transposed)
 *   bias: [out_channels] or NULL
 *   z:    [N, out_channels, out_size...] or NULL (may not alias y)
 *   y:    [N, out_channels, out_size...]
 * epi may be NULL (identity, alpha 1). ctx may be NULL (defaults).
 * workspace may be NULL (allocated internally) or at least
 * nconv_workspace_size bytes.
 */
NCONV_API nconv_status nconv_forward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                           const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                           const nconv_tensor *z, const nconv_tensor *y,
                           void *workspace, size_t workspace_size);

/**
 * Backward of nconv_forward with the same epilogue, given dy = dL/dy.
 * Outputs are optional (NULL = not computed): dx [like x], dw [like w],
 * db [out_channels], dz [like y] (needs z to have been used: dz = alpha * dL/dpre).
 * x is needed for dw; w for dx; y (the forward output) when the activation is relu.
 * With batch 0, dx is empty and dw, db are zeros.
 */
NCONV_API nconv_status nconv_backward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                            const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *y,
                            const nconv_tensor *dy, const nconv_tensor *dx, const nconv_tensor *dw,
                            const nconv_tensor *db, const nconv_tensor *dz,
                            void *workspace, size_t workspace_size);

/**
 * Batched operands (functorch's vmap over one extra dim of size B): B
 * independent problems whose operands are each either batched (their own
 * slice per b, `stride` elements apart) or shared (batch stride 0). Outputs
 * always carry B. Shapes of one slice are those of the unbatched call.
 */
typedef struct nconv_batch {
    int64_t size;                    /* B >= 1 */
    int64_t x, w, bias, z, y, dy;    /* batch strides of the operands, in elements (0: shared) */
    int64_t dx, dw, db, dz;          /* batch strides of the backward outputs (must be non-zero) */
} nconv_batch;

/** nconv_forward for each b < B: y[b] = act(conv(x[b], w[b]) + bias[b] + alpha * z[b]). */
NCONV_API nconv_status nconv_forward_batched(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                             const nconv_batch *batch, const nconv_tensor *x, const nconv_tensor *w,
                                             const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *y);

/** nconv_backward for each b < B; per-sample weight gradients are the case
 *  "x and dy batched, w shared": dw[b] and db[b] are per b. */
NCONV_API nconv_status nconv_backward_batched(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                              const nconv_batch *batch, const nconv_tensor *x, const nconv_tensor *w,
                                              const nconv_tensor *y, const nconv_tensor *dy, const nconv_tensor *dx,
                                              const nconv_tensor *dw, const nconv_tensor *db, const nconv_tensor *dz);

/**
 * Forward-mode derivative (jvp: torch.autograd.forward_ad, functorch's jvp) of
 * nconv_forward. Given tangents tx [like x], tw [like w], tb [out_channels]
 * and tz [like y], each optional (NULL counts as zeros; tb needs bias, tz
 * needs z), computes y as nconv_forward does and its tangent
 *   ty = act'(pre) * (conv(tx, w) + conv(x, tw) + tb + alpha * tz)   [like y]
 * where act' is 1 for the identity and, for relu, 1 where y > 0 and 0
 * elsewhere (a NaN y passes the tangent, as torch's relu jvp). For a
 * transposed problem, conv is the transposed convolution. ty may not alias
 * y or an input. Temporaries are allocated internally through the context's
 * allocator and within its memory limit: the forward's workspace and, when
 * both tx and tw are given, one tensor the size of y.
 */
NCONV_API nconv_status nconv_forward_jvp(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                         const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                                         const nconv_tensor *z, const nconv_tensor *tx, const nconv_tensor *tw,
                                         const nconv_tensor *tb, const nconv_tensor *tz, const nconv_tensor *y,
                                         const nconv_tensor *ty);

/** Batch strides, in elements, of the forward jvp's operands (0: shared; y and ty carry the
 *  batch). */
typedef struct nconv_jvp_batch {
    int64_t size;                          /* B >= 1 */
    int64_t x, w, bias, z, tx, tw, tb, tz; /* inputs and their tangents */
    int64_t y, ty;                         /* outputs (must be non-zero) */
} nconv_jvp_batch;

/** nconv_forward_jvp for each b < B (functorch's jvp under vmap): y[b] and ty[b] from the slices
 *  b of the batched operands and the shared ones whole. Like the other batched calls, the B
 *  problems run as one convolution (B folded into the batch when w, bias and their tangents
 *  are shared, else into the groups). */
NCONV_API nconv_status nconv_forward_jvp_batched(nconv_context *ctx, const nconv_problem *p,
                                                 const nconv_epilogue *epi, const nconv_jvp_batch *batch,
                                                 const nconv_tensor *x, const nconv_tensor *w,
                                                 const nconv_tensor *bias, const nconv_tensor *z,
                                                 const nconv_tensor *tx, const nconv_tensor *tw,
                                                 const nconv_tensor *tb, const nconv_tensor *tz,
                                                 const nconv_tensor *y, const nconv_tensor *ty);

/**
 * Double backward (PyTorch's _convolution_double_backward), for a problem
 * without epilogue. Given ggx [like x], ggw [like w] and ggb [out_channels]
 * (each optional: NULL counts as zeros), the gradients of a scalar
 *   L = <dx, ggx> + <dw, ggw> + <db, ggb>
 * where (dx, dw, db) = nconv_backward(x, w, dy), computes (each output optional)
 *   ggy = dL/d(dy) = conv(ggx, w) + conv(x, ggw) + ggb   [like y]
 *   gx  = dL/dx    = backward-data of (dy, ggw)          [like x]
 *   gw  = dL/dw    = backward-weights of (ggx, dy)       [like w]
 * (for a transposed problem, conv is the transposed convolution). An output
 * that no given gg* reaches is set to zeros. Temporaries are allocated
 * internally (at most one tensor the size of y; a double backward plan's
 * workspace holds it).
 */
NCONV_API nconv_status nconv_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_tensor *x,
                                             const nconv_tensor *w, const nconv_tensor *dy, const nconv_tensor *ggx,
                                             const nconv_tensor *ggw, const nconv_tensor *ggb, const nconv_tensor *ggy,
                                             const nconv_tensor *gx, const nconv_tensor *gw);


/** Batch strides, in elements, of the double backward's operands (0: shared; every output
 *  carries the batch). */
typedef struct nconv_double_batch {
    int64_t size;                        /* B >= 1 */
    int64_t x, w, dy, ggx, ggw, ggb;     /* inputs */
    int64_t ggy, gx, gw;                 /* outputs (must be non-zero) */
} nconv_double_batch;

/** nconv_double_backward for each b < B (functorch's vmap over the double backward): ggy[b],
 *  gx[b], gw[b] from the slices b of the batched operands and the shared ones whole. */
NCONV_API nconv_status nconv_double_backward_batched(nconv_context *ctx, const nconv_problem *p,
                                                     const nconv_double_batch *batch, const nconv_tensor *x,
                                                     const nconv_tensor *w, const nconv_tensor *dy,
                                                     const nconv_tensor *ggx, const nconv_tensor *ggw,
                                                     const nconv_tensor *ggb, const nconv_tensor *ggy,
                                                     const nconv_tensor *gx, const nconv_tensor *gw);

/* ------------------------------------------------------------------ plans */

/*
 * A plan: one problem and operation, made once and executed many times. It
 * validates the problem, chooses the algorithm of each core direction the
 * operation needs and the pieces the call runs in (see nconv_workspace_size)
 * under the context's policy (the benchmark policy times the candidates while
 * the plan is made, on operands of its own), and never chooses again. Given
 * weights (nconv_plan_set_weights) it keeps a copy and, where its algorithm
 * has one, a packed form (for Winograd, the transformed weights), used by
 * every later execution that passes no weights of its own. nconv_forward,
 * nconv_backward and nconv_double_backward are a plan made, executed and
 * destroyed in one call.
 *
 * A plan refers to its context, which must outlive it and keep its settings
 * (threads, policy, allocator) while the plan exists; the plan runs on the
 * thread count the context had when the plan was made or last reshaped. Its
 * memory (the plan, the weights' copies) comes from the context's
 * allocator; each allocation counts against the context's memory limit as a
 * call's would. nconv_plan_execute may run on one plan from several threads
 * at once, each with its own workspace (or none: then each allocates its
 * own); nconv_plan_set_weights, nconv_plan_reshape and nconv_plan_destroy
 * must not overlap any other call on the plan.
 *
 * Example: an inference loop over one layer with prepacked weights.
 *
 *     nconv_plan_desc d;
 *     nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
 *     d.epi.activation = NCONV_ACT_RELU;
 *     d.layout = NCONV_LAYOUT_NXC;              // activations are channels-last
 *     nconv_plan *plan;
 *     if (nconv_plan_create(ctx, &problem, &d, &plan)) fail(nconv_last_error());
 *     if (nconv_plan_set_weights(plan, &w, &bias)) fail(nconv_last_error());
 *     for (;;) {                                // a batch arrives in x
 *         nconv_variant_pack v = {.x = &x, .y = &y};
 *         if (nconv_plan_execute(plan, &v)) fail(nconv_last_error());
 *     }
 *     nconv_plan_destroy(plan);
 *
 * examples/inference_loop.c is the same loop, complete.
 */
typedef struct nconv_plan nconv_plan;

/** The outputs of a plan (nconv_plan_desc.outputs): for backward dx, dw, db,
 *  dz; for double backward ggy, gx, gw (see nconv_backward,
 *  nconv_double_backward). */
typedef enum nconv_output {
    NCONV_OUT_DX = 1 << 0,
    NCONV_OUT_DW = 1 << 1,
    NCONV_OUT_DB = 1 << 2,
    NCONV_OUT_DZ = 1 << 3,
    NCONV_OUT_GGY = 1 << 4,
    NCONV_OUT_GX = 1 << 5,
    NCONV_OUT_GW = 1 << 6
} nconv_output;

/** What a plan computes. Initialise with nconv_plan_desc_init, then set fields. */
typedef struct nconv_plan_desc {
    nconv_op op;          /* forward, backward or double backward */
    unsigned outputs;     /* backward, double backward: the nconv_output bits an execution may ask for */
    nconv_epilogue epi;   /* forward, backward: the forward's epilogue (double backward: none) */
    int with_z;           /* forward: executions pass z (scaled by epi.alpha) */
    nconv_layout layout;  /* the activations' layout at execution (NCONV_LAYOUT_ANY: any strides; the
                             workspace then covers every layout, as nconv_workspace_size does) */
} nconv_plan_desc;

/** Defaults for op: every output of the op, identity epilogue (alpha 1), no
 *  z, layout NCONV_LAYOUT_ANY. */
NCONV_API nconv_status nconv_plan_desc_init(nconv_plan_desc *desc, nconv_op op);

/** Makes a plan of problem p (copied) for desc under ctx (NULL: defaults,
 *  one thread). Validates as the one-shot calls do, with their messages. */
NCONV_API nconv_status nconv_plan_create(nconv_context *ctx, const nconv_problem *p, const nconv_plan_desc *desc,
                                         nconv_plan **plan);

/** Bytes of workspace an execution of the plan needs (0 is possible). */
NCONV_API nconv_status nconv_plan_workspace_size(const nconv_plan *plan, size_t *bytes);

/** The plan's weights [like w] and bias [out_channels] (may be NULL; forward
 *  plans only), kept until new ones are given: copied, and packed where the
 *  plan's algorithm packs (igemm's panels; Winograd's transformed weights, four
 *  times their size) for the direction that reads them (forward; backward's
 *  dx; double backward's conv(ggx, w)), so the plan holds up to twice the
 *  weights (five times for Winograd). Executions that pass w use theirs
 *  instead. w NULL drops the plan's weights and bias. On failure the plan
 *  keeps what it had. */
NCONV_API nconv_status nconv_plan_set_weights(nconv_plan *plan, const nconv_tensor *w, const nconv_tensor *bias);

/** A new batch size (>= 0) for the plan: its pieces, threads and workspace
 *  follow; its algorithms and its weights stay. On failure the plan is
 *  unchanged. */
NCONV_API nconv_status nconv_plan_reshape(nconv_plan *plan, int64_t batch);

/** The algorithm the plan runs for core direction dir (the core direction, as
 *  in nconv_algorithm_chosen); NULL where the plan has none for it. An
 *  execution may still hand a piece to the next applicable algorithm of the
 *  list when this one declines its operands (Inf or NaN where it cannot
 *  compute as PyTorch does); NCONV_VERBOSE=1 names the one that ran. */
NCONV_API nconv_status nconv_plan_algorithm(const nconv_plan *plan, nconv_direction dir, const char **name);

/** The operands of one execution, by name: a field the plan's op does not
 *  read or write must be NULL. Shapes and roles are those of nconv_forward,
 *  nconv_backward and nconv_double_backward. */
typedef struct nconv_variant_pack {
    const nconv_tensor *x, *w, *bias, *z, *y;     /* forward; backward reads x, w, y */
    const nconv_tensor *dy, *dx, *dw, *db, *dz;   /* backward (double backward reads dy) */
    const nconv_tensor *ggx, *ggw, *ggb;          /* double backward, inputs */
    const nconv_tensor *ggy, *gx, *gw;            /* double backward, outputs */
    void *workspace;                              /* NULL: allocated for the call */
    size_t workspace_size;
} nconv_variant_pack;

/** Executes the plan's op on the operands of vp, whose shapes are those of the
 *  plan's problem at its current batch (a tensor carries strides, not a shape:
 *  after nconv_plan_reshape the caller passes tensors of the new batch). w may
 *  be NULL where the plan has weights: the plan's weights, and its bias unless
 *  vp gives one, are used; a vp that gives w uses its own bias (NULL: none).
 *  Backward computes the outputs vp gives, which must be among the plan's. */
NCONV_API nconv_status nconv_plan_execute(const nconv_plan *plan, const nconv_variant_pack *vp);

/** Frees the plan and its weights (NULL: nothing). */
NCONV_API nconv_status nconv_plan_destroy(nconv_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* NCONV_H */
