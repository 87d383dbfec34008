/*
 * Public entry points: plans (made once, executed many times) and the one-shot
 * calls, which plan for their operands and execute at once, without allocating
 * a plan. The engine is execute.c.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

static const char *const op_names[] = {"forward", "backward", "double backward"};
static const unsigned op_outputs[] = {
    0, NCONV_OUT_DX | NCONV_OUT_DW | NCONV_OUT_DB | NCONV_OUT_DZ, NCONV_OUT_GGY | NCONV_OUT_GX | NCONV_OUT_GW};

nconv_status nconv_plan_desc_init(nconv_plan_desc *desc, nconv_op op) {
    if (!desc) return INVALID("desc is NULL");
    if ((unsigned)op > NCONV_OP_DOUBLE_BACKWARD) return INVALID("op = %d: not an operation", (int)op);
    memset(desc, 0, sizeof *desc);
    desc->op = op;
    desc->outputs = op_outputs[op];
    desc->epi = (nconv_epilogue){NCONV_ACT_IDENTITY, 1.0};
    desc->layout = NCONV_LAYOUT_ANY;
    return NCONV_OK;
}

static nconv_status check_desc(const nconv_plan_desc *d) {
    if (!d) return INVALID("desc is NULL");
    if ((unsigned)d->op > NCONV_OP_DOUBLE_BACKWARD) return INVALID("desc op = %d: not an operation", (int)d->op);
    const unsigned all = op_outputs[d->op];
    if (d->op == NCONV_OP_FORWARD ? d->outputs != 0 : !d->outputs || (d->outputs & ~all))
        return INVALID("desc outputs = 0x%x: the outputs of a %s plan are a non-empty subset of 0x%x", d->outputs,
                       op_names[d->op], all);
    if (d->with_z != 0 && d->with_z != 1) return INVALID("desc with_z = %d: must be 0 or 1", d->with_z);
    if (d->with_z && d->op != NCONV_OP_FORWARD) return INVALID("desc with_z = 1: only a forward plan takes z");
    if ((unsigned)d->layout > NCONV_LAYOUT_ANY) return INVALID("desc layout = %d: not a layout", (int)d->layout);
    if (d->op == NCONV_OP_DOUBLE_BACKWARD && (d->epi.activation != NCONV_ACT_IDENTITY || d->epi.alpha != 1.0))
        return INVALID("desc epi: a double backward plan has no epilogue (identity, alpha 1)");
    return NCONV_OK;
}

/* Part o of a plan (forward or backward) of problem p for desc's layout, keeping the algorithms
 * it had where keep is set. */
static nconv_status plan_part(nconv_context *ctx, nconv_oplan *o, const nconv_problem *p, const nconv_epilogue *epi,
                              int backward, unsigned outputs, const nconv_plan_desc *d, int with_z, size_t room,
                              int keep) {
    const nconv_algo *algo[3];
    memcpy(algo, o->algo, sizeof algo);
    nconv_status st = nconv__oplan_prepare(o, p, epi, backward, outputs);
    if (st) return st;
    if (keep) memcpy(o->algo, algo, sizeof algo);
    unsigned copies[3];
    nconv__layout_copies(o, d->layout, with_z, copies);
    return nconv__oplan_choose(ctx, o, copies, room, keep);
}

/* Plans each part of desc's op for problem p (keep: with the algorithms pl has), their threads
 * within room bytes (0: the memory limit). Leaves the weights alone. */
