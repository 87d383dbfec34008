/*
 * Planning: the ordered algorithm list, the context (threads, determinism,
 * policy) and its plan cache. The cache is the only shared mutable state in
 * the library; a mutex guards it.
 */
#include "internal.h"
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Preference order for the heuristic policy; the reference accepts
 * everything and comes last. */
static const nconv_algo *const algos[] = {
    &nconv_algo_depthwise_flat, &nconv_algo_depthwise_planes, &nconv_algo_depthwise, &nconv_algo_grouped,
    &nconv_algo_winograd,       &nconv_algo_stem,             &nconv_algo_igemm_planes, &nconv_algo_igemm_cols,
    &nconv_algo_igemm,          &nconv_algo_gemm,             &nconv_algo_ref};

int nconv__algo_count(void) { return (int)(sizeof algos / sizeof algos[0]); }
const nconv_algo *nconv__algo_at(int i) { return i >= 0 && i < nconv__algo_count() ? algos[i] : NULL; }

const nconv_algo *nconv__algo_find(const char *name) {
    for (int i = 0; name && i < nconv__algo_count(); i++)
        if (!strcmp(algos[i]->name, name)) return algos[i];
    return NULL;
}

int nconv_algorithm_count(void) { return nconv__algo_count(); }
const char *nconv_algorithm_name(int index) {
    const nconv_algo *a = nconv__algo_at(index);
    return a ? a->name : NULL;
}

typedef struct cache_entry {
    nconv_core key;
    nconv_direction dir;
    const nconv_algo *algo;
} cache_entry;

struct nconv_context {
    int threads;
    int deterministic;
    nconv_algo_policy policy;
    const nconv_algo *forced;
    pthread_mutex_t lock;
    cache_entry *cache;
    size_t n, cap;
    void *ws;        /* a workspace kept between calls (NULL while lent out) */
    size_t ws_size;
    nconv_allocator alloc;      /* alloc == NULL: malloc / free */
    nconv_allocator self_alloc; /* what allocated the context itself */
    size_t mem_limit;      /* 0: none */
    nconv_pool pool;       /* threads - 1 workers */
    nconv_cuda *cuda;      /* a CUDA context's device, stream, cuDNN handle and plans; NULL: CPU */
};

nconv_cuda *nconv__ctx_cuda(const nconv_context *ctx) { return ctx ? ctx->cuda : NULL; }
int nconv__ctx_has_allocator(const nconv_context *ctx) { return ctx && ctx->alloc.alloc; }
int nconv__ctx_deterministic(const nconv_context *ctx) { return !ctx || ctx->deterministic; }

nconv_status nconv__ctx_cpu_only(const nconv_context *ctx, const char *call) {
    if (!ctx || !ctx->cuda) return NCONV_OK;
    return nconv__error(NCONV_UNSUPPORTED, "nconv: %s on a CUDA context (device %d): not available (docs/cuda.md)",
                        call, nconv__cuda_device(ctx->cuda));
}

void *nconv__alloc(nconv_context *ctx, size_t bytes) {
    if (!bytes) bytes = 1;
    if (ctx && ctx->alloc.alloc) return ctx->alloc.alloc(ctx->alloc.user, bytes);
    return malloc(bytes);
}

void nconv__free(nconv_context *ctx, void *p) {
    if (!p) return;
    if (ctx && ctx->alloc.alloc) ctx->alloc.free(ctx->alloc.user, p);
    else free(p);
}

nconv_status nconv__check_memory(const nconv_context *ctx, size_t bytes, const char *what) {
    if (ctx && ctx->mem_limit && bytes > ctx->mem_limit)
        return nconv__error(NCONV_OUT_OF_MEMORY,
                            "nconv: %s needs %zu bytes, more than the context's memory limit of %zu bytes", what, bytes,
                            ctx->mem_limit);
    return NCONV_OK;
}

nconv_status nconv__check_isa(void) {
    const char *bad = nconv__isa_cap_invalid();
    return bad ? nconv__error(NCONV_INVALID_ARGUMENT,
                              "nconv: environment NCONV_MAX_ISA = '%s': expected generic, avx2, avx512 or avx512_bf16",
                              bad)
               : NCONV_OK;
}

