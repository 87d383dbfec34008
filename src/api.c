/*
 * Public entry points: validate -> canonicalise -> plan -> execute.
 *
 * Every user-facing operation becomes calls of the three core directions of
 * one direct convolution (nconv_core):
 *   forward            : fwd(x, w) -> y                (transposed: bwd_d(x, w) -> y)
 *   backward, dx       : bwd_d(dpre, w) -> dx           (transposed: fwd(dpre, w) -> dx)
 *   backward, dw       : bwd_w(x, dpre) -> dw           (transposed: bwd_w(dpre, x) -> dw)
 * where dpre = dy * relu'(y) is the gradient before the epilogue. All
 * validation happens before any output is touched; outputs are written only
 * by the final scatters.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

static void make_view(const nconv_problem *p, const nconv_tensor *t, int64_t a, int64_t b, const int64_t *sp,
                      nconv_view *v) {
    nconv__make_view(p->ndims, p->dtype, t, 0, a, b, sp, v);
}

static void make_vec_view(const nconv_problem *p, const nconv_tensor *t, int64_t n, nconv_view *v) {
    int64_t one[NCONV_MAX_SPATIAL] = {1, 1, 1};
    nconv__make_view(p->ndims, p->dtype, t, 0, 1, n, one, v);
    v->rank = 1, v->shape[0] = n, v->stride[0] = t->stride[0];
}

static nconv_status check_tensor(const char *name, const nconv_tensor *t, int required) {
    return !t && required ? INVALID("%s is NULL but required", name) : NCONV_OK;
}

static int64_t prod(const int64_t *s, int n) {
    int64_t r = 1;
    for (int i = 0; i < n; i++) r *= s[i];
    return r;
}

/* Operands of one call, as core views. */
typedef struct operands {
    nconv_problem p;
    nconv_core c;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    int64_t out[NCONV_MAX_SPATIAL];
    int relu; /* the epilogue's activation */
    nconv_split split[3]; /* per core direction, see forward_ws, backward_ws */
    unsigned copies[3];   /* the channels-last copies each core direction plans for */
    int threads;          /* what the call runs on: see fit_threads */
    size_t least;         /* the workspace of the call's smallest pieces at one thread */
} operands;

static nconv_status prepare(const nconv_problem *p, const nconv_epilogue *epi, operands *o) {
    nconv_status st = nconv_problem_shapes(p, o->xs, o->ws, o->ys);
    if (st || (st = nconv__check_isa())) return st;
    o->p = *p;
    o->relu = epi && epi->activation == NCONV_ACT_RELU;
    nconv_problem_output_size(p, o->out);
    nconv__core_from_problem(p, &o->c);
    if (epi && (unsigned)epi->activation > NCONV_ACT_RELU)
        return INVALID("epilogue activation = %d: not an activation", (int)epi->activation);
    if (epi && !isfinite(epi->alpha)) return INVALID("epilogue alpha = %g: must be finite", epi->alpha);
    return NCONV_OK;
}

static void verbose(const nconv_problem *p, const char *op, nconv_direction dir, const nconv_algo *a,
                    const nconv_core *c, int64_t piece, int64_t pieces) {
    const char *env = getenv("NCONV_VERBOSE");
    if (!env || strcmp(env, "1")) return;
    static const char *const dn[] = {"fwd", "bwd_d", "bwd_w"};
    char desc[512] = "";
    nconv_problem_to_desc(p, desc, sizeof desc);
    fprintf(stderr, "nconv_verbose,%s,core=%s,algo=%s", op, dn[dir], a->name);
    if (pieces > 1)
        fprintf(stderr, ",piece %lld of %lld: mb%lld in %lldx%lldx%lld out %lldx%lldx%lld", (long long)piece + 1,
                (long long)pieces, (long long)c->N, (long long)c->in[0], (long long)c->in[1], (long long)c->in[2],
                (long long)c->out[0], (long long)c->out[1], (long long)c->out[2]);
    for (int i = 0; i < nconv__algo_count(); i++) {
        const nconv_algo *b = nconv__algo_at(i);
        const char *why = "";
        if (b != a && !b->applies(c, dir, &why)) fprintf(stderr, ",skipped %s: %s", b->name, why);
        else if (b != a && b->preferred && !b->preferred(c, dir))
            fprintf(stderr, ",skipped %s: the heuristic prefers another here", b->name);
    }
    fprintf(stderr, ",%s\n", desc);
}