static nconv_status plan_build(nconv_plan *pl, nconv_context *ctx, const nconv_problem *p, const nconv_plan_desc *d,
                               size_t room, int keep) {
    nconv_status st = check_desc(d);
    if (st) return st;
    const size_t limit = nconv__ctx_memory_limit(ctx);
    if (limit && (!room || limit < room)) room = limit;
    pl->ctx = ctx, pl->desc = *d, pl->tmp = 0;
    if (d->op == NCONV_OP_FORWARD) {
        st = plan_part(ctx, &pl->f, p, &d->epi, 0, 0, d, d->with_z, room, keep);
        pl->need = pl->f.need;
    } else if (d->op == NCONV_OP_BACKWARD) {
        st = plan_part(ctx, &pl->b, p, &d->epi, 1, d->outputs, d, 0, room, keep);
        pl->need = pl->b.need;
    } else {
        /* ggy's forward terms (the second adds the first, a temporary like y, as its z), then
         * gx and gw as a backward: one workspace serves them in turn, beside the temporary */
        const unsigned ggy = d->outputs & NCONV_OUT_GGY;
        const unsigned bouts = (d->outputs & NCONV_OUT_GX ? NCONV_OUT_DX : 0u) |
                               (d->outputs & NCONV_OUT_GW ? NCONV_OUT_DW : 0u);
        int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], ny = 1;
        if ((st = nconv_problem_shapes(p, xs, ws, ys))) return st;
        for (int i = 0; i < p->ndims + 2; i++) ny *= ys[i];
        if (ggy) pl->tmp = nconv__ws_round(nconv_dtype_size(p->dtype) * (size_t)ny);
        const size_t calls_room = room ? (room > pl->tmp ? room - pl->tmp : 1) : 0;
        if ((ggy && (st = plan_part(ctx, &pl->f, p, NULL, 0, 0, d, 1, calls_room, keep))) ||
            (bouts && (st = plan_part(ctx, &pl->b, p, NULL, 1, bouts, d, 0, calls_room, keep))))
            return st;
        const size_t fn = ggy ? pl->f.need : 0, bn = bouts ? pl->b.need : 0;
        pl->need = pl->tmp + (fn > bn ? fn : bn);
    }
    if (!st) pl->p = *p;
    return st;
}

/* A plan on a CUDA context: the problem and op validated, its operands' graphs chosen at the
 * first execution and kept by the context; weights given to it are a device copy. */
static nconv_status cuda_plan_build(nconv_plan *pl, nconv_context *ctx, const nconv_problem *p,
                                    const nconv_plan_desc *d) {
    nconv_status st = check_desc(d);
    if (st) return st;
    pl->ctx = ctx, pl->desc = *d, pl->tmp = 0, pl->need = 0;
    if (d->op == NCONV_OP_FORWARD) st = nconv__oplan_prepare(&pl->f, p, &d->epi, 0, 0);
    else if (d->op == NCONV_OP_BACKWARD) st = nconv__oplan_prepare(&pl->b, p, &d->epi, 1, d->outputs);
    else st = nconv__oplan_prepare(&pl->f, p, NULL, 0, 0);
    if (!st) pl->p = *p;
    return st;
}

nconv_status nconv_plan_create(nconv_context *ctx, const nconv_problem *p, const nconv_plan_desc *desc,
                               nconv_plan **plan) {
    nconv__clear_error();
    if (!plan) return INVALID("plan is NULL");
    *plan = NULL;
    nconv_status st = check_desc(desc);
    if (st) return st;
    if (nconv__ctx_cuda(ctx)) {
        if (p && nconv__is_complex(p->dtype) && (st = nconv__ctx_cpu_only(ctx, "a complex plan"))) return st;
        /* host memory: the context's allocator gives device memory */
        nconv_plan *pl = calloc(1, sizeof *pl);
        if (!pl) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a plan");
        if ((st = cuda_plan_build(pl, ctx, p, desc))) {
            free(pl);
            return st;
        }
        *plan = pl;
        return NCONV_OK;
    }
    /* A complex plan is the plan of its real problem (complex.c). */
    nconv_problem real;
    const int cx = p && nconv__is_complex(p->dtype);
    if (cx && (st = nconv__complex_problem(p, &desc->epi, &real))) return st;
    nconv_plan *pl = nconv__alloc(ctx, sizeof *pl);
    if (!pl) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a plan");
    memset(pl, 0, sizeof *pl);
    if ((st = plan_build(pl, ctx, cx ? &real : p, desc, 0, 0))) {
        nconv__free(ctx, pl);
        return st;
    }
    pl->complex_dtype = cx ? p->dtype : (nconv_dtype)0;
    *plan = pl;
    return NCONV_OK;
}