static nconv_status check_allocator(const nconv_allocator *a) {
    if (!a || (a->alloc && a->free)) return NCONV_OK;
    return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: allocator->%s is NULL", a->alloc ? "free" : "alloc");
}

nconv_status nconv_context_create_with_allocator(nconv_context **ctx, const nconv_allocator *allocator) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    nconv_status st = check_allocator(allocator);
    if (st || (st = nconv__check_isa())) return st;
    nconv_context *c = allocator ? allocator->alloc(allocator->user, sizeof *c) : malloc(sizeof *c);
    if (!c) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a context");
    memset(c, 0, sizeof *c);
    c->threads = 1;
    c->deterministic = 1;
    c->policy = NCONV_POLICY_HEURISTIC;
    if (allocator) c->alloc = c->self_alloc = *allocator;
    if (pthread_mutex_init(&c->lock, NULL)) {
        if (allocator) allocator->free(allocator->user, c);
        else free(c);
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot create the context's mutex");
    }
    if (nconv__pool_init(&c->pool)) {
        pthread_mutex_destroy(&c->lock);
        if (allocator) allocator->free(allocator->user, c);
        else free(c);
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot create the context's thread pool");
    }
    *ctx = c;
    return NCONV_OK;
}

nconv_status nconv_context_create(nconv_context **ctx) { return nconv_context_create_with_allocator(ctx, NULL); }

nconv_status nconv_context_create_cuda(nconv_context **ctx, int device) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    nconv_cuda *cuda;
    nconv_status st = nconv__cuda_open(device, &cuda);
    if (st) return st;
    if ((st = nconv_context_create(ctx))) {
        nconv__cuda_close(NULL, cuda);
        return st;
    }
    (*ctx)->cuda = cuda;
    return NCONV_OK;
}

nconv_status nconv_context_device(const nconv_context *ctx, int *device) {
    if (!device) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: device is NULL");
    *device = ctx && ctx->cuda ? nconv__cuda_device(ctx->cuda) : -1;
    return NCONV_OK;
}

static nconv_status need_cuda(const nconv_context *ctx, const char *call) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    if (!ctx->cuda)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: %s: ctx is a CPU context (see nconv_context_create_cuda)",
                            call);
    return NCONV_OK;
}

nconv_status nconv_context_set_stream(nconv_context *ctx, void *stream) {
    nconv_status st = need_cuda(ctx, "nconv_context_set_stream");
    return st ? st : nconv__cuda_set_stream(ctx->cuda, stream);
}

nconv_status nconv_context_set_allow_tf32(nconv_context *ctx, int allow) {
    nconv_status st = need_cuda(ctx, "nconv_context_set_allow_tf32");
    if (!st) nconv__cuda_set_tf32(ctx->cuda, allow);
    return st;
}

nconv_status nconv_context_destroy(nconv_context *ctx) {
    if (!ctx) return NCONV_OK;
    nconv__cuda_close(ctx, ctx->cuda);
    nconv__pool_destroy(&ctx->pool);
    pthread_mutex_destroy(&ctx->lock);
    nconv__free(ctx, ctx->cache);
    nconv__free(ctx, ctx->ws);
    if (ctx->self_alloc.free) ctx->self_alloc.free(ctx->self_alloc.user, ctx);
    else free(ctx);
    return NCONV_OK;
}

nconv_status nconv_context_set_allocator(nconv_context *ctx, const nconv_allocator *allocator) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    nconv_status st = check_allocator(allocator);
    if (st) return st;
    /* What the context holds goes back to the allocator that gave it. */
    nconv__cuda_release(ctx, ctx->cuda);
    nconv__free(ctx, ctx->cache);
    nconv__free(ctx, ctx->ws);
    ctx->cache = NULL, ctx->n = ctx->cap = 0;
    ctx->ws = NULL, ctx->ws_size = 0;
    if (allocator) ctx->alloc = *allocator;
    else memset(&ctx->alloc, 0, sizeof ctx->alloc);
    return NCONV_OK;
}

