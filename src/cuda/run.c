/*
 * Forward and backward on a CUDA context: the operands checked, the call's steps planned
 * (steps.c, plans.c) and run, with the device memory they need; and the elementwise calls
 * the compositions (compose.c) use.
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <string.h>

static nconv_status check_device(const nconv_cuda *c, const char *name, const nconv_view *v) {
    if (!v->data || !nconv__view_numel(v)) return NCONV_OK;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    const cudaError_t e = c->lib->PointerGetAttributes(&a, v->data);
    if (e != cudaSuccess) {
        c->lib->GetLastError();
        return nconv__cuda_fail(c->lib, e, "cudaPointerGetAttributes");
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
    return e == cudaSuccess ? NCONV_OK : nconv__cuda_fail(c->lib, e, "cudaMemsetAsync");
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
    /* the command line on the device: `nconv check --device cuda ...` */
    const char *rest = strncmp(cli, "nconv check", 11) ? cli : cli + 11;
    snprintf(what, sizeof what, "executing the %s step of `nconv check --device cuda%s`", s->name, rest);
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
            nconv__cuda_dev_free(ctx, c, bench_tmp);
            bench_bytes = 0;
            if (!(bench_tmp = nconv__cuda_dev_alloc(ctx, c, tmp_bytes))) {
                st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate the timing temporaries");
                break;
            }
            bench_bytes = tmp_bytes;
        }
        if (bench_tmp) temp_layout(k, bench_tmp, tmp);
        st = nconv__cuda_plan_of(ctx, c, &k->s[i], tmp, room, &plans[i]);
        if ((st == NCONV_UNSUPPORTED || st == NCONV_OUT_OF_MEMORY) && fwd && k->s[i].g.fused) {
            /* no engine fuses it (within the memory): convolve, then the epilogue kernel */
            nconv__cuda_forward_steps(k, fwd, 0);
            i = -1, st = NCONV_OK;
        }
    }
    nconv__cuda_dev_free(ctx, c, bench_tmp);
    return st;
}