nconv_status nconv_plan_destroy(nconv_plan *plan) {
    if (!plan) return NCONV_OK;
    if (nconv__ctx_cuda(plan->ctx)) {
        nconv__cuda_temp_free(plan->ctx, plan->wmem);
        free(plan);
        return NCONV_OK;
    }
    nconv__free(plan->ctx, plan->wmem);
    nconv__free(plan->ctx, plan);
    return NCONV_OK;
}

nconv_status nconv_plan_workspace_size(const nconv_plan *plan, size_t *bytes) {
    if (!plan) return INVALID("plan is NULL");
    if (!bytes) return INVALID("bytes is NULL");
    *bytes = plan->need;
    return NCONV_OK;
}

nconv_status nconv_plan_reshape(nconv_plan *plan, int64_t batch) {
    nconv__clear_error();
    if (!plan) return INVALID("plan is NULL");
    nconv_problem p = plan->p;
    p.batch = batch;
    nconv_plan t = *plan;
    nconv_status st = nconv__ctx_cuda(plan->ctx) ? cuda_plan_build(&t, plan->ctx, &p, &plan->desc)
                                                 : plan_build(&t, plan->ctx, &p, &plan->desc, 0, 1);
    if (!st) *plan = t;
    return st;
}

static const nconv_oplan *weights_part(const nconv_plan *pl, nconv_direction *dir);

nconv_status nconv_plan_algorithm(const nconv_plan *plan, nconv_direction dir, const char **name) {
    if (!plan) return INVALID("plan is NULL");
    if (!name) return INVALID("name is NULL");
    if ((unsigned)dir > NCONV_DIR_BWD_W) return INVALID("dir = %d: not a direction", (int)dir);
    if (nconv__ctx_cuda(plan->ctx)) { /* cuDNN's engines, chosen per graph */
        nconv_direction wdir;
        const int reads_w = weights_part(plan, &wdir) != NULL;
        const unsigned outs = plan->desc.outputs;
        const int runs = plan->desc.op == NCONV_OP_FORWARD ? dir == nconv__oplan_fwd_dir(&plan->f)
                         : plan->desc.op == NCONV_OP_BACKWARD
                             ? (dir == NCONV_DIR_BWD_W && (outs & NCONV_OUT_DW)) || (reads_w && dir == wdir)
                             : 1;
        *name = runs ? "cudnn" : NULL;
        return NCONV_OK;
    }
    const nconv_algo *a = plan->f.algo[dir] ? plan->f.algo[dir] : plan->b.algo[dir];
    *name = a ? a->name : NULL;
    return NCONV_OK;
}

/* The part of the plan that reads w, and its core direction. */
static const nconv_oplan *weights_part(const nconv_plan *pl, nconv_direction *dir) {
    if (pl->desc.op == NCONV_OP_BACKWARD) {
        *dir = nconv__oplan_dx_dir(&pl->b);
        return pl->desc.outputs & NCONV_OUT_DX ? &pl->b : NULL;
    }
    *dir = nconv__oplan_fwd_dir(&pl->f);
    return pl->desc.op == NCONV_OP_FORWARD || (pl->desc.outputs & NCONV_OUT_GGY) ? &pl->f : NULL;
}

static void drop_weights(nconv_plan *pl) {
    nconv__free(pl->ctx, pl->wmem);
    pl->wmem = NULL;
    pl->has_w = pl->has_bias = 0;
    memset(pl->packed, 0, sizeof pl->packed);
}

nconv_status nconv_plan_set_weights(nconv_plan *plan, const nconv_tensor *w, const nconv_tensor *bias) {
    nconv__clear_error();
    if (!plan) return INVALID("plan is NULL");
    return plan->complex_dtype ? nconv__complex_plan_set_weights(plan, w, bias)
                               : nconv__plan_set_weights_real(plan, w, bias);
}

