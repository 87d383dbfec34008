/* Internal declarations shared by the library's layers (never installed). */
#ifndef NCONV_INTERNAL_H
#define NCONV_INTERNAL_H

#include "nconv.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memcpy: the inline conversions below */

/* ------------------------------------------------------------------ errors */

/* Sets the thread's last-error message (printf format) and returns status. */
nconv_status nconv__error(nconv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void nconv__clear_error(void);

/* ceil(a / b) for a >= 0, b > 0. */
static inline int64_t nconv__div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* a * b and a + b for non-negative sizes; 0 on overflow. */
int nconv__mul_ok(int64_t a, int64_t b, int64_t *out);
int nconv__add_ok(int64_t a, int64_t b, int64_t *out);

/* -------------------------------------------------------- core geometry */

/* A direct (non-transposed) convolution, always 3 spatial dims: lower-rank
 * problems get leading size-1 dims. Transposed problems are mapped onto
 * this form by swapping the roles of input and output (see execute.c). */
typedef struct nconv_core {
    int nd;                 /* spatial dims of the user's problem */
    int64_t N, C, O, G;     /* batch, input channels, output channels, groups */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    nconv_padding_mode mode;
    nconv_dtype dt;
} nconv_core;

/* Geometry from a validated problem: for transposed problems the equivalent
 * direct convolution (its input is the transposed output). */
void nconv__core_from_problem(const nconv_problem *p, nconv_core *c);
int64_t nconv__core_in_spatial(const nconv_core *c);
int64_t nconv__core_out_spatial(const nconv_core *c);
int64_t nconv__core_kernel_spatial(const nconv_core *c);
/* Elements of the output of direction dir (fwd: y, bwd_d: dx; bwd_w: dw). */
int64_t nconv__core_output_numel(const nconv_core *c, nconv_direction dir);

#include "pad_index.h" /* nconv__map_index */

/* ---------------------------------------------------------- operand checks */

/* One operand of a call: a user tensor (NULL: absent) of logical shape
 * shape[0 .. rank), optionally with a batch dim of `batch` entries. */
typedef struct nconv_operand_check {
    const char *name;
    const nconv_tensor *t;
    int rank;
    const int64_t *shape;
    int64_t batch, batch_stride; /* batch 0: none */
    int output;
} nconv_operand_check;

/* Strides addressable without overflow, data non-NULL when non-empty, no
 * output overlapping itself or another operand (by address ranges). */
nconv_status nconv__check_operands(nconv_dtype dt, const nconv_operand_check *ops, int n);

/* ----------------------------------------------------------------- views */

/* A tensor with its shape: rank 5 (N, C, D, H, W) / (O, I/g, KD, KH, KW) for
 * activations and weights after padding to 3 spatial dims, rank 1 for bias. */
typedef struct nconv_view {
    void *data;
    nconv_dtype dt;
    int rank;
    int64_t shape[NCONV_MAX_DIMS];
    int64_t stride[NCONV_MAX_DIMS];
} nconv_view;

int64_t nconv__view_numel(const nconv_view *v);
/* The rank-5 view [a, b, spatial padded to 3 dims] of a user tensor of logical
 * shape [a, b, sp[0 .. ndims)], starting `offset` elements into its data. */
void nconv__make_view(int ndims, nconv_dtype dt, const nconv_tensor *t, int64_t offset, int64_t a, int64_t b,
                      const int64_t *sp, nconv_view *v);
/* 1 if v is dense in C order (logical order). */
int nconv__view_is_dense(const nconv_view *v);
double nconv__load(const void *data, nconv_dtype dt, int64_t off);
void nconv__store1(void *data, nconv_dtype dt, int64_t off, double v);
uint16_t nconv__f32_to_f16(float f);
uint16_t nconv__f32_to_bf16(float f);
/* Widening is exact; inline, as packing loops convert element by element. */
static inline float nconv__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: value = man * 2^-24 */
            float f = (float)man * 0x1p-24f;
            return sign ? -f : f;
        }
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float nconv__bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Element off of real data of type dt as f32 (f64 rounded). */
static inline float nconv__load_f32(const void *data, nconv_dtype dt, int64_t off) {
    switch (dt) {
    case NCONV_F32: return ((const float *)data)[off];
    case NCONV_F16: return nconv__f16_to_f32(((const uint16_t *)data)[off]);
    case NCONV_BF16: return nconv__bf16_to_f32(((const uint16_t *)data)[off]);
    default: return (float)nconv__load(data, dt, off);
    }
}

/* Dense C-order copies of a view: in f64 / f32. */
void nconv__gather_f64(const nconv_view *v, double *dst);
void nconv__gather_f32(const nconv_view *v, float *dst);