static nconv_status run_piece(nconv_context *ctx, const operands *o, const char *op, const nconv_exec *e,
                              int64_t piece, int64_t pieces) {
    const nconv_algo *a;
    size_t used = e->ws->used;
    nconv_status st = nconv__plan(ctx, e->c, e->dir, e, &a);
    if (st) return st;
    if (e->db_done) *e->db_done = 0; /* the benchmark policy's trial runs do not count */
    verbose(&o->p, op, e->dir, a, e->c, piece, pieces);
    st = a->run(e);
    e->ws->used = used;
    return st;
}

/* db_lanes, db_done: see nconv_exec (NULL, NULL: no bias gradient wanted). The call runs in
 * the pieces of o->split[dir] (see split.c). */
static nconv_status run_core(nconv_context *ctx, const operands *o, const char *op, nconv_direction dir,
                             const nconv_view *x, const nconv_view *w, const nconv_view *y, const nconv_epi *epi,
                             nconv_arena *ws, double *db_lanes, int *db_done) {
    const nconv_split *s = &o->split[dir];
    const int64_t pieces = nconv__split_pieces(&o->c, dir, s);
    if (pieces == 1) {
        nconv_exec e = {&o->c, dir, x, w, y, epi, ws, o->threads, nconv__ctx_pool(ctx), db_lanes, db_done, 0};
        return run_piece(ctx, o, op, &e, 0, 1);
    }
    /* bwd_w: the first piece writes dw and db's lanes; the others add into dw, or write a dense
     * dw that is added, and write lanes of their own, added to the first's in piece order */
    const int acc = dir == NCONV_DIR_BWD_W && nconv__split_accumulates(ctx, &o->c, dir, s);
    nconv_view sum = *w;
    double *lanes = NULL;
    int done = 1, piece_done = 0;
    if (dir == NCONV_DIR_BWD_W) {
        if (!acc)
            nconv__view_dense_like(&sum, nconv__arena_take(ws, sizeof(float) * (size_t)nconv__view_numel(w)),
                                   NCONV_F32, w);
        lanes = nconv__arena_take(ws, 4 * sizeof(double) * (size_t)o->c.O);
    }
    const size_t used = ws->used;
    for (int64_t i = 0; i < pieces; i++) {
        nconv_piece p;
        if (!nconv__split_piece(&o->c, dir, s, i, &p))
            return nconv__error(NCONV_INTERNAL_ERROR, "nconv: piece %lld of the split is empty", (long long)i);
        nconv_view xp, yp, zp;
        nconv__piece_view(x, p.n0, p.c.N, s->axis, p.x0, s->axis < 0 ? 0 : p.c.in[s->axis], &xp);
        nconv__piece_view(y, p.n0, p.c.N, s->axis, p.y0, s->axis < 0 ? 0 : p.c.out[s->axis], &yp);
        nconv_epi ep;
        if (epi) { /* z is like the written activation */
            ep = *epi;
            const nconv_view *out = dir == NCONV_DIR_FWD ? &yp : &xp;
            if (epi->z) {
                nconv__piece_view(epi->z, p.n0, p.c.N, s->axis, dir == NCONV_DIR_FWD ? p.y0 : p.x0,
                                  s->axis < 0 ? 0 : out->shape[2 + s->axis], &zp);
                ep.z = &zp;
            }
        }
        const int more = i > 0 && dir == NCONV_DIR_BWD_W;
        double *pl = db_lanes && done ? (more ? lanes : db_lanes) : NULL;
        nconv_exec e = {&p.c, dir, &xp, more && !acc ? &sum : w, &yp, epi ? &ep : NULL, ws, o->threads,
                        nconv__ctx_pool(ctx), pl, pl ? &piece_done : NULL, more && acc};
        nconv_status st = run_piece(ctx, o, op, &e, i, pieces);
        if (st) return st;
        done &= piece_done;
        if (more) {
            if (!acc) nconv__add_f32(w, &sum);
            if (pl && done)
                for (int64_t l = 0; l < 4 * o->c.O; l++) db_lanes[l] += lanes[l];
        }
    }
    if (db_done) *db_done = db_lanes && done;
    ws->used = used;
    return NCONV_OK;
}