size_t nconv__ctx_memory_limit(const nconv_context *ctx) { return ctx ? ctx->mem_limit : 0; }

size_t nconv__ctx_room(const nconv_context *ctx, size_t held) {
    const size_t limit = nconv__ctx_memory_limit(ctx);
    return limit > held ? limit - held : limit ? 1 : 0;
}

nconv_status nconv_context_set_memory_limit(nconv_context *ctx, size_t bytes) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    ctx->mem_limit = bytes;
    return NCONV_OK;
}

nconv_status nconv_context_set_threads(nconv_context *ctx, int threads) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    if (threads < 1 || threads > 1024)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: threads = %d: must be 1..1024", threads);
    ctx->threads = threads;
    nconv__pool_resize(&ctx->pool, threads - 1);
    return NCONV_OK;
}

nconv_status nconv_context_set_deterministic(nconv_context *ctx, int deterministic) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    if (deterministic != 0 && deterministic != 1)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: deterministic = %d: must be 0 or 1", deterministic);
    ctx->deterministic = deterministic;
    return NCONV_OK;
}

nconv_status nconv_context_set_policy(nconv_context *ctx, nconv_algo_policy policy) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    if ((unsigned)policy > NCONV_POLICY_FORCED)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: policy = %d: not a policy", (int)policy);
    if (policy == NCONV_POLICY_FORCED && !ctx->forced)
        return nconv__error(NCONV_INVALID_ARGUMENT,
                            "nconv: policy = forced: name the algorithm with nconv_context_set_algorithm");
    ctx->policy = policy;
    return NCONV_OK;
}

nconv_status nconv_context_set_algorithm(nconv_context *ctx, const char *name) {
    if (!ctx) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: ctx is NULL");
    if (!name || !strcmp(name, "auto")) {
        ctx->forced = NULL;
        ctx->policy = NCONV_POLICY_HEURISTIC;
        return NCONV_OK;
    }
    const nconv_algo *a = nconv__algo_find(name);
    if (!a) {
        char list[256] = "";
        for (int i = 0; i < nconv__algo_count(); i++) {
            strncat(list, " ", sizeof list - strlen(list) - 1);
            strncat(list, algos[i]->name, sizeof list - strlen(list) - 1);
        }
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: algorithm = '%s': unknown (known: auto%s)", name, list);
    }
    ctx->forced = a;
    ctx->policy = NCONV_POLICY_FORCED;
    return NCONV_OK;
}

int nconv__ctx_threads(const nconv_context *ctx) { return ctx ? ctx->threads : 1; }
nconv_pool *nconv__ctx_pool(nconv_context *ctx) { return ctx ? &ctx->pool : NULL; }

/* Fresh large allocations cost page faults on every call; a context keeps
 * its last workspace for the next call. Concurrent callers of one context
 * get their own memory while it is lent out. */