/* The forward epilogue applied while writing an output. */
typedef struct nconv_epi {
    const nconv_view *bias; /* [C] or NULL */
    const nconv_view *z;    /* like the output, or NULL */
    double alpha;
    int relu;
} nconv_epi;

/* Writes a dense C-order array (f64 if src_f64, else f32) of v's shape into v,
 * applying epi (may be NULL) on channel dim 1. */
void nconv__scatter(const nconv_view *v, const void *src, int src_f64, const nconv_epi *epi);

/* NHWC ("channels last") dense f32 copies: dst[n][spatial][c] of a rank-5
 * activation view, and back with the epilogue applied. */
int nconv__view_is_nxc_f32(const nconv_view *v);
int nconv__view_is_nxc(const nconv_view *v); /* dense channels-last, any dtype */
/* A rank-5 activation view whose spatial dims are one dense plane (NCHW-like; the batch and
 * channel strides are free); the second of dtype f32. */
int nconv__view_is_planar(const nconv_view *v);
int nconv__view_is_planar_f32(const nconv_view *v);
typedef struct nconv_exec nconv_exec;
void nconv__gather_nxc_f32(const nconv_exec *e, const nconv_view *v, float *dst);
/* A 16-bit (f16, bf16) view as a dense channels-last copy in its own dtype, bits unchanged. */
void nconv__gather_nxc_16(const nconv_exec *e, const nconv_view *v, uint16_t *dst);
void nconv__scatter_nxc_f32(const nconv_exec *e, const nconv_view *v, const float *src, const nconv_epi *epi);

/* Operands of the channels-last algorithms: the caller's memory when it is
 * NHWC f32 already, else buf (filled by gather for inputs). An output is
 * written in place (*fuse: bias and relu go into the kernel) unless it needs
 * a layout change or z, in which case the caller scatters buf afterwards
 * (nconv__scatter_nxc_f32). epi_init: the bias as f32 (zeros without one). */
const float *nconv__nxc_input(const nconv_exec *e, const nconv_view *v, float *buf);
float *nconv__nxc_output(const nconv_view *v, const nconv_epi *epi, float *buf, int *fuse);
void nconv__epi_init(const nconv_epi *epi, float *init, int64_t n);
/* Depthwise weights [C, 1, k...]: the element offset of tap t (kernel order) of channel ch; channel
 * ch's taps in order (reversed when reverse) into wt as f32, returning whether all are finite;
 * channel ch's taps from acc (kernel order) into w, converted to w's dtype. */
int64_t nconv__dw_w_offset(const nconv_core *c, const nconv_view *w, int64_t ch, int64_t t);
int nconv__dw_gather_w(const nconv_core *c, const nconv_view *w, int64_t ch, int reverse, float *wt);
void nconv__dw_store_w(const nconv_core *c, const nconv_view *w, int64_t ch, const float *acc);

/* Elementwise helpers over rank-5 views of one shape (any dtype/strides):
 * dst = y <= 0 ? 0 : dy (NaN y passes dy, as torch; dst may be dy); dst = alpha * src; dst += alpha * src;
 * per-channel sums in f64 in a fixed order (deterministic). */
void nconv__relu_grad(const nconv_view *dst, const nconv_view *dy, const nconv_view *y);
void nconv__scale_copy(const nconv_view *dst, const nconv_view *src, double alpha);
void nconv__add_scaled(const nconv_view *dst, const nconv_view *src, double alpha);
/* dst += src, f32 views of one shape. */
void nconv__add_f32(const nconv_view *dst, const nconv_view *src);
/* sums: room for 5 * channels doubles (the rest is scratch); results first. */
struct nconv_pool;
void nconv__channel_sums(struct nconv_pool *pool, int threads, const nconv_view *src, double *sums);
/* sums[c] = (lane 0 + lane 1) + (lane 2 + lane 3) of channel c (lane l at lane[l * C + c]). */
void nconv__channel_sums_of_lanes(const double *lane, int64_t C, double *sums);
/* dst = bias broadcast over dim 1 (bias: rank-1 view, or NULL for zeros). */
void nconv__fill(const nconv_view *dst, const nconv_view *bias);
/* v: like `like` (shape), dense in dtype dt at data, channels-last if `like` is. */
void nconv__view_dense_like(nconv_view *v, void *data, nconv_dtype dt, const nconv_view *like);

/* ------------------------------------------------------------- threading */

typedef void (*nconv_task_fn)(void *arg, int tid, int nthreads);