/* The workspace a call aims at: max(16 MiB, its largest operand), or the context's memory
 * limit where lower, less `fixed` bytes the call takes besides its algorithm runs (but at
 * least half of it). */
static size_t call_budget(nconv_context *ctx, const operands *o, size_t fixed) {
    int64_t big = prod(o->xs, o->p.ndims + 2);
    if (prod(o->ws, o->p.ndims + 2) > big) big = prod(o->ws, o->p.ndims + 2);
    if (prod(o->ys, o->p.ndims + 2) > big) big = prod(o->ys, o->p.ndims + 2);
    size_t limit = nconv_dtype_size(o->p.dtype) * (size_t)big;
    if (limit < ((size_t)16 << 20)) limit = (size_t)16 << 20;
    const size_t ctx_limit = nconv__ctx_memory_limit(ctx);
    if (ctx_limit && ctx_limit < limit) limit = ctx_limit;
    return fixed < limit / 2 ? limit - fixed : limit / 2;
}

/* The channels-last copies (NCONV_COPY_*) of a core call on these views (NULL: a query, or an
 * output not wanted): both. A call with the caller's workspace plans as the query did, so
 * that the query's size is enough for it (fewer copies need less for the same pieces). */
static unsigned copies_of(nconv_direction dir, const nconv_view *x, const nconv_view *y, const nconv_epi *epi,
                          const void *workspace) {
    if (!x || !y || workspace) return NCONV_COPY_BOTH;
    const nconv_exec e = {.dir = dir, .x = x, .y = y, .epi = epi};
    return nconv__exec_copies(&e);
}

/* Workspace: 64 bytes of alignment slack, then for backward the dpre buffer
 * (relu), then the largest of what is used one after another: each
 * algorithm run, the bias-gradient sums (with backward-weights' run and the
 * sums both after the bias gradient's lanes, which that run may fill). The
 * sizes of the split core calls come in as dx's (or forward's) and dw's. */
static size_t forward_total(size_t core) { return 64 + core; }

static size_t backward_fixed(const operands *o) {
    const size_t ny = (size_t)prod(o->ys, o->p.ndims + 2);
    const size_t g = o->relu ? nconv__ws_round(nconv_dtype_size(o->p.dtype) * ny) : 0; /* dpre, only with relu */
    /* db's lanes stay from dw's run to db's sums */
    return 64 + g + nconv__ws_round(4 * sizeof(double) * (size_t)o->p.out_channels);
}

static size_t backward_total(const operands *o, size_t dx, size_t dw) {
    const size_t db = nconv__ws_round(5 * sizeof(double) * (size_t)o->p.out_channels);
    const size_t lanes = nconv__ws_round(4 * sizeof(double) * (size_t)o->p.out_channels);
    const size_t m = lanes + (dw > db ? dw : db);
    return backward_fixed(o) - lanes + (dx > m ? dx : m);
}