/* A CUDA plan's weights: dense device copies of w (in its order of channels and taps) and bias. */
static nconv_status cuda_set_weights(nconv_plan *plan, const nconv_oplan *o, const nconv_tensor *w,
                                     const nconv_tensor *bias) {
    const nconv_problem *p = &o->p;
    const int r = p->ndims + 2;
    const int64_t oc = p->out_channels;
    const size_t es = nconv_dtype_size(p->dtype);
    int64_t nw = 1;
    for (int i = 0; i < r; i++) nw *= o->ws[i];
    const size_t wbytes = nconv__ws_round(es * (size_t)nw), bbytes = bias ? nconv__ws_round(es * (size_t)oc) : 0;
    char *mem = nconv__cuda_temp(plan->ctx, wbytes + bbytes);
    if (!mem) return NCONV_OUT_OF_MEMORY;
    nconv_tensor wt, bt;
    const int channels_inner = r > 2 && w->stride[1] == 1 && w->stride[r - 1] != 1;
    nconv_tensor_init(&wt, mem, r, o->ws, channels_inner ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX);
    nconv_status st = nconv__cuda_pointwise(plan->ctx, p, o->ws, w, NULL, NULL, NULL, 1.0, &wt);
    if (!st && bias) { /* the bias as a [1, oc, 1...] activation */
        int64_t shape[NCONV_MAX_DIMS] = {1, oc, 1, 1, 1};
        nconv_tensor b = *bias;
        for (int i = 0; i < r; i++) b.stride[i] = i == 1 ? bias->stride[0] : oc * bias->stride[0];
        nconv_tensor_init(&bt, mem + wbytes, r, shape, NCONV_LAYOUT_NCX);
        st = nconv__cuda_pointwise(plan->ctx, p, shape, &b, NULL, NULL, NULL, 1.0, &bt);
        nconv_tensor_init(&bt, mem + wbytes, 1, &oc, NCONV_LAYOUT_NCX);
    }
    if (st) {
        nconv__cuda_temp_free(plan->ctx, mem);
        return st;
    }
    nconv__cuda_temp_free(plan->ctx, plan->wmem);
    plan->wmem = mem;
    plan->has_w = 1, plan->w = wt;
    plan->has_bias = bias != NULL;
    if (bias) plan->bias = bt;
    return NCONV_OK;
}

nconv_status nconv__plan_set_weights_real(nconv_plan *plan, const nconv_tensor *w, const nconv_tensor *bias) {
    if (!w) {
        if (nconv__ctx_cuda(plan->ctx)) {
            if (bias) return INVALID("bias is given without w");
            nconv__cuda_temp_free(plan->ctx, plan->wmem);
            plan->wmem = NULL, plan->has_w = plan->has_bias = 0;
            return NCONV_OK;
        }
        if (bias) return INVALID("bias is given without w");
        drop_weights(plan);
        return NCONV_OK;
    }
    nconv_direction dir;
    const nconv_oplan *o = weights_part(plan, &dir);
    if (!o) return INVALID("w: this %s plan reads no weights", op_names[plan->desc.op]);
    if (bias && plan->desc.op != NCONV_OP_FORWARD) return INVALID("bias: only a forward plan adds a bias");
    const nconv_problem *p = &o->p;
    const int r = p->ndims + 2;
    const int64_t oc = p->out_channels;
    const nconv_operand_check chk[] = {{"w", w, r, o->ws, 0, 0, 0}, {"bias", bias, 1, &oc, 0, 0, 0}};
    nconv_status st = nconv__check_operands(p->dtype, chk, 2);
    if (st) return st;
    if (nconv__ctx_cuda(plan->ctx)) return cuda_set_weights(plan, o, w, bias);
    const size_t es = nconv_dtype_size(p->dtype);
    int64_t nw = 1;
    for (int i = 0; i < r; i++) nw *= o->ws[i];
    size_t scratch;
    const size_t wbytes = nconv__ws_round(es * (size_t)nw), bbytes = bias ? nconv__ws_round(es * (size_t)oc) : 0;
    const size_t pbytes = nconv__ws_round(nconv__oplan_pack_size(o, dir, &scratch));
    /* 64 bytes of slack: the copies start on a cache line, as the kernels' loads want */
    const size_t total = 64 + wbytes + bbytes + pbytes;
    if ((st = nconv__check_memory(plan->ctx, total + scratch, "the plan's weights"))) return st;
    char *mem = nconv__alloc(plan->ctx, total);
    void *scr = mem && scratch ? nconv__alloc(plan->ctx, scratch) : NULL;
    if (!mem || (scratch && !scr)) {
        nconv__free(plan->ctx, mem);
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes for the plan's weights",
                            total + scratch);
    }
    char *base = mem + (64 - (uintptr_t)mem % 64) % 64;
    /* The copy keeps the caller's order of channels and taps (packing reads either fast). */
    nconv_tensor wt, bt;
    const int channels_inner = r > 2 && w->stride[1] == 1 && w->stride[r - 1] != 1;
    nconv_tensor_init(&wt, base, r, o->ws, channels_inner ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX);
    nconv_view src, dst;
    nconv__make_view(p->ndims, p->dtype, w, 0, o->ws[0], o->ws[1], o->ws + 2, &src);
    nconv__make_view(p->ndims, p->dtype, &wt, 0, o->ws[0], o->ws[1], o->ws + 2, &dst);
    nconv__scale_copy(&dst, &src, 1.0);
    if (bias) {
        nconv_tensor_init(&bt, base + wbytes, 1, &oc, NCONV_LAYOUT_NCX);
        for (int64_t i = 0; i < oc; i++)
            nconv__store1(bt.data, p->dtype, i, nconv__load(bias->data, p->dtype, i * bias->stride[0]));
    }
    void *packed = pbytes ? base + wbytes + bbytes : NULL;
    if (packed) {
        st = nconv__oplan_pack(plan->ctx, o, dir, &wt, packed, scr, scratch);
        if (st == (nconv_status)NCONV__DECLINE_W) packed = NULL, st = NCONV_OK; /* each run packs and declines */
    }
    nconv__free(plan->ctx, scr);
    if (st) {
        nconv__free(plan->ctx, mem);
        return st;
    }
    drop_weights(plan);
    plan->wmem = mem;
    plan->has_w = 1, plan->w = wt;
    plan->has_bias = bias != NULL;
    if (bias) plan->bias = bt;
    plan->packed[dir] = packed;
    return NCONV_OK;
}