/* A context's worker threads, kept between calls: starting threads per
 * parallel region costs as much as the region itself on small problems.
 * Between jobs a worker spins briefly (SPIN_NS in parallel.c: the next
 * region of a call follows within microseconds), then sleeps on a
 * condition variable, so that an idle pool soon leaves the cores to the
 * caller. One call uses the pool at a time; a concurrent call on the same
 * context starts its own threads instead. */
enum { NCONV_MAX_THREADS = 256 };
typedef struct nconv_pool {
    pthread_mutex_t busy; /* held by the call the workers serve */
    pthread_mutex_t m;    /* guards the fields below */
    pthread_cond_t wake, done;
    int workers;          /* started; worker i runs as thread i + 1 */
    long pid;             /* of the process that started them: a fork() child has none */
    atomic_int pending;   /* workers still on the current job */
    atomic_uint gen;      /* job count: a worker runs each new one */
    atomic_int quit;
    nconv_task_fn fn;
    void *arg;
    int nthreads;
    pthread_t tid[NCONV_MAX_THREADS];
    struct nconv_pool_slot {
        struct nconv_pool *pool;
        int tid;
        unsigned gen0; /* jobs before the worker started: not its to run */
    } slot[NCONV_MAX_THREADS];
} nconv_pool;

/* 0 on success; the pool starts with no workers. */
int nconv__pool_init(nconv_pool *p);
void nconv__pool_destroy(nconv_pool *p);
/* Stops the workers, then starts up to `workers` (as many as the system gives). */
void nconv__pool_resize(nconv_pool *p, int workers);

/* fn(arg, tid, threads) for tid < threads, the caller being tid 0; returns
 * when all are done. On the pool's workers when it has enough and is free,
 * else on threads started for this call. */
void nconv__parallel_on(nconv_pool *pool, int threads, nconv_task_fn fn, void *arg);
/* The share [begin, end) of n items for thread tid of nthreads. */
void nconv__split(int64_t n, int tid, int nthreads, int64_t *begin, int64_t *end);
/* Thread tid's share of adding backward-weights' pixel chunks 1.. into chunk 0, in chunk order:
 * acc[i] += acc[ch * n + i], and (lanes not NULL) lanes[i] += lanes_more[(ch - 1) * nl + i]. */
void nconv__add_chunks(int tid, int nthreads, float *acc, int64_t n, int64_t chunks, double *lanes,
                       const double *lanes_more, int64_t nl);

/* Shares of work with stealing: thread t claims the items of its share
 * [next, end) one at a time, then those left in the others' shares. Each
 * share is a cache line of its own (64 bytes: allocate with the arena). For
 * tasks whose items are computed whole, so that results do not depend on
 * which thread ran them: a thread that the machine delays no longer holds
 * up the region by the rest of its static share. */
typedef struct nconv_share {
    atomic_llong next;
    int64_t end;
    char pad[64 - sizeof(atomic_llong) - sizeof(int64_t)];
} nconv_share;
/* Shares of n items for nthreads threads, as nconv__split makes them. */
void nconv__share_split(nconv_share *shares, int64_t n, int nthreads);
/* The next item for thread tid, or -1 when every share is done. */
int64_t nconv__share_claim(nconv_share *shares, int tid, int nthreads);

/* ------------------------------------------------------------- workspace */

/* A bump allocator over the workspace; sizes are rounded to 64 bytes so the
 * size query and the execution compute the same total. */
typedef struct nconv_arena {
    char *base;
    size_t size, used;
} nconv_arena;

size_t nconv__ws_round(size_t bytes);
void *nconv__arena_take(nconv_arena *a, size_t bytes);
/* The bytes between two threads' scratch areas of `bytes` each: at least 64 KiB. Two threads
 * whose areas lay closer ran up to 1.8x slower than with them apart (BENCHMARKS.md). */
size_t nconv__thread_stride(size_t bytes);

/* ------------------------------------------------------------ algorithms */

struct nconv_exec {
    const nconv_core *c;
    nconv_direction dir;
    /* fwd: reads x, w, writes y. bwd_d: reads y (= dy), w, writes x (= dx).
     * bwd_w: reads x, y (= dy), writes w (= dw). */
    const nconv_view *x, *w, *y;
    const nconv_epi *epi; /* applied to the written activation (fwd, bwd_d) */
    nconv_arena *ws;
    int threads;
    nconv_pool *pool; /* the context's workers, or NULL */
    /* bwd_w with a bias gradient wanted (NULL otherwise): room for the four
     * lanes of y's channel sums (lane l of channel c at db_lanes[l * C + c],
     * as in nconv__channel_sums). An algorithm that reads all of dy anyway may
     * fill them and set *db_done (a thread-count-independent order, not
     * necessarily nconv__channel_sums' bits); else the caller sums dy. */
    double *db_lanes;
    int *db_done;
    /* bwd_w: add the result to w instead of writing it (set only for algorithms whose
     * nconv_algo.accumulates is set; w is f32). */
    int accumulate;
    const struct nconv_kernels *k; /* the kernel table, chosen once per process */
    /* fwd, bwd_d: w as the running algorithm's pack made it (nconv_algo.pack), or NULL */
    const void *packed;
    /* Where the running algorithm names a path of its own that it took (NULL: none to name);
     * NCONV_VERBOSE prints it. */
    const char **path;
    /* The whole call's problem, of which c may be a piece (split.c): whether an output stays in
     * the cache for the next call depends on all of it. */
    const nconv_core *whole;
};

