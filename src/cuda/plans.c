/*
 * Execution plans: for each cuDNN graph, the engine chosen once under the context's policy,
 * determinism and TF32 settings and kept in its cache, as PyTorch's cuDNN frontend keys its
 * plans by the convolution's parameters; and their execution on a call's pointers.
 */
#include "cuda_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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
                    (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
                     notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
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
cudnnStatus_t nconv__cuda_execute(const nconv_cuda_lib *lib, cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
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
    void *w = need ? nconv__cuda_dev_alloc(ctx, c, (size_t)need) : NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    int good = (!need || w) && lib->EventCreate(&t0) == cudaSuccess && lib->EventCreate(&t1) == cudaSuccess;
    float runs[3] = {0, 0, 0};
    for (int r = 0; good && r < 3; r++)
        good = lib->EventRecord(t0, c->stream) == cudaSuccess &&
               nconv__cuda_execute(lib, c->handle, plan, s, tmp, w) == CUDNN_STATUS_SUCCESS &&
               lib->EventRecord(t1, c->stream) == cudaSuccess && lib->EventSynchronize(t1) == cudaSuccess &&
               lib->EventElapsedTime(&runs[r], t0, t1) == cudaSuccess;
    if (t0) lib->EventDestroy(t0);
    if (t1) lib->EventDestroy(t1);
    nconv__cuda_dev_free(ctx, c, w);
    if (!good) return -1;
    const float lo = runs[0] < runs[1] ? runs[0] : runs[1], hi = runs[0] < runs[1] ? runs[1] : runs[0];
    return runs[2] < lo ? lo : runs[2] > hi ? hi : runs[2];
}

unsigned nconv__cuda_settings(const nconv_context *ctx, const nconv_cuda *c) {
    return (unsigned)nconv__ctx_deterministic(ctx) | (unsigned)c->allow_tf32 << 1 |
           (unsigned)nconv__ctx_benchmarks(ctx) << 2;
}

cached_plan *nconv__cuda_cache_find(nconv_cuda *c, const nconv_gspec *key, unsigned settings) {
    for (size_t i = 0; i < c->n; i++)
        if (c->cache[i].settings == settings && !memcmp(&c->cache[i].key, key, sizeof *key)) return &c->cache[i];
    return NULL;
}

/* The execution plan of step s's graph: cached, else built, its engine chosen (the
 * heuristics' first allowed config that finalizes within `room` bytes of workspace; under
 * the benchmark policy the fastest of them, timed on the call's operands) and cached.
 * Called with c->lock held. */
nconv_status nconv__cuda_plan_of(nconv_context *ctx, nconv_cuda *c, const step *s, void *const tmp[NTMP],
                                 size_t room, cached_plan *out) {
    const nconv_cuda_lib *lib = c->lib;
    const unsigned settings = nconv__cuda_settings(ctx, c);
    cached_plan *hit = nconv__cuda_cache_find(c, &s->g, settings);
    if (hit && !hit->plan) /* remembered: no engine takes this graph */
        return nconv__error(NCONV_UNSUPPORTED, "nconv: cuDNN %zu has no engine for the %s step",
                            lib->cudnnGetVersion(), s->name);
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
    /* Engines with precompiled kernels first; those that compile at run time (seconds for each
     * new shape) only where none of them serves, and never for a fused epilogue, which the
     * convolution and nconv's epilogue kernel compute as well. */
    const int passes = s->g.fused ? 1 : 2;
    for (int pass = 1; pass <= passes && !e.plan; pass++)
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
        if (ws_least < 0) c->cache[c->n++] = e; /* no engine at all: remembered, not asked again */
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