/* Drops the cached plans of k's steps (chosen for more workspace than the device has). */
static void evict(nconv_cuda *c, const call *k, unsigned settings) {
    for (int i = 0; i < k->n; i++) {
        cached_plan *e = k->s[i].kernel ? NULL : nconv__cuda_cache_find(c, &k->s[i].g, settings);
        if (!e || !e->plan) continue;
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
    if (dev_err != cudaSuccess) st = nconv__cuda_fail(lib, dev_err, "cudaSetDevice");
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
        nconv__cuda_dev_free(ctx, c, c->ws);
        c->ws_size = 0;
        if ((c->ws = nconv__cuda_dev_alloc(ctx, c, need))) {
            c->ws_size = need, base = c->ws;
            break;
        }
        if (!most)
            st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of device memory", need);
        evict(c, k, nconv__cuda_settings(ctx, c));
        room = most / 2 + temp_layout(k, NULL, tmp);
    }
    if (st) goto done;
    void *ws = (char *)base + temp_layout(k, base, tmp);
    for (int i = 0; i < k->n; i++) {
        const step *s = &k->s[i];
        if (s->zero) {
            const cudaError_t e = lib->MemsetAsync(tmp[s->zero], 0, k->tmp[s->zero], c->stream);
            if (e != cudaSuccess) {
                st = nconv__cuda_fail(lib, e, "cudaMemsetAsync");
                break;
            }
        }
        if (s->kernel) {
            if ((st = launch(c, s, tmp))) break;
            continue;
        }
        const cudnnStatus_t cs = nconv__cuda_execute(lib, c->handle, plans[i].plan, s, tmp, ws);
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

/* ------------------------------------------------- operands cuDNN takes */

/* cuDNN's engines take packed tensors: dense in the order N, C, spatial or N, spatial, C
 * (unit dims aside). An operand of other strides goes through a dense copy. */
static int packed(const nconv_view *v) {
    nconv_view d;
    nconv__view_dense_like(&d, NULL, v->dt, v);
    for (int i = 0; i < 5; i++)
        if (v->shape[i] != 1 && v->stride[i] != d.stride[i]) return 0;
    return 1;
}

/* The dense copies of a call's operands: the caller's view and the copy of each. */
typedef struct staging {
    nconv_view user[8], copy[8];
    int output[8], n;
} staging;

static nconv_status copy_view(nconv_context *ctx, nconv_cuda *c, const nconv_oplan *o, const nconv_view *out,
                              const nconv_view *in) {
    call k;
    memset(&k, 0, sizeof k);
    k.o = o;
    nconv__cuda_ew_step(&k, KERNEL_EPILOGUE, "layout copy", out, IN_USER, in, IN_USER, NULL, IN_USER, NULL);
    return run_steps(ctx, c, &k, NULL, NULL, 0);
}

/* *v becomes a dense copy where its strides are not packed (an input copied in now, an
 * output copied out by unstage). */
static nconv_status stage(nconv_context *ctx, nconv_cuda *c, const nconv_oplan *o, nconv_view *v, int output,
                          staging *sg) {
    if (!v->data || !nconv__view_numel(v) || packed(v)) return NCONV_OK;
    nconv_view d;
    const size_t bytes = nconv__cuda_dense_view(v, &d);
    if (!(d.data = nconv__cuda_temp(ctx, bytes))) return NCONV_OUT_OF_MEMORY;
    sg->user[sg->n] = *v, sg->copy[sg->n] = d, sg->output[sg->n] = output, sg->n++;
    const nconv_status st = output ? NCONV_OK : copy_view(ctx, c, o, &d, v);
    *v = d;
    return st;
}

/* The bias, a [C] vector, packed where its stride is 1. */
static nconv_status stage_vector(nconv_context *ctx, nconv_cuda *c, const nconv_oplan *o, nconv_view *v,
                                 staging *sg) {
    if (!v->data || v->shape[0] < 2 || v->stride[0] == 1) return NCONV_OK;
    nconv_view v5 = *v;
    v5.rank = 5;
    for (int d = 0; d < 5; d++) v5.shape[d] = d == 1 ? v->shape[0] : 1, v5.stride[d] = v->stride[0];
    const nconv_status st = stage(ctx, c, o, &v5, 0, sg);
    v->data = v5.data, v->stride[0] = 1;
    return st;
}

/* Copies the staged outputs back (where the call succeeded) and frees the copies. */
static nconv_status unstage(nconv_context *ctx, nconv_cuda *c, const nconv_oplan *o, staging *sg, nconv_status st) {
    for (int i = 0; i < sg->n; i++) {
        if (!st && sg->output[i]) st = copy_view(ctx, c, o, &sg->user[i], &sg->copy[i]);
    }
    for (int i = 0; i < sg->n; i++) nconv__cuda_temp_free(ctx, sg->copy[i].data);
    return st;
}

/* ------------------------------------------------------------- the calls */

static nconv_status forward_packed(nconv_context *ctx, nconv_cuda *c, const nconv_oplan *o, const nconv_fwd_ops *v,
                                   void *workspace, size_t workspace_size) {
    nconv_status st = NCONV_OK;
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
        nconv__cuda_forward_steps(&k, &piece, 1);
        st = run_steps(ctx, c, &k, &piece, workspace, workspace_size);
    }
    return st;
}

nconv_status nconv__cuda_forward(nconv_context *ctx, const nconv_oplan *o, const nconv_fwd_ops *v, void *workspace,
                                 size_t workspace_size) {
    nconv_cuda *c = nconv__ctx_cuda(ctx);
    const nconv_view *ops[] = {&v->x, &v->w, &v->y, v->e.bias ? &v->bias : NULL, v->e.z ? &v->z : NULL};
    static const char *const names[] = {"x", "w", "y", "bias", "z"};
    nconv_status st = NCONV_OK;
    for (int i = 0; !st && i < 5; i++)
        if (ops[i]) st = check_device(c, names[i], ops[i]);
    if (st || !o->p.batch) return st;
    nconv_fwd_ops p = *v;
    p.e.bias = v->e.bias ? &p.bias : NULL, p.e.z = v->e.z ? &p.z : NULL;
    staging sg = {.n = 0};
    if (!(st = stage(ctx, c, o, &p.x, 0, &sg)) && !(st = stage(ctx, c, o, &p.w, 0, &sg)) &&
        !(st = stage(ctx, c, o, &p.y, 1, &sg)) && !(st = v->e.z ? stage(ctx, c, o, &p.z, 0, &sg) : NCONV_OK) &&
        !(st = v->e.bias ? stage_vector(ctx, c, o, &p.bias, &sg) : NCONV_OK))
        st = forward_packed(ctx, c, o, &p, workspace, workspace_size);
    return unstage(ctx, c, o, &sg, st);
}

static nconv_status backward_packed(nconv_context *ctx, nconv_cuda *c, const nconv_oplan *o, const nconv_bwd_ops *v,
                                    void *workspace, size_t workspace_size) {
    nconv_status st = NCONV_OK;
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
        nconv__cuda_backward_steps(&k, &piece);
        st = run_steps(ctx, c, &k, NULL, workspace, workspace_size);
    }
    if (st || !(v->outputs & ~split)) return st;
    nconv_bwd_ops rest = *v;
    rest.outputs &= ~split;
    call k;
    k.o = o;
    nconv__cuda_backward_steps(&k, &rest);
    return run_steps(ctx, c, &k, NULL, workspace, workspace_size);
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
    /* The convolutions' operands packed (relu's mask, dz and db are nconv's kernels, which
     * take any strides). */
    nconv_bwd_ops p = *v;
    staging sg = {.n = 0};
    if (!(st = stage(ctx, c, o, &p.dy, 0, &sg)) && !(st = stage(ctx, c, o, &p.x, 0, &sg)) &&
        !(st = stage(ctx, c, o, &p.w, 0, &sg)) &&
        !(st = v->outputs & NCONV_OUT_DX ? stage(ctx, c, o, &p.dx, 1, &sg) : NCONV_OK) &&
        !(st = v->outputs & NCONV_OUT_DW ? stage(ctx, c, o, &p.dw, 1, &sg) : NCONV_OK))
        st = backward_packed(ctx, c, o, &p, workspace, workspace_size);
    return unstage(ctx, c, o, &sg, st);
}

/* -------------------------------------------- elementwise, for the compositions */

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
        nconv__cuda_ew_step(&k, KERNEL_MASK, "relu mask", &vo, IN_USER, &va, IN_USER, &vm, IN_USER, NULL);
    } else {
        if (bias) {
            const int64_t one[NCONV_MAX_SPATIAL] = {1, 1, 1};
            nconv__make_view(p->ndims, p->dtype, bias, 0, 1, shape[1], one, &vb);
            vb.rank = 1, vb.shape[0] = shape[1], vb.stride[0] = bias->stride[0];
        }
        if (z) nconv__make_view(p->ndims, p->dtype, z, 0, shape[0], shape[1], shape + 2, &vz);
        step *s = nconv__cuda_ew_step(&k, KERNEL_EPILOGUE, "elementwise", &vo, IN_USER, a ? &va : NULL, IN_USER,
                                      z ? &vz : NULL, IN_USER, bias ? &vb : NULL);
        s->ew.alpha_b = alpha;
    }
    return run_steps(ctx, nconv__ctx_cuda(ctx), &k, NULL, NULL, 0);
}