/* The whole call's problem of e (its own where it runs unsplit). */
static inline const nconv_core *nconv__exec_whole(const nconv_exec *e) { return e->whole ? e->whole : e->c; }

/* The parallel region of an algorithm: e's thread count, on e's pool. */
void nconv__parallel(const nconv_exec *e, nconv_task_fn fn, void *arg);
/* The number of threads nconv__parallel(e, ...) runs: e's, at most NCONV_MAX_THREADS. */
int nconv__parallel_width(const nconv_exec *e);

/* Outputs of this many bytes and more are not read again from the cache before they leave it:
 * algorithms may write them with non-temporal stores (no read for ownership), then fence. */
#define NCONV_STREAM_OUTPUT_BYTES ((size_t)4 << 20)
/* The fence a thread issues after its non-temporal stores, before its parallel region ends: they
 * are weakly ordered, and the caller or another thread reads the output next. */
static inline void nconv__stream_fence(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_sfence();
#endif
}

/* The activations a call copies into channels-last f32 buffers: those not NHWC
 * f32 already, and its output when z is given (nconv__nxc_input, _output).
 * A workspace query knows no layouts: it counts both. */
enum { NCONV_COPY_X = 1, NCONV_COPY_Y = 2, NCONV_COPY_BOTH = 3 };
/* Beside the copies, planning knows where the activations are channels-last (x and y): the
 * heuristic then passes over the algorithms for NCHW planes (nconv_algo.suits). */
enum { NCONV_ACTS_NXC = 4 };
unsigned nconv__exec_copies(const nconv_exec *e);

/* Internal statuses of nconv_algo.run (never returned to callers): the algorithm
 * declines this call's operands, and the planner hands it to the next applicable
 * algorithm of the list that does not decline for the same reason. */
enum {
    NCONV__DECLINE_W = 100,      /* weights with Inf or NaN */
    NCONV__DECLINE_DATA = 101,   /* activations with Inf or NaN */
    NCONV__DECLINE_LAYOUT = 102, /* activations not in the layout the algorithm reads */
    /* operands the algorithm leaves to others by a measure of its own (z, shapes it computes
     * slower): the next algorithm decides for itself */
    NCONV__DECLINE_OWN = 103
};
/* nconv_algo.declines bits: the bit of reason r is 1 << (r - NCONV__DECLINE_W). */
enum { NCONV__DECLINES_W = 1, NCONV__DECLINES_DATA = 2, NCONV__DECLINES_LAYOUT = 4, NCONV__DECLINES_OWN = 8 };
static inline int nconv__declined(nconv_status st) {
    return st >= (nconv_status)NCONV__DECLINE_W && st <= (nconv_status)NCONV__DECLINE_OWN;
}

typedef struct nconv_algo {
    const char *name;
    /* 1 if the algorithm computes dir of c; else 0 and a static reason. */
    int (*applies)(const nconv_core *c, nconv_direction dir, const char **why_not);
    /* Bytes the run takes from e->ws, for the channels-last copies in `copies` (NCONV_COPY_*). */
    size_t (*workspace)(const nconv_core *c, nconv_direction dir, int threads, unsigned copies);
    nconv_status (*run)(const nconv_exec *e);
    /* The heuristic policy skips an applicable algorithm when this says 0
     * (NULL: always preferred); forced and benchmark policies ignore it. */
    int (*preferred)(const nconv_core *c, nconv_direction dir);
    int accumulates; /* bwd_w honours nconv_exec.accumulate */
    /* Per direction, the NCONV__DECLINES_* reasons for which run may decline. */
    unsigned declines[3];
    /* Prepacked weights (NULL, or 0 bytes: the algorithm reads w in every run): the bytes
     * of w's packed form for (c, dir), the same for every piece of a split of c and any
     * batch, and in *scratch those pack takes from e->ws at `threads`. pack writes it from
     * e->w into dst (64-byte aligned); it may decline as run does (the packed form is then
     * not used). */
    size_t (*pack_size)(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch);
    nconv_status (*pack)(const nconv_exec *e, void *dst);
    /* Whether a call planned with the channels-last copies in `copies` may suit it (NULL:
     * any); the heuristic passes over it where not. */
    int (*suits)(unsigned copies);
} nconv_algo;