/* The fields of the variant pack an op does not use must be NULL: a swapped or misplaced
 * operand fails instead of being ignored. */
static nconv_status check_pack(const nconv_plan *pl, const nconv_variant_pack *vp) {
    const struct { const char *name; const void *t; unsigned ops; } f[] = {
        {"x", vp->x, 7},     {"w", vp->w, 7},     {"bias", vp->bias, 1}, {"z", vp->z, 1},     {"y", vp->y, 3},
        {"dy", vp->dy, 6},   {"dx", vp->dx, 2},   {"dw", vp->dw, 2},     {"db", vp->db, 2},   {"dz", vp->dz, 2},
        {"ggx", vp->ggx, 4}, {"ggw", vp->ggw, 4}, {"ggb", vp->ggb, 4},   {"ggy", vp->ggy, 4}, {"gx", vp->gx, 4},
        {"gw", vp->gw, 4}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].t && !(f[i].ops & (1u << pl->desc.op)))
            return INVALID("variant pack %s is set, but a %s plan does not use it", f[i].name, op_names[pl->desc.op]);
    return NCONV_OK;
}

nconv_status nconv_plan_execute(const nconv_plan *pl, const nconv_variant_pack *vp) {
    nconv__clear_error();
    if (!pl) return INVALID("plan is NULL");
    if (!vp) return INVALID("vp is NULL");
    nconv_status st = check_pack(pl, vp);
    if (st) return st;
    return pl->complex_dtype ? nconv__complex_plan_execute(pl, vp) : nconv__plan_execute_real(pl, vp);
}