/* The call's workspace at `threads`, for the pieces in o->split. */
static size_t need_at(nconv_context *ctx, const operands *o, int backward, int threads) {
    if (!backward) {
        const nconv_direction dir = o->p.transposed ? NCONV_DIR_BWD_D : NCONV_DIR_FWD;
        return forward_total(nconv__split_need(ctx, &o->c, dir, &o->split[dir], threads, o->copies[dir]));
    }
    const nconv_direction dx_dir = o->p.transposed ? NCONV_DIR_FWD : NCONV_DIR_BWD_D, dw_dir = NCONV_DIR_BWD_W;
    return backward_total(o, nconv__split_need(ctx, &o->c, dx_dir, &o->split[dx_dir], threads, o->copies[dx_dir]),
                          nconv__split_need(ctx, &o->c, dw_dir, &o->split[dw_dir], threads, o->copies[dw_dir]));
}

/* Sets o->threads to the context's thread count, or to the most threads whose scratch keeps
 * the call's workspace within `room` bytes (0: no bound) where one thread keeps it there, and
 * returns the workspace at that count (`one`: at one thread). The pieces were planned at one
 * thread, so whether a call fits, and every bit of its result, is the same at every count. */
static size_t fit_threads(nconv_context *ctx, operands *o, int backward, size_t one, size_t room) {
    int lo = 1, hi = nconv__ctx_threads(ctx);
    o->threads = hi;
    if (hi == 1) return one;
    size_t need = need_at(ctx, o, backward, hi);
    if (!room || need <= room || one > room) return need;
    need = one; /* need_at(lo) <= room < need_at(hi); the need grows with the threads */
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        const size_t m = need_at(ctx, o, backward, mid);
        if (m <= room) lo = mid, need = m;
        else hi = mid;
    }
    o->threads = lo;
    return need;
}

/* Each core call's pieces go to o->split; copies: see copies_of; room: see fit_threads. */
static size_t forward_ws(nconv_context *ctx, operands *o, unsigned copies, size_t room) {
    const nconv_direction dir = o->p.transposed ? NCONV_DIR_BWD_D : NCONV_DIR_FWD;
    size_t least;
    o->copies[dir] = copies;
    const size_t one = nconv__split_choose(ctx, &o->c, dir, copies, call_budget(ctx, o, forward_total(0)),
                                           &o->split[dir], &least);
    o->least = forward_total(least);
    return fit_threads(ctx, o, 0, forward_total(one), room);
}

static size_t backward_ws(nconv_context *ctx, operands *o, unsigned dx_copies, unsigned dw_copies, size_t room) {
    const size_t budget = call_budget(ctx, o, backward_fixed(o));
    const nconv_direction dx_dir = o->p.transposed ? NCONV_DIR_FWD : NCONV_DIR_BWD_D, dw_dir = NCONV_DIR_BWD_W;
    size_t least_dx, least_dw;
    o->copies[dx_dir] = dx_copies, o->copies[dw_dir] = dw_copies;
    const size_t a = nconv__split_choose(ctx, &o->c, dx_dir, dx_copies, budget, &o->split[dx_dir], &least_dx);
    const size_t b = nconv__split_choose(ctx, &o->c, dw_dir, dw_copies, budget, &o->split[dw_dir], &least_dw);
    o->least = backward_total(o, least_dx, least_dw);
    return fit_threads(ctx, o, 1, backward_total(o, a, b), room);
}

static nconv_status open_arena(nconv_context *ctx, const operands *o, void *workspace, size_t size, size_t need,
                               nconv_arena *a, void **owned) {
    *owned = NULL;
    if (workspace) {
        if (size < need)
            return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace_size = %zu: this call needs %zu bytes", size,
                                need);
        *a = (nconv_arena){workspace, size, 0};
        return NCONV_OK;
    }
    const size_t limit = nconv__ctx_memory_limit(ctx);
    if (limit && need > limit && o->least < need)
        return nconv__error(NCONV_OUT_OF_MEMORY,
                            "nconv: the workspace needs %zu bytes, more than the context's memory limit of %zu bytes "
                            "(in the smallest pieces this call can run in, %zu bytes)",
                            need, limit, o->least);
    nconv_status st = nconv__check_memory(ctx, need, "the workspace");
    if (st) return st;
    *owned = nconv__ctx_ws_acquire(ctx, need);
    if (!*owned) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of workspace", need);
    *a = (nconv_arena){*owned, need, 0};
    return NCONV_OK;
}