extern const nconv_algo nconv_algo_depthwise_flat;
extern const nconv_algo nconv_algo_depthwise_planes;
extern const nconv_algo nconv_algo_depthwise;
extern const nconv_algo nconv_algo_grouped;
extern const nconv_algo nconv_algo_stem;
extern const nconv_algo nconv_algo_winograd;
extern const nconv_algo nconv_algo_igemm_planes;
extern const nconv_algo nconv_algo_igemm_cols;
extern const nconv_algo nconv_algo_igemm;
extern const nconv_algo nconv_algo_gemm;
extern const nconv_algo nconv_algo_ref;

/* gemm's f64 GEMM (gemm_f64.c): C[M x N] = A[M x K] * B[K x N] (+ C when accumulate), f64
 * throughout, A read through element strides (rsa, csa), B and C row-major. pack: scratch of
 * nconv__f64_gemm_pack_bytes(), 64-byte aligned. */
size_t nconv__f64_gemm_pack_bytes(void);
void nconv__f64_gemm(const struct nconv_kernels *kt, int64_t M, int64_t N, int64_t K, const double *A, int64_t rsa,
                     int64_t csa, const double *B, int64_t ldb, double *C, int64_t ldc, int accumulate, double *pack);

/* Whether igemm's kernels compute dir of c (igemm_planes and igemm_cols add their shapes). */
int nconv__igemm_applies(const nconv_core *c, nconv_direction dir, const char **why_not);

/* Backward-data kernels that read dy through a zero buffer for taps outside
 * it would turn 0 * Inf into NaN where PyTorch (and the reference) compute no
 * product: with a non-finite weight they decline (NCONV__DECLINE_W), and the
 * call goes on to gemm, whose column scatter drops those products. */
int nconv__view_all_finite(const nconv_view *v);
/* Whether the n floats at p are finite. */
int nconv__f32_all_finite(const float *p, int64_t n);

/* Preference order, reference last. */
int nconv__algo_count(void);
const nconv_algo *nconv__algo_at(int i);
const nconv_algo *nconv__algo_find(const char *name);

/* The algorithm for (c, dir), planned with the channels-last copies in `copies`, under
 * ctx's policy (ctx may be NULL): the forced one (an error where it does not apply), else
 * the heuristic's; under the benchmark policy the winner the context remembers for c, if any. */
nconv_status nconv__choose(nconv_context *ctx, const nconv_core *c, nconv_direction dir, unsigned copies,
                           const nconv_algo **out);
/* The benchmark policy's choice for (c, dir): the cached winner, else the fastest of the
 * applicable algorithms whose workspace (with `copies`, at `threads`) is at most that of
 * `heuristic`, timed on operands of its own (zeros, channels-last where copies has no copy). */
nconv_status nconv__choose_timed(nconv_context *ctx, const nconv_core *c, nconv_direction dir, unsigned copies,
                                 int threads, const nconv_algo *heuristic, const nconv_algo **out);
/* The algorithm a declined run of a goes on to: the next applicable one of the list that
 * does not decline for reason (NCONV__DECLINE_*), and for an accumulating bwd_w one that
 * accumulates (the reference at worst). */
const nconv_algo *nconv__algo_next(const nconv_algo *a, const nconv_core *c, nconv_direction dir,
                                   nconv_status reason, int accumulate);
/* The workspace of a and of every algorithm its declined runs may go on to. */
size_t nconv__algo_need(const nconv_algo *a, const nconv_core *c, nconv_direction dir, int threads,
                        unsigned copies);
int nconv__ctx_threads(const nconv_context *ctx);
nconv_pool *nconv__ctx_pool(nconv_context *ctx);
/* Memory through the context's allocator (ctx may be NULL: malloc / free). */
void *nconv__alloc(nconv_context *ctx, size_t bytes);
void nconv__free(nconv_context *ctx, void *p);
/* NCONV_OUT_OF_MEMORY with a message when a call that would allocate `bytes`
 * exceeds ctx's memory limit; checked before allocating. */
nconv_status nconv__check_memory(const nconv_context *ctx, size_t bytes, const char *what);
/* nconv_workspace_size for a call that must fit in `room` bytes (0: no bound but the
 * context's memory limit): fewer threads where theirs would not (execute.c, fit_threads). */
nconv_status nconv__workspace_within(nconv_context *ctx, const nconv_problem *p, nconv_op op,
                                     const nconv_epilogue *epi, size_t room, size_t *bytes);