/* A CUDA plan's execution: the one-shot call of its op, with the plan's weights. */
static nconv_status cuda_execute(const nconv_plan *pl, const nconv_variant_pack *vp, const nconv_tensor *w) {
    nconv_problem p = pl->p;
    const nconv_epilogue *epi = &pl->desc.epi;
    if (pl->desc.op == NCONV_OP_FORWARD) {
        const nconv_tensor *bias = vp->bias || vp->w ? vp->bias : pl->has_bias ? &pl->bias : NULL;
        return nconv_forward(pl->ctx, &p, epi, vp->x, w, bias, vp->z, vp->y, vp->workspace, vp->workspace_size);
    }
    if (pl->desc.op == NCONV_OP_BACKWARD) {
        nconv_status st = nconv__check_outputs((vp->dx ? NCONV_OUT_DX : 0u) | (vp->dw ? NCONV_OUT_DW : 0u) |
                                                   (vp->db ? NCONV_OUT_DB : 0u) | (vp->dz ? NCONV_OUT_DZ : 0u),
                                               pl->desc.outputs);
        return st ? st
                  : nconv_backward(pl->ctx, &p, epi, vp->x, w, vp->y, vp->dy, vp->dx, vp->dw, vp->db, vp->dz,
                                   vp->workspace, vp->workspace_size);
    }
    const nconv_status st = nconv__check_outputs((vp->ggy ? NCONV_OUT_GGY : 0u) | (vp->gx ? NCONV_OUT_GX : 0u) |
                                                     (vp->gw ? NCONV_OUT_GW : 0u),
                                                 pl->desc.outputs);
    return st ? st
              : nconv_double_backward(pl->ctx, &p, vp->x, w, vp->dy, vp->ggx, vp->ggw, vp->ggb, vp->ggy, vp->gx,
                                      vp->gw);
}

nconv_status nconv__plan_execute_real(const nconv_plan *pl, const nconv_variant_pack *vp) {
    nconv_status st;
    /* The plan's weights where the call gives none (its bias too, unless the call gives one). */
    const nconv_tensor *w = vp->w ? vp->w : pl->has_w ? &pl->w : NULL;
    if (nconv__ctx_cuda(pl->ctx)) {
        if (pl->desc.op == NCONV_OP_FORWARD && !w)
            return INVALID("w is NULL and the plan has no weights (see nconv_plan_set_weights)");
        if (vp->z && !pl->desc.with_z) return INVALID("z is given, but the plan was made without it (desc with_z = 0)");
        return cuda_execute(pl, vp, w);
    }
    if (pl->desc.op == NCONV_OP_DOUBLE_BACKWARD) return nconv__double_run(pl, vp);
    if (pl->desc.op == NCONV_OP_FORWARD) {
        const nconv_tensor *bias = vp->bias || vp->w ? vp->bias : pl->has_bias ? &pl->bias : NULL;
        if (!w) return INVALID("w is NULL and the plan has no weights (see nconv_plan_set_weights)");
        if (vp->z && !pl->desc.with_z) return INVALID("z is given, but the plan was made without it (desc with_z = 0)");
        nconv_fwd_ops v;
        if ((st = nconv__fwd_ops(&pl->f, vp->x, w, bias, vp->z, vp->y, &v)) ||
            (st = nconv__fwd_check_layout(&pl->f, &v)))
            return st;
        return nconv__fwd_run(pl->ctx, &pl->f, &v, vp->w ? NULL : pl->packed[nconv__oplan_fwd_dir(&pl->f)],
                              vp->workspace, vp->workspace_size);
    }
    nconv_bwd_ops v;
    if ((st = nconv__bwd_ops(&pl->b, vp->x, w, vp->y, vp->dy, vp->dx, vp->dw, vp->db, vp->dz, &v)) ||
        (st = nconv__bwd_check_layout(&pl->b, &v)))
        return st;
    return nconv__bwd_run(pl->ctx, &pl->b, &v, vp->w ? NULL : pl->packed[nconv__oplan_dx_dir(&pl->b)], vp->workspace,
                          vp->workspace_size);
}

/* ----------------------------------------------------------- one-shot calls */

nconv_status nconv__workspace_within(nconv_context *ctx, const nconv_problem *p, nconv_op op,
                                     const nconv_epilogue *epi, size_t room, size_t *bytes) {
    if ((unsigned)op > NCONV_OP_DOUBLE_BACKWARD) return INVALID("op = %d: not an operation", (int)op);
    nconv_problem real;
    if (p && nconv__is_complex(p->dtype)) { /* the real problem's workspace; the copies are the call's own */
        nconv_status st = nconv__complex_problem(p, op == NCONV_OP_DOUBLE_BACKWARD ? NULL : epi, &real);
        if (st) return st;
        p = &real;
    }
    nconv_plan_desc d;
    nconv_plan_desc_init(&d, op);
    if (epi) d.epi = *epi;
    d.with_z = op == NCONV_OP_FORWARD;
    nconv_plan pl;
    memset(&pl, 0, sizeof pl);
    nconv_status st = plan_build(&pl, ctx, p, &d, room, 0);
    if (st) return st;
    if (!bytes) return INVALID("bytes is NULL");
    *bytes = pl.need;
    return NCONV_OK;
}