/* The room a call's threads fit in: the context's memory limit, or the caller's workspace
 * (which does not count against the limit). */
static size_t room_of(nconv_context *ctx, const void *workspace, size_t workspace_size) {
    return workspace ? workspace_size : nconv__ctx_memory_limit(ctx);
}

nconv_status nconv__workspace_within(nconv_context *ctx, const nconv_problem *p, nconv_op op,
                                     const nconv_epilogue *epi, size_t room, size_t *bytes) {
    operands o;
    nconv_status st = prepare(p, epi, &o);
    if (st) return st;
    if (!bytes) return INVALID("bytes is NULL");
    const size_t limit = nconv__ctx_memory_limit(ctx);
    if (limit && (!room || limit < room)) room = limit;
    if (op == NCONV_OP_FORWARD) *bytes = forward_ws(ctx, &o, NCONV_COPY_BOTH, room);
    else if (op == NCONV_OP_BACKWARD) *bytes = backward_ws(ctx, &o, NCONV_COPY_BOTH, NCONV_COPY_BOTH, room);
    else return INVALID("op = %d: not an operation", (int)op);
    return NCONV_OK;
}

nconv_status nconv_workspace_size(nconv_context *ctx, const nconv_problem *p, nconv_op op,
                                  const nconv_epilogue *epi, size_t *bytes) {
    return nconv__workspace_within(ctx, p, op, epi, 0, bytes);
}

nconv_status nconv_forward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                           const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                           const nconv_tensor *z, const nconv_tensor *y, void *workspace, size_t workspace_size) {
    nconv__clear_error();
    operands o;
    nconv_status st = prepare(p, epi, &o);
    if (st) return st;
    const int r = p->ndims + 2;
    if ((st = check_tensor("x", x, 1)) || (st = check_tensor("w", w, 1)) || (st = check_tensor("y", y, 1)))
        return st;
    const int64_t oc = p->out_channels;
    const nconv_operand_check ops[] = {{"x", x, r, o.xs, 0, 0, 0}, {"w", w, r, o.ws, 0, 0, 0},
                                       {"bias", bias, 1, &oc, 0, 0, 0}, {"z", z, r, o.ys, 0, 0, 0},
                                       {"y", y, r, o.ys, 0, 0, 1}};
    if ((st = nconv__check_operands(p->dtype, ops, 5))) return st;

    nconv_view xv, wv, yv, bv, zv;
    make_view(p, x, o.xs[0], o.xs[1], o.xs + 2, &xv);
    make_view(p, w, o.ws[0], o.ws[1], o.ws + 2, &wv);
    make_view(p, y, o.ys[0], o.ys[1], o.ys + 2, &yv);
    if (bias) make_vec_view(p, bias, p->out_channels, &bv);
    if (z) make_view(p, z, o.ys[0], o.ys[1], o.ys + 2, &zv);
    nconv_epi e = {bias ? &bv : NULL, z ? &zv : NULL, epi ? epi->alpha : 1.0,
                   epi && epi->activation == NCONV_ACT_RELU};

    nconv_arena arena;
    void *owned;
    const size_t need = forward_ws(ctx, &o, p->transposed ? copies_of(NCONV_DIR_BWD_D, &yv, &xv, &e, workspace)
                                                          : copies_of(NCONV_DIR_FWD, &xv, &yv, &e, workspace),
                                  room_of(ctx, workspace, workspace_size));
    if ((st = open_arena(ctx, &o, workspace, workspace_size, need, &arena, &owned))) return st;
    if (!p->transposed)
        st = run_core(ctx, &o, "forward", NCONV_DIR_FWD, &xv, &wv, &yv, &e, &arena, NULL, NULL);
    else /* the transposed input is the core's dy, its output the core's dx */
        st = run_core(ctx, &o, "forward", NCONV_DIR_BWD_D, &yv, &wv, &xv, &e, &arena, NULL, NULL);
    nconv__ctx_ws_release(ctx, owned, need);
    return st;
}