/* NCONV_INVALID_ARGUMENT when the environment's NCONV_MAX_ISA names no ISA. */
nconv_status nconv__check_isa(void);
/* Workspace memory of `size` bytes, reused across calls of one context
 * (ctx may be NULL: plain malloc / free). Release gives back the size asked. */
void *nconv__ctx_ws_acquire(nconv_context *ctx, size_t size);
void nconv__ctx_ws_release(nconv_context *ctx, void *p, size_t size);
/* The algorithm forced on ctx, or NULL. */
const nconv_algo *nconv__ctx_forced(const nconv_context *ctx);
int nconv__ctx_benchmarks(const nconv_context *ctx); /* whether the benchmark policy is set */

/* Memory-bounded execution (split.c): a core call as pieces, runs of nb images
 * and, with axis >= 0, bands of `rows` rows along spatial axis `axis` (output
 * rows for fwd and bwd_w, input rows for bwd_d). */
typedef struct nconv_split {
    int64_t nb;
    int axis;
    int64_t rows;
} nconv_split;
/* A piece: its core, first image, and first row along the axis of x and of y. */
typedef struct nconv_piece {
    nconv_core c;
    int64_t n0, x0, y0;
} nconv_piece;
/* The coarsest split whose workspace for algorithm a at one thread, with the
 * channels-last copies in `copies`, fits budget (none fits: the whole call),
 * f32 only; returns that workspace, and in *least the same, or where none
 * fits the smallest of any split's. */
size_t nconv__split_choose(const nconv_algo *a, const nconv_core *c, nconv_direction dir, unsigned copies,
                           size_t budget, nconv_split *s, size_t *least);
/* The workspace of split s for algorithm a at `threads`. */
size_t nconv__split_need(const nconv_algo *a, const nconv_core *c, nconv_direction dir, const nconv_split *s,
                         int threads, unsigned copies);
int64_t nconv__split_pieces(const nconv_core *c, nconv_direction dir, const nconv_split *s);
/* 0 if piece i is empty (a split_choose result has none). */
int nconv__split_piece(const nconv_core *c, nconv_direction dir, const nconv_split *s, int64_t i, nconv_piece *p);
/* v's images n0 .. n0 + nn and, with axis >= 0, rows r0 .. r0 + nr along it. */
void nconv__piece_view(const nconv_view *v, int64_t n0, int64_t nn, int axis, int64_t r0, int64_t nr, nconv_view *out);
size_t nconv__ctx_memory_limit(const nconv_context *ctx); /* 0: none */
/* What the memory limit leaves beside `held` bytes (at least 1: a limit stays one; 0: none). */
size_t nconv__ctx_room(const nconv_context *ctx, size_t held);

/* ------------------------------------------------------------------- CUDA */

/* A CUDA context's state (src/cuda; a build without NCONV_CUDNN has stubs that refuse). */
typedef struct nconv_cuda nconv_cuda;
nconv_status nconv__cuda_open(int device, nconv_cuda **out);
void nconv__cuda_close(nconv_context *ctx, nconv_cuda *c);
/* Frees the device memory and cuDNN plans the context keeps. */
void nconv__cuda_release(nconv_context *ctx, nconv_cuda *c);
int nconv__cuda_device(const nconv_cuda *c);
nconv_status nconv__cuda_set_stream(nconv_cuda *c, void *stream);
void nconv__cuda_set_tf32(nconv_cuda *c, int allow);
nconv_cuda *nconv__ctx_cuda(const nconv_context *ctx); /* NULL: a CPU context (or none) */
int nconv__ctx_has_allocator(const nconv_context *ctx);
int nconv__ctx_deterministic(const nconv_context *ctx);
/* NCONV_UNSUPPORTED naming `call` when ctx is a CUDA context, which runs only the calls
 * that have a CUDA path. */
nconv_status nconv__ctx_cpu_only(const nconv_context *ctx, const char *call);
/* Device memory for a composition's temporary (NULL, with the error set, on failure). */
void *nconv__cuda_temp(nconv_context *ctx, size_t bytes);
void nconv__cuda_temp_free(nconv_context *ctx, void *p);
/* Elementwise on device tensors of logical shape `shape` (rank ndims + 2, activation or weight
 * order) of p's dtype: out = 0 where mask <= 0, else a (relu's gradient mask, as torch's
 * threshold_backward; mask given), or
 * out = a + bias + alpha * z (bias, z optional); a NULL reads zeros. */
nconv_status nconv__cuda_pointwise(nconv_context *ctx, const nconv_problem *p, const int64_t *shape,
                                   const nconv_tensor *a, const nconv_tensor *mask, const nconv_tensor *bias,
                                   const nconv_tensor *z, double alpha, const nconv_tensor *out);