nconv_status nconv_workspace_size(nconv_context *ctx, const nconv_problem *p, nconv_op op,
                                  const nconv_epilogue *epi, size_t *bytes) {
    nconv_status cuda_st = nconv__ctx_cpu_only(ctx, "nconv_workspace_size");
    if (cuda_st) return cuda_st;
    return nconv__workspace_within(ctx, p, op, epi, 0, bytes);
}

static const unsigned copies_any[3] = {NCONV_COPY_BOTH, NCONV_COPY_BOTH, NCONV_COPY_BOTH};

/* A call given a workspace plans as the size query did (any layout), so that the query's
 * size is enough for it; its threads fit in that workspace. Without one it plans for its
 * operands' layouts, its threads within the memory limit. */
static size_t room_of(nconv_context *ctx, const void *workspace, size_t workspace_size) {
    return workspace ? workspace_size : nconv__ctx_memory_limit(ctx);
}

nconv_status nconv_forward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                           const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                           const nconv_tensor *z, const nconv_tensor *y, void *workspace, size_t workspace_size) {
    nconv__clear_error();
    nconv_status st;
    if (p && nconv__is_complex(p->dtype)) {
        if ((st = nconv__ctx_cpu_only(ctx, "a complex nconv_forward"))) return st;
        return nconv__complex_forward(ctx, p, epi, NULL, x, w, bias, z, y, workspace, workspace_size);
    }
    nconv_oplan o;
    nconv_fwd_ops v;
    unsigned copies[3];
    st = nconv__oplan_prepare(&o, p, epi, 0, 0);
    if (st || (st = nconv__fwd_ops(&o, x, w, bias, z, y, &v))) return st;
    if (nconv__ctx_cuda(ctx))
        return nconv__cuda_forward(ctx, &o, &v, workspace, workspace_size);
    nconv__fwd_copies(&o, &v, copies);
    if ((st = nconv__oplan_choose(ctx, &o, workspace ? copies_any : copies, room_of(ctx, workspace, workspace_size),
                                  0)))
        return st;
    return nconv__fwd_run(ctx, &o, &v, NULL, workspace, workspace_size);
}

nconv_status nconv_backward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                            const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *y,
                            const nconv_tensor *dy, const nconv_tensor *dx, const nconv_tensor *dw,
                            const nconv_tensor *db, const nconv_tensor *dz, void *workspace, size_t workspace_size) {
    nconv__clear_error();
    nconv_status st;
    if (p && nconv__is_complex(p->dtype)) {
        if ((st = nconv__ctx_cpu_only(ctx, "a complex nconv_backward"))) return st;
        return nconv__complex_backward(ctx, p, epi, NULL, x, w, y, dy, dx, dw, db, dz, workspace, workspace_size);
    }
    nconv_oplan o;
    nconv_bwd_ops v;
    unsigned copies[3];
    const unsigned outputs = (dx ? NCONV_OUT_DX : 0u) | (dw ? NCONV_OUT_DW : 0u) | (db ? NCONV_OUT_DB : 0u) |
                             (dz ? NCONV_OUT_DZ : 0u);
    st = nconv__oplan_prepare(&o, p, epi, 1, outputs);
    if (st || (st = nconv__bwd_ops(&o, x, w, y, dy, dx, dw, db, dz, &v)) || !outputs) return st;
    if (nconv__ctx_cuda(ctx))
        return nconv__cuda_backward(ctx, &o, &v, workspace, workspace_size);
    nconv__bwd_copies(&o, &v, copies);
    if ((st = nconv__oplan_choose(ctx, &o, workspace ? copies_any : copies, room_of(ctx, workspace, workspace_size),
                                  0)))
        return st;
    return nconv__bwd_run(ctx, &o, &v, NULL, workspace, workspace_size);
}