nconv_status nconv_backward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                            const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *y,
                            const nconv_tensor *dy, const nconv_tensor *dx, const nconv_tensor *dw,
                            const nconv_tensor *db, const nconv_tensor *dz, void *workspace, size_t workspace_size) {
    nconv__clear_error();
    operands o;
    nconv_status st = prepare(p, epi, &o);
    if (st) return st;
    const int r = p->ndims + 2;
    const int relu = epi && epi->activation == NCONV_ACT_RELU;
    const int any = dx || dw || db || dz;
    const int64_t ny = prod(o.ys, r);
    if ((st = check_tensor("dy", dy, any)) || (st = check_tensor("x", x, dw != NULL)) ||
        (st = check_tensor("w", w, dx != NULL)) || (st = check_tensor("y", y, relu && any)))
        return st;
    const int64_t oc = p->out_channels;
    const nconv_operand_check ops[] = {{"x", x, r, o.xs, 0, 0, 0},   {"w", w, r, o.ws, 0, 0, 0},
                                       {"y", y, r, o.ys, 0, 0, 0},   {"dy", dy, r, o.ys, 0, 0, 0},
                                       {"dx", dx, r, o.xs, 0, 0, 1}, {"dw", dw, r, o.ws, 0, 0, 1},
                                       {"db", db, 1, &oc, 0, 0, 1},  {"dz", dz, r, o.ys, 0, 0, 1}};
    if ((st = nconv__check_operands(p->dtype, ops, 8))) return st;
    if (!any) return NCONV_OK;
    /* A forced algorithm must serve every direction before dx is written. */
    const nconv_algo *forced = nconv__ctx_forced(ctx);
    const nconv_direction dx_dir = p->transposed ? NCONV_DIR_FWD : NCONV_DIR_BWD_D;
    const char *why = "";
    if (forced && ((dx && !forced->applies(&o.c, dx_dir, &why)) || (dw && !forced->applies(&o.c, NCONV_DIR_BWD_W, &why))))
        return nconv__error(NCONV_UNSUPPORTED, "nconv: algorithm = '%s' does not apply: %s", forced->name, why);

    nconv_view dyv, xv, wv, dxv, dpre;
    make_view(p, dy, o.ys[0], o.ys[1], o.ys + 2, &dyv);
    if (x) make_view(p, x, o.xs[0], o.xs[1], o.xs + 2, &xv);
    if (w) make_view(p, w, o.ws[0], o.ws[1], o.ws + 2, &wv);
    if (dx) make_view(p, dx, o.xs[0], o.xs[1], o.xs + 2, &dxv);
    /* (dpre below is channels-last where dy is) */
    const unsigned dx_copies = p->transposed ? copies_of(NCONV_DIR_FWD, &dyv, dx ? &dxv : NULL, NULL, workspace)
                                             : copies_of(NCONV_DIR_BWD_D, dx ? &dxv : NULL, &dyv, NULL, workspace);
    const unsigned dw_copies = p->transposed ? copies_of(NCONV_DIR_BWD_W, &dyv, x ? &xv : NULL, NULL, workspace)
                                             : copies_of(NCONV_DIR_BWD_W, x ? &xv : NULL, &dyv, NULL, workspace);
    nconv_arena arena;
    void *owned;
    const size_t need = backward_ws(ctx, &o, dx_copies, dw_copies, room_of(ctx, workspace, workspace_size));
    if ((st = open_arena(ctx, &o, workspace, workspace_size, need, &arena, &owned))) return st;

    /* dpre = dy * relu'(y): the caller's dy itself unless relu masks it, then
     * a dense copy in the problem's dtype, channels-last if dy is. */
    dpre = dyv;
    if (relu) {
        nconv_view yv;
        make_view(p, y, o.ys[0], o.ys[1], o.ys + 2, &yv);
        nconv__view_dense_like(&dpre, nconv__arena_take(&arena, nconv_dtype_size(p->dtype) * (size_t)ny), p->dtype, &dyv);
        nconv__relu_grad(&dpre, &dyv, &yv);
    }

    if (dx && !st) {
        if (!p->transposed)
            st = run_core(ctx, &o, "backward", NCONV_DIR_BWD_D, &dxv, &wv, &dpre, NULL, &arena, NULL, NULL);
        else st = run_core(ctx, &o, "backward", NCONV_DIR_FWD, &dpre, &wv, &dxv, NULL, &arena, NULL, NULL);
    }
    /* dw's algorithm may sum dy's channels for db on its way (not when transposed: its dy is x). */
    double *lanes = db && dw && !p->transposed ? nconv__arena_take(&arena, 4 * sizeof(double) * (size_t)oc) : NULL;
    int lanes_done = 0;
    if (dw && !st) {
        nconv_view dwv;
        make_view(p, dw, o.ws[0], o.ws[1], o.ws + 2, &dwv);
        if (!p->transposed)
            st = run_core(ctx, &o, "backward", NCONV_DIR_BWD_W, &xv, &dwv, &dpre, NULL, &arena, lanes, &lanes_done);
        else st = run_core(ctx, &o, "backward", NCONV_DIR_BWD_W, &dpre, &dwv, &xv, NULL, &arena, NULL, NULL);
    }
    if (db && !st) {
        double *sum = nconv__arena_take(&arena, 5 * sizeof(double) * (size_t)o.ys[1]);
        if (lanes_done) nconv__channel_sums_of_lanes(lanes, oc, sum);
        else nconv__channel_sums(nconv__ctx_pool(ctx), o.threads, &dpre, sum);
        nconv_view dbv;
        make_vec_view(p, db, o.ys[1], &dbv);
        nconv__scatter(&dbv, sum, 1, NULL);
    }
    if (dz && !st) {
        nconv_view dzv;
        make_view(p, dz, o.ys[0], o.ys[1], o.ys + 2, &dzv);
        nconv__scale_copy(&dzv, &dpre, epi ? epi->alpha : 1.0);
    }
    nconv__ctx_ws_release(ctx, owned, need);
    return st;
}