/* The compositions on a CUDA context (compose.c), after the public call's checks. */
nconv_status nconv__cuda_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_tensor *x,
                                         const nconv_tensor *w, const nconv_tensor *dy, const nconv_tensor *ggx,
                                         const nconv_tensor *ggw, const nconv_tensor *ggb, const nconv_tensor *ggy,
                                         const nconv_tensor *gx, const nconv_tensor *gw);
nconv_status nconv__cuda_forward_jvp(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                     const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                                     const nconv_tensor *z, const nconv_tensor *tx, const nconv_tensor *tw,
                                     const nconv_tensor *tb, const nconv_tensor *tz, const nconv_tensor *y,
                                     const nconv_tensor *ty);

/* ------------------------------------------------------------------ plans */

/* The forward or the backward of one problem, planned (execute.c): shapes, and per
 * core direction it runs the algorithm, the split and the channels-last copies the
 * workspace covers. */
typedef struct nconv_oplan {
    nconv_problem p;
    nconv_core c;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    int backward;
    int relu;           /* the forward's epilogue */
    double alpha;
    unsigned outputs;   /* backward: NCONV_OUT_DX .. NCONV_OUT_DZ */
    const nconv_algo *algo[3]; /* NULL: the direction does not run */
    nconv_split split[3];
    unsigned copies[3];
    int threads;        /* see fit_threads */
    size_t need;        /* the workspace */
    size_t least;       /* the workspace of the smallest pieces at one thread */
    const struct nconv_kernels *k;
} nconv_oplan;

nconv_direction nconv__oplan_fwd_dir(const nconv_oplan *o); /* the core direction of the forward */
nconv_direction nconv__oplan_dx_dir(const nconv_oplan *o);  /* of backward's dx */
/* Validates p and epi (NULL: identity) into o; backward: outputs are the NCONV_OUT_DX .. DZ
 * bits it may compute. */
nconv_status nconv__oplan_prepare(nconv_oplan *o, const nconv_problem *p, const nconv_epilogue *epi, int backward,
                                  unsigned outputs);
/* Chooses (keep: keeps o->algo) each direction's algorithm, then its split, for the
 * channels-last copies in copies[dir]; threads within room bytes (0: no bound). */
nconv_status nconv__oplan_choose(nconv_context *ctx, nconv_oplan *o, const unsigned copies[3], size_t room, int keep);
/* The copies a plan for activations in `layout` covers. */
void nconv__layout_copies(const nconv_oplan *o, nconv_layout layout, int with_z, unsigned copies[3]);

/* The operands of a forward, checked, as views. */
typedef struct nconv_fwd_ops {
    nconv_view x, w, y, bias, z;
    nconv_epi e; /* points into this struct */
} nconv_fwd_ops;
nconv_status nconv__fwd_ops(const nconv_oplan *o, const nconv_tensor *x, const nconv_tensor *w,
                            const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *y, nconv_fwd_ops *v);
/* The copies the views need per core direction; whether the plan covers them. */
void nconv__fwd_copies(const nconv_oplan *o, const nconv_fwd_ops *v, unsigned copies[3]);
nconv_status nconv__fwd_check_layout(const nconv_oplan *o, const nconv_fwd_ops *v);
/* Runs the planned forward (packed: the plan's packed weights, or NULL). */
nconv_status nconv__fwd_run(nconv_context *ctx, const nconv_oplan *o, const nconv_fwd_ops *v, const void *packed,
                            void *workspace, size_t workspace_size);

typedef struct nconv_bwd_ops {
    unsigned outputs; /* NCONV_OUT_* of the given outputs */
    nconv_view dy, x, w, y, dx, dw, db, dz;
} nconv_bwd_ops;
nconv_status nconv__bwd_ops(const nconv_oplan *o, const nconv_tensor *x, const nconv_tensor *w,
                            const nconv_tensor *y, const nconv_tensor *dy, const nconv_tensor *dx,
                            const nconv_tensor *dw, const nconv_tensor *db, const nconv_tensor *dz, nconv_bwd_ops *v);
void nconv__bwd_copies(const nconv_oplan *o, const nconv_bwd_ops *v, unsigned copies[3]);
nconv_status nconv__bwd_check_layout(const nconv_oplan *o, const nconv_bwd_ops *v);
nconv_status nconv__bwd_run(nconv_context *ctx, const nconv_oplan *o, const nconv_bwd_ops *v, const void *packed,
                            void *workspace, size_t workspace_size);

/* Forward and backward on a CUDA context (ctx's device memory operands, checked here). */
nconv_status nconv__cuda_forward(nconv_context *ctx, const nconv_oplan *o, const nconv_fwd_ops *v, void *workspace,
                                 size_t workspace_size);