nconv_status nconv_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_tensor *x,
                                   const nconv_tensor *w, const nconv_tensor *dy, const nconv_tensor *ggx,
                                   const nconv_tensor *ggw, const nconv_tensor *ggb, const nconv_tensor *ggy,
                                   const nconv_tensor *gx, const nconv_tensor *gw) {
    nconv__clear_error();
    nconv_status st;
    if (p && nconv__is_complex(p->dtype)) {
        if ((st = nconv__ctx_cpu_only(ctx, "a complex nconv_double_backward"))) return st;
        return nconv__complex_double_backward(ctx, p, NULL, x, w, dy, ggx, ggw, ggb, ggy, gx, gw);
    }
    if (nconv__ctx_cuda(ctx)) {
        nconv_oplan o;
        return (st = nconv__oplan_prepare(&o, p, NULL, 0, 0))
                   ? st
                   : nconv__cuda_double_backward(ctx, p, x, w, dy, ggx, ggw, ggb, ggy, gx, gw);
    }
    nconv_plan_desc d;
    nconv_plan_desc_init(&d, NCONV_OP_DOUBLE_BACKWARD);
    const unsigned outputs = (ggy ? NCONV_OUT_GGY : 0u) | (gx ? NCONV_OUT_GX : 0u) | (gw ? NCONV_OUT_GW : 0u);
    if (outputs) d.outputs = outputs; /* else every output is planned (the problem validated), none run */
    nconv_plan pl;
    memset(&pl, 0, sizeof pl);
    if ((st = plan_build(&pl, ctx, p, &d, 0, 0))) return st;
    const nconv_variant_pack vp = {.x = x, .w = w, .dy = dy, .ggx = ggx, .ggw = ggw, .ggb = ggb,
                                   .ggy = ggy, .gx = gx, .gw = gw};
    return nconv__double_run(&pl, &vp);
}

/* ------------------------------------------------------------ algorithms */

nconv_status nconv_algorithm_applies(const char *name, const nconv_problem *p, nconv_direction dir, int *applies,
                                     const char **why_not) {
    const nconv_algo *a = nconv__algo_find(name);
    if (!a) return INVALID("algorithm = '%s': unknown", name ? name : "(null)");
    if ((unsigned)dir > NCONV_DIR_BWD_W) return INVALID("dir = %d: not a direction", (int)dir);
    if (!applies) return INVALID("applies is NULL");
    nconv_problem real; /* a complex problem answers for its real one */
    const int cx = p && nconv__is_complex(p->dtype);
    nconv_status st = cx ? nconv__complex_problem(p, NULL, &real) : nconv_problem_validate(p);
    if (st) return st;
    nconv_core c;
    nconv__core_from_problem(cx ? &real : p, &c);
    const char *why = "";
    *applies = a->applies(&c, dir, &why);
    if (why_not) *why_not = *applies ? "" : why;
    return NCONV_OK;
}

nconv_status nconv_algorithm_chosen(nconv_context *ctx, const nconv_problem *p, nconv_direction dir, const char **name) {
    if (!name) return INVALID("name is NULL");
    if ((unsigned)dir > NCONV_DIR_BWD_W) return INVALID("dir = %d: not a direction", (int)dir);
    nconv_problem real;
    const int cx = p && nconv__is_complex(p->dtype);
    nconv_status st = cx ? nconv__complex_problem(p, NULL, &real) : nconv_problem_validate(p);
    if (st || (st = nconv__check_isa())) return st;
    if (nconv__ctx_cuda(ctx)) {
        if (cx && (st = nconv__ctx_cpu_only(ctx, "a complex problem"))) return st;
        *name = "cudnn";
        return NCONV_OK;
    }
    nconv_core c;
    nconv__core_from_problem(cx ? &real : p, &c);
    const nconv_algo *a;
    if ((st = nconv__choose(ctx, &c, dir, NCONV_COPY_BOTH, &a))) return st;
    *name = a->name;
    return NCONV_OK;
}