nconv_status nconv_algorithm_applies(const char *name, const nconv_problem *p, nconv_direction dir, int *applies,
                                     const char **why_not) {
    const nconv_algo *a = nconv__algo_find(name);
    if (!a) return INVALID("algorithm = '%s': unknown", name ? name : "(null)");
    if ((unsigned)dir > NCONV_DIR_BWD_W) return INVALID("dir = %d: not a direction", (int)dir);
    if (!applies) return INVALID("applies is NULL");
    nconv_status st = nconv_problem_validate(p);
    if (st) return st;
    nconv_core c;
    nconv__core_from_problem(p, &c);
    const char *why = "";
    *applies = a->applies(&c, dir, &why);
    if (why_not) *why_not = *applies ? "" : why;
    return NCONV_OK;
}

nconv_status nconv_algorithm_chosen(nconv_context *ctx, const nconv_problem *p, nconv_direction dir, const char **name) {
    if (!name) return INVALID("name is NULL");
    if ((unsigned)dir > NCONV_DIR_BWD_W) return INVALID("dir = %d: not a direction", (int)dir);
    nconv_status st = nconv_problem_validate(p);
    if (st || (st = nconv__check_isa())) return st;
    nconv_core c;
    nconv__core_from_problem(p, &c);
    const nconv_algo *a;
    if ((st = nconv__plan(ctx, &c, dir, NULL, &a))) return st;
    *name = a->name;
    return NCONV_OK;
}