void *nconv__ctx_ws_acquire(nconv_context *ctx, size_t size) {
    void *p = NULL;
    if (ctx) {
        pthread_mutex_lock(&ctx->lock);
        if (ctx->ws && ctx->ws_size >= size) {
            p = ctx->ws;
            ctx->ws = NULL;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    return p ? p : nconv__alloc(ctx, size);
}

void nconv__ctx_ws_release(nconv_context *ctx, void *p, size_t size) {
    if (!p) return;
    if (ctx) {
        pthread_mutex_lock(&ctx->lock);
        if (!ctx->ws || ctx->ws_size < size) {
            void *old = ctx->ws;
            ctx->ws = p, ctx->ws_size = size, p = old;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    nconv__free(ctx, p);
}

const nconv_algo *nconv__ctx_forced(const nconv_context *ctx) {
    return ctx && ctx->policy == NCONV_POLICY_FORCED ? ctx->forced : NULL;
}

int nconv__ctx_benchmarks(const nconv_context *ctx) { return ctx && ctx->policy == NCONV_POLICY_BENCHMARK; }

static const nconv_algo *cache_get(nconv_context *ctx, const nconv_core *c, nconv_direction dir) {
    const nconv_algo *a = NULL;
    pthread_mutex_lock(&ctx->lock);
    for (size_t i = 0; i < ctx->n && !a; i++)
        if (ctx->cache[i].dir == dir && !memcmp(&ctx->cache[i].key, c, sizeof *c)) a = ctx->cache[i].algo;
    pthread_mutex_unlock(&ctx->lock);
    return a;
}

static void cache_put(nconv_context *ctx, const nconv_core *c, nconv_direction dir, const nconv_algo *a) {
    pthread_mutex_lock(&ctx->lock);
    if (ctx->n == ctx->cap) {
        size_t cap = ctx->cap ? 2 * ctx->cap : 16;
        cache_entry *grown = nconv__alloc(ctx, cap * sizeof *grown);
        if (grown) { /* without room the winner is simply not remembered */
            if (ctx->n) memcpy(grown, ctx->cache, ctx->n * sizeof *grown);
            nconv__free(ctx, ctx->cache);
            ctx->cache = grown;
            ctx->cap = cap;
        }
    }
    if (ctx->n < ctx->cap) ctx->cache[ctx->n++] = (cache_entry){*c, dir, a};
    pthread_mutex_unlock(&ctx->lock);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The first applicable algorithm the heuristic prefers for operands planned with `copies`
 * (the reference always applies). */
static const nconv_algo *heuristic(const nconv_core *c, nconv_direction dir, unsigned copies) {
    for (int i = 0; i < nconv__algo_count(); i++)
        if (algos[i]->applies(c, dir, NULL) && (!algos[i]->preferred || algos[i]->preferred(c, dir)) &&
            (!algos[i]->suits || algos[i]->suits(copies)))
            return algos[i];
    return NULL;
}

nconv_status nconv__choose(nconv_context *ctx, const nconv_core *c, nconv_direction dir, unsigned copies,
                           const nconv_algo **out) {
    if (ctx && ctx->policy == NCONV_POLICY_FORCED) {
        const char *why = "";
        if (!ctx->forced->applies(c, dir, &why))
            return nconv__error(NCONV_UNSUPPORTED, "nconv: algorithm = '%s' does not apply: %s", ctx->forced->name, why);
        *out = ctx->forced;
        return NCONV_OK;
    }
    const nconv_algo *a = ctx && ctx->policy == NCONV_POLICY_BENCHMARK ? cache_get(ctx, c, dir) : NULL;
    if ((*out = a ? a : heuristic(c, dir, copies))) return NCONV_OK;
    return nconv__error(NCONV_INTERNAL_ERROR, "nconv: no algorithm applies (the reference always should)");
}

static int index_of(const nconv_algo *a) {
    for (int i = 0; i < nconv__algo_count(); i++)
        if (algos[i] == a) return i;
    return nconv__algo_count();
}

const nconv_algo *nconv__algo_next(const nconv_algo *a, const nconv_core *c, nconv_direction dir, nconv_status reason,
                                   int accumulate) {
    const unsigned bit = 1u << ((int)reason - NCONV__DECLINE_W);
    for (int i = index_of(a) + 1; i < nconv__algo_count(); i++)
        if (!(algos[i]->declines[dir] & bit) && (!accumulate || algos[i]->accumulates) &&
            algos[i]->applies(c, dir, NULL))
            return algos[i];
    return &nconv_algo_ref;
}

size_t nconv__algo_need(const nconv_algo *a, const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    size_t need = a->workspace(c, dir, threads, copies);
    for (int r = NCONV__DECLINE_W; r <= NCONV__DECLINE_OWN; r++) {
        if (!(a->declines[dir] & (1u << (r - NCONV__DECLINE_W)))) continue;
        const nconv_status reason = (nconv_status)r;
        /* with and without accumulation: a piece of either kind may decline */
        for (int acc = 0; acc < 2; acc++) {
            const size_t n = nconv__algo_need(nconv__algo_next(a, c, dir, reason, acc), c, dir, threads, copies);
            if (n > need) need = n;
        }
    }
    return need;
}

/* A block of the context's allocator: ws bytes of workspace, then dense zeros of the core's
 * x, w and y (channels-last where copies has no copy of them) at *x, *w, *y; NULL where it
 * would break the memory limit or the allocation fails. */
static void *trial_operands(nconv_context *ctx, const nconv_core *c, unsigned copies, size_t ws, nconv_view *x,
                            nconv_view *w, nconv_view *y) {
    const size_t es = nconv_dtype_size(c->dt);
    const int64_t kk[3] = {c->k[0], c->k[1], c->k[2]};
    struct { nconv_view *v; int64_t a, b; const int64_t *sp; int nxc; } ops[3] = {
        {x, c->N, c->C, c->in, !(copies & NCONV_COPY_X)}, {w, c->O, c->C / c->G, kk, 0},
        {y, c->N, c->O, c->out, !(copies & NCONV_COPY_Y)}};
    size_t total = nconv__ws_round(ws) + 64, at[3]; /* 64: the arena's alignment slack */
    for (int i = 0; i < 3; i++) {
        at[i] = total;
        total += nconv__ws_round(es * (size_t)(ops[i].a * ops[i].b * ops[i].sp[0] * ops[i].sp[1] * ops[i].sp[2]));
    }
    const size_t limit = nconv__ctx_memory_limit(ctx);
    if (limit && total > limit) return NULL;
    char *mem = nconv__alloc(ctx, total);
    if (!mem) return NULL;
    memset(mem, 0, total);
    for (int i = 0; i < 3; i++) {
        nconv_view *v = ops[i].v;
        memset(v, 0, sizeof *v);
        v->data = mem + at[i], v->dt = c->dt, v->rank = 5;
        v->shape[0] = ops[i].a, v->shape[1] = ops[i].b;
        for (int d = 0; d < 3; d++) v->shape[2 + d] = ops[i].sp[d];
        /* C order, or channels innermost */
        static const int nxc_order[5] = {1, 4, 3, 2, 0}, nc_order[5] = {4, 3, 2, 1, 0};
        int64_t st = 1;
        for (int k = 0; k < 5; k++) {
            const int d = ops[i].nxc ? nxc_order[k] : nc_order[k];
            v->stride[d] = st, st *= v->shape[d];
        }
    }
    return mem;
}

nconv_status nconv__choose_timed(nconv_context *ctx, const nconv_core *c, nconv_direction dir, unsigned copies,
                                 int threads, const nconv_algo *h, const nconv_algo **out) {
    const nconv_algo *a = cache_get(ctx, c, dir);
    if (a) {
        *out = a;
        return NCONV_OK;
    }
    /* The candidates: what fits the heuristic's workspace */
    const size_t room = nconv__algo_need(h, c, dir, threads, copies);
    nconv_view x, w, y;
    void *mem = trial_operands(ctx, c, copies, room, &x, &w, &y);
    if (!mem) { /* no room for trials: the heuristic's choice, not remembered */
        *out = h;
        return NCONV_OK;
    }
    nconv_arena arena = {mem, room + 64, 0};
    const nconv_exec e = {c, dir, &x, &w, &y, NULL, &arena, threads, &ctx->pool, NULL, NULL, 0, nconv__kernels(), NULL,
                          NULL, c};
    double best = 0;
    nconv_status st = NCONV_OK;
    for (int i = 0; i < nconv__algo_count() && !st; i++) {
        if (!algos[i]->applies(c, dir, NULL)) continue;
        if (algos[i] != h && nconv__algo_need(algos[i], c, dir, threads, copies) > room) continue;
        const double t0 = now_s();
        st = algos[i]->run(&e);
        const double t = now_s() - t0;
        arena.used = 0;
        if (nconv__declined(st)) { /* the trial's layout, say: not a candidate */
            st = NCONV_OK;
            continue;
        }
        if (!st && (!a || t < best)) a = algos[i], best = t;
    }
    nconv__free(ctx, mem);
    if (st) return st;
    cache_put(ctx, c, dir, a);
    *out = a;
    return NCONV_OK;
}