nconv_status nconv__cuda_backward(nconv_context *ctx, const nconv_oplan *o, const nconv_bwd_ops *v, void *workspace,
                                  size_t workspace_size);

/* The bytes of direction dir's packed weights (0: its algorithm reads w in every run) and
 * in *scratch the scratch packing takes; the packing itself, of w into dst. */
size_t nconv__oplan_pack_size(const nconv_oplan *o, nconv_direction dir, size_t *scratch);
nconv_status nconv__oplan_pack(nconv_context *ctx, const nconv_oplan *o, nconv_direction dir, const nconv_tensor *w,
                               void *dst, void *scratch, size_t scratch_size);

struct nconv_plan {
    nconv_context *ctx;
    nconv_plan_desc desc;
    nconv_problem p;
    nconv_oplan f, b;     /* forward (double backward: ggy's terms); backward (double backward: gx, gw) */
    size_t tmp;           /* double backward: bytes of the temporary conv(x, ggw), in the workspace */
    size_t need;          /* the workspace */
    /* The weights given to the plan: a dense copy of w and bias, and the packed form of w
     * for core direction d where its algorithm packs (packed[d]), in one block. */
    void *wmem;
    int has_w, has_bias;
    nconv_tensor w, bias;
    const void *packed[3];
    nconv_dtype complex_dtype; /* a complex plan's dtype (its problem p is the real one); else 0 */
};

/* NCONV_INVALID_ARGUMENT naming the first of the outputs `given` that the plan was made
 * without (`planned`: its NCONV_OUT_* bits); NCONV_OK where there is none. */
nconv_status nconv__check_outputs(unsigned given, unsigned planned);
/* The plan calls of a plan of a real problem (api.c). */
nconv_status nconv__plan_set_weights_real(nconv_plan *plan, const nconv_tensor *w, const nconv_tensor *bias);
nconv_status nconv__plan_execute_real(const nconv_plan *plan, const nconv_variant_pack *vp);

/* Complex problems on the real engine (complex.c): the real problem of the same
 * convolution (channels doubled, real and imaginary parts interleaved), validated with
 * the epilogue (no relu); and each public call of a complex problem, which those
 * calls hand over to (a NULL batch: the unbatched call). */
int nconv__is_complex(nconv_dtype dt);
static inline int nconv__is_16bit(nconv_dtype dt) { return dt == NCONV_F16 || dt == NCONV_BF16; }
nconv_dtype nconv__real_dtype(nconv_dtype dt); /* f32 for c64, f64 for c128; others themselves */
nconv_status nconv__complex_problem(const nconv_problem *p, const nconv_epilogue *epi, nconv_problem *real);
nconv_status nconv__complex_forward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                    const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                    const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *y,
                                    void *workspace, size_t workspace_size);
nconv_status nconv__complex_backward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                     const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                     const nconv_tensor *y, const nconv_tensor *dy, const nconv_tensor *dx,
                                     const nconv_tensor *dw, const nconv_tensor *db, const nconv_tensor *dz,
                                     void *workspace, size_t workspace_size);
nconv_status nconv__complex_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_double_batch *bt,
                                            const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *dy,
                                            const nconv_tensor *ggx, const nconv_tensor *ggw, const nconv_tensor *ggb,
                                            const nconv_tensor *ggy, const nconv_tensor *gx, const nconv_tensor *gw);
nconv_status nconv__complex_forward_jvp(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                        const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                                        const nconv_tensor *z, const nconv_tensor *tx, const nconv_tensor *tw,
                                        const nconv_tensor *tb, const nconv_tensor *tz, const nconv_tensor *y,
                                        const nconv_tensor *ty);
nconv_status nconv__complex_plan_set_weights(nconv_plan *plan, const nconv_tensor *w, const nconv_tensor *bias);
nconv_status nconv__complex_plan_execute(const nconv_plan *plan, const nconv_variant_pack *vp);

/* Double backward on a plan (derivatives.c). */
nconv_status nconv__double_run(const nconv_plan *pl, const nconv_variant_pack *vp);

/* Reference kernels: dense C-order f64 arrays in the core shapes; taps is
 * scratch for k[0] + k[1] + k[2] int64 indices. */
void nconv__ref_fwd(const nconv_core *c, const double *x, const double *w, double *y, int64_t *taps);
void nconv__ref_bwd_d(const nconv_core *c, const double *dy, const double *w, double *dx, int64_t *taps);
void nconv__ref_bwd_w(const nconv_core *c, const double *x, const double *dy, double *dw, int64_t *taps);

#endif
