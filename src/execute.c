/*
 * The engine under plans and the one-shot calls: validate -> plan -> execute.
 *
 * Every user-facing operation becomes calls of the three core directions of
 * one direct convolution (nconv_core):
 *   forward            : fwd(x, w) -> y                (transposed: bwd_d(x, w) -> y)
 *   backward, dx       : bwd_d(dpre, w) -> dx           (transposed: fwd(dpre, w) -> dx)
 *   backward, dw       : bwd_w(x, dpre) -> dw           (transposed: bwd_w(dpre, x) -> dw)
 * where dpre = dy * relu'(y) is the gradient before the epilogue.
 *
 * Planning (nconv__oplan_prepare, nconv__oplan_choose) validates the problem,
 * chooses each core direction's algorithm once, then its split and the
 * threads that fit; execution runs what was chosen and never chooses again,
 * except that a run an algorithm declines goes on to the next algorithm of
 * the list (nconv__algo_next). All validation happens before any output is
 * touched; outputs are written only by the final scatters.
 */
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

static void make_view(const nconv_oplan *o, const nconv_tensor *t, const int64_t *shape, nconv_view *v) {
    nconv__make_view(o->p.ndims, o->p.dtype, t, 0, shape[0], shape[1], shape + 2, v);
}

static void make_vec_view(const nconv_oplan *o, const nconv_tensor *t, int64_t n, nconv_view *v) {
    int64_t one[NCONV_MAX_SPATIAL] = {1, 1, 1};
    nconv__make_view(o->p.ndims, o->p.dtype, t, 0, 1, n, one, v);
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

nconv_direction nconv__oplan_fwd_dir(const nconv_oplan *o) { return o->p.transposed ? NCONV_DIR_BWD_D : NCONV_DIR_FWD; }
nconv_direction nconv__oplan_dx_dir(const nconv_oplan *o) { return o->p.transposed ? NCONV_DIR_FWD : NCONV_DIR_BWD_D; }

nconv_status nconv__oplan_prepare(nconv_oplan *o, const nconv_problem *p, const nconv_epilogue *epi, int backward,
                                  unsigned outputs) {
    memset(o, 0, sizeof *o);
    nconv_status st = nconv_problem_shapes(p, o->xs, o->ws, o->ys);
    if (st || (st = nconv__check_isa())) return st;
    o->p = *p;
    o->backward = backward;
    o->outputs = outputs;
    o->relu = epi && epi->activation == NCONV_ACT_RELU;
    o->alpha = epi ? epi->alpha : 1.0;
    nconv__core_from_problem(p, &o->c);
    if (epi && (unsigned)epi->activation > NCONV_ACT_RELU)
        return INVALID("epilogue activation = %d: not an activation", (int)epi->activation);
    if (epi && !isfinite(epi->alpha)) return INVALID("epilogue alpha = %g: must be finite", epi->alpha);
    return NCONV_OK;
}

/* ---------------------------------------------------------------- planning */

/* The workspace a call aims at: max(16 MiB, its largest operand), or the context's memory
 * limit where lower, less `fixed` bytes the call takes besides its algorithm runs (but at
 * least half of it). */
static size_t call_budget(nconv_context *ctx, const nconv_oplan *o, size_t fixed) {
    const int r = o->p.ndims + 2;
    int64_t big = prod(o->xs, r);
    if (prod(o->ws, r) > big) big = prod(o->ws, r);
    if (prod(o->ys, r) > big) big = prod(o->ys, r);
    size_t limit = nconv_dtype_size(o->p.dtype) * (size_t)big;
    if (limit < ((size_t)16 << 20)) limit = (size_t)16 << 20;
    const size_t ctx_limit = nconv__ctx_memory_limit(ctx);
    if (ctx_limit && ctx_limit < limit) limit = ctx_limit;
    return fixed < limit / 2 ? limit - fixed : limit / 2;
}

/* Workspace: 64 bytes of alignment slack, then for backward the dpre buffer
 * (relu), then the largest of what is used one after another: each
 * algorithm run, the bias-gradient sums (with backward-weights' run and the
 * sums both after the bias gradient's lanes, which that run may fill). The
 * sizes of the split core calls come in as dx's (or forward's) and dw's. */
static size_t forward_total(size_t core) { return 64 + core; }

static size_t backward_fixed(const nconv_oplan *o) {
    const size_t ny = (size_t)prod(o->ys, o->p.ndims + 2);
    const size_t g = o->relu ? nconv__ws_round(nconv_dtype_size(o->p.dtype) * ny) : 0; /* dpre, only with relu */
    /* db's lanes stay from dw's run to db's sums */
    return 64 + g + nconv__ws_round(4 * sizeof(double) * (size_t)o->p.out_channels);
}

static size_t backward_total(const nconv_oplan *o, size_t dx, size_t dw) {
    const size_t db = nconv__ws_round(5 * sizeof(double) * (size_t)o->p.out_channels);
    const size_t lanes = nconv__ws_round(4 * sizeof(double) * (size_t)o->p.out_channels);
    const size_t m = lanes + (dw > db ? dw : db);
    return backward_fixed(o) - lanes + (dx > m ? dx : m);
}

static size_t dir_need(const nconv_oplan *o, nconv_direction dir, int threads) {
    return o->algo[dir] ? nconv__split_need(o->algo[dir], &o->c, dir, &o->split[dir], threads, o->copies[dir]) : 0;
}

/* The call's workspace at `threads`, for the pieces in o->split. */
static size_t need_at(const nconv_oplan *o, int threads) {
    if (!o->backward) return forward_total(dir_need(o, nconv__oplan_fwd_dir(o), threads));
    return backward_total(o, dir_need(o, nconv__oplan_dx_dir(o), threads), dir_need(o, NCONV_DIR_BWD_W, threads));
}

/* Sets o->threads to the context's thread count, or to the most threads whose scratch keeps
 * the call's workspace within `room` bytes (0: no bound) where one thread keeps it there, and
 * returns the workspace at that count (`one`: at one thread). The pieces were planned at one
 * thread, so whether a call fits, and every bit of its result, is the same at every count. */
static size_t fit_threads(nconv_context *ctx, nconv_oplan *o, size_t one, size_t room) {
    int lo = 1, hi = nconv__ctx_threads(ctx);
    o->threads = hi;
    if (hi == 1) return one;
    size_t need = need_at(o, hi);
    if (!room || need <= room || one > room) return need;
    need = one; /* need_at(lo) <= room < need_at(hi); the need grows with the threads */
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        const size_t m = need_at(o, mid);
        if (m <= room) lo = mid, need = m;
        else hi = mid;
    }
    o->threads = lo;
    return need;
}

/* Direction dir's algorithm (kept from earlier where keep is set), its split within budget
 * and that split's workspace at one thread (*one; *least: the smallest pieces'). Under the
 * benchmark policy the candidates are timed on the split's first (largest) piece. */
static nconv_status choose_dir(nconv_context *ctx, nconv_oplan *o, nconv_direction dir, size_t budget, int keep,
                               size_t *one, size_t *least) {
    const nconv_algo *a = keep ? o->algo[dir] : NULL;
    nconv_status st;
    if (!a && (st = nconv__choose(ctx, &o->c, dir, o->copies[dir], &a))) return st;
    *one = nconv__split_choose(a, &o->c, dir, o->copies[dir], budget, &o->split[dir], least);
    if (!keep && nconv__ctx_benchmarks(ctx)) {
        nconv_piece first;
        const nconv_algo *b = a;
        if (nconv__split_piece(&o->c, dir, &o->split[dir], 0, &first) &&
            (st = nconv__choose_timed(ctx, &first.c, dir, o->copies[dir], nconv__ctx_threads(ctx), a, &b)))
            return st;
        if (b != a) {
            a = b;
            *one = *least = nconv__split_need(a, &o->c, dir, &o->split[dir], 1, o->copies[dir]);
        }
    }
    o->algo[dir] = a;
    return NCONV_OK;
}

nconv_status nconv__oplan_choose(nconv_context *ctx, nconv_oplan *o, const unsigned copies[3], size_t room, int keep) {
    nconv_status st;
    size_t one, least;
    for (int d = 0; d < 3; d++) o->copies[d] = copies[d];
    o->k = nconv__kernels();
    if (!o->backward) {
        const nconv_direction dir = nconv__oplan_fwd_dir(o);
        if ((st = choose_dir(ctx, o, dir, call_budget(ctx, o, forward_total(0)), keep, &one, &least))) return st;
        o->least = forward_total(least);
        o->need = fit_threads(ctx, o, forward_total(one), room);
        return NCONV_OK;
    }
    /* dx's run comes after db's lanes are given back (see backward_total): a limit of the
     * call's own workspace keeps its pieces */
    const size_t lanes = nconv__ws_round(4 * sizeof(double) * (size_t)o->p.out_channels);
    const size_t dx_budget = call_budget(ctx, o, backward_fixed(o) - lanes);
    const size_t dw_budget = call_budget(ctx, o, backward_fixed(o));
    size_t a = 0, b = 0, least_dx = 0, least_dw = 0;
    if ((o->outputs & NCONV_OUT_DX) &&
        (st = choose_dir(ctx, o, nconv__oplan_dx_dir(o), dx_budget, keep, &a, &least_dx)))
        return st;
    if ((o->outputs & NCONV_OUT_DW) && (st = choose_dir(ctx, o, NCONV_DIR_BWD_W, dw_budget, keep, &b, &least_dw)))
        return st;
    o->least = backward_total(o, least_dx, least_dw);
    o->need = fit_threads(ctx, o, backward_total(o, a, b), room);
    return NCONV_OK;
}

void nconv__layout_copies(const nconv_oplan *o, nconv_layout layout, int with_z, unsigned copies[3]) {
    const int f32 = o->p.dtype == NCONV_F32, nxc = layout == NCONV_LAYOUT_NXC;
    /* Dense NCHW activations of one channel are channels-last as well (the core's x has C
     * channels, its y O, in every direction). */
    const unsigned ncx = (o->c.C == 1 ? 0u : NCONV_COPY_X) | (o->c.O == 1 ? 0u : NCONV_COPY_Y);
    /* Other dtypes are converted into f32 copies by the channels-last algorithms; channels-last
     * ones still rule out the NCHW plane path. */
    for (int d = 0; d < 3; d++)
        copies[d] = !f32 ? NCONV_COPY_BOTH | (nxc ? NCONV_ACTS_NXC : 0u)
                    : nxc ? NCONV_ACTS_NXC
                    : layout == NCONV_LAYOUT_NCX ? ncx
                                                 : NCONV_COPY_BOTH;
    /* z is added while the output is scattered from its copy */
    if (f32 && layout != NCONV_LAYOUT_ANY && with_z && !o->backward)
        copies[nconv__oplan_fwd_dir(o)] |= o->p.transposed ? NCONV_COPY_X : NCONV_COPY_Y;
}

/* --------------------------------------------------------------- execution */

static void verbose(const nconv_oplan *o, const char *op, nconv_direction dir, const nconv_algo *a, const char *path,
                    const nconv_core *c, int64_t piece, int64_t pieces) {
    const char *env = getenv("NCONV_VERBOSE");
    if (!env || strcmp(env, "1")) return;
    static const char *const dn[] = {"fwd", "bwd_d", "bwd_w"};
    char desc[512] = "";
    nconv_problem_to_desc(&o->p, desc, sizeof desc);
    fprintf(stderr, "nconv_verbose,%s,core=%s,algo=%s", op, dn[dir], a->name);
    if (path) fprintf(stderr, ",path=%s", path);
    if (a != o->algo[dir]) fprintf(stderr, ",declined by %s", o->algo[dir]->name);
    if (pieces > 1)
        fprintf(stderr, ",piece %lld of %lld: mb%lld in %lldx%lldx%lld out %lldx%lldx%lld", (long long)piece + 1,
                (long long)pieces, (long long)c->N, (long long)c->in[0], (long long)c->in[1], (long long)c->in[2],
                (long long)c->out[0], (long long)c->out[1], (long long)c->out[2]);
    for (int i = 0; i < nconv__algo_count(); i++) {
        const nconv_algo *b = nconv__algo_at(i);
        const char *why = "";
        if (b == a || b == o->algo[dir]) continue;
        if (!b->applies(c, dir, &why)) fprintf(stderr, ",skipped %s: %s", b->name, why);
        else if (b->preferred && !b->preferred(c, dir))
            fprintf(stderr, ",skipped %s: the heuristic prefers another here", b->name);
    }
    fprintf(stderr, ",%s\n", desc);
}

/* The planned algorithm on piece e, and where it declines the operands, the algorithms it
 * goes on to; NCONV_VERBOSE names the one that ran. */
static nconv_status run_piece(const nconv_oplan *o, const char *op, nconv_exec *e, int64_t piece, int64_t pieces) {
    const nconv_algo *a = o->algo[e->dir];
    const size_t used = e->ws->used;
    const char *path = NULL;
    e->path = &path;
    nconv_status st;
    for (;;) {
        if (e->db_done) *e->db_done = 0;
        path = NULL;
        st = a->run(e);
        e->ws->used = used;
        if (!nconv__declined(st)) break;
        a = nconv__algo_next(a, e->c, e->dir, st, e->accumulate);
        e->packed = NULL; /* packed for the algorithm that declined */
    }
    if (!st) verbose(o, op, e->dir, a, path, e->c, piece, pieces);
    return st;
}

/* db_lanes, db_done: see nconv_exec (NULL, NULL: no bias gradient wanted). The call runs in
 * the pieces of o->split[dir] (see split.c); packed: w as the direction's algorithm packs it. */
static nconv_status run_core(nconv_context *ctx, const nconv_oplan *o, const char *op, nconv_direction dir,
                             const nconv_view *x, const nconv_view *w, const nconv_view *y, const nconv_epi *epi,
                             nconv_arena *ws, double *db_lanes, int *db_done, const void *packed) {
    const nconv_split *s = &o->split[dir];
    const int64_t pieces = nconv__split_pieces(&o->c, dir, s);
    if (pieces == 1) {
        nconv_exec e = {&o->c, dir, x, w, y, epi, ws, o->threads, nconv__ctx_pool(ctx), db_lanes, db_done, 0, o->k,
                        packed, NULL, &o->c};
        return run_piece(o, op, &e, 0, 1);
    }
    /* bwd_w: the first piece writes dw and db's lanes; the others add into dw, or write a dense
     * dw that is added, and write lanes of their own, added to the first's in piece order */
    const int acc = dir == NCONV_DIR_BWD_W && o->algo[dir]->accumulates;
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
                        nconv__ctx_pool(ctx), pl, pl ? &piece_done : NULL, more && acc, o->k, packed,
                        NULL, &o->c};
        nconv_status st = run_piece(o, op, &e, i, pieces);
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

/* The channels-last copies (NCONV_COPY_*) a core call on these views makes (an absent output:
 * both, as planned). */
static unsigned copies_of(nconv_direction dir, const nconv_view *x, const nconv_view *y, const nconv_epi *epi) {
    if (!x || !y) return NCONV_COPY_BOTH;
    const nconv_exec e = {.dir = dir, .x = x, .y = y, .epi = epi};
    return nconv__exec_copies(&e) | (nconv__view_is_nxc(x) && nconv__view_is_nxc(y) ? NCONV_ACTS_NXC : 0u);
}

/* NCONV_INVALID_ARGUMENT when the views need a channels-last copy the plan has no room for
 * (xname, yname: the core x's and y's names in the call). */
static nconv_status check_copies(unsigned planned, unsigned actual, const char *xname, const char *yname) {
    if (actual & ~planned & NCONV_COPY_BOTH)
        return INVALID("%s: its strides need a channels-last copy, which the plan was not made for (the layout of "
                       "its desc: a plan for NCONV_LAYOUT_ANY takes any strides)",
                       actual & ~planned & NCONV_COPY_X ? xname : yname);
    /* A plan for channels-last 16-bit operands reads them in place (it has no room for copies) */
    if ((planned & NCONV_ACTS_NXC) && !(actual & NCONV_ACTS_NXC))
        return INVALID("%s, %s: not both channels-last, which the plan was made for (the layout of its desc: a plan "
                       "for NCONV_LAYOUT_ANY takes any strides)",
                       xname, yname);
    return NCONV_OK;
}

static nconv_status open_arena(nconv_context *ctx, const nconv_oplan *o, void *workspace, size_t size, nconv_arena *a,
                               void **owned) {
    const size_t need = o->need;
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

/* ----------------------------------------------------------------- forward */

nconv_status nconv__fwd_ops(const nconv_oplan *o, const nconv_tensor *x, const nconv_tensor *w,
                            const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *y, nconv_fwd_ops *v) {
    const int r = o->p.ndims + 2;
    nconv_status st;
    if ((st = check_tensor("x", x, 1)) || (st = check_tensor("w", w, 1)) || (st = check_tensor("y", y, 1)))
        return st;
    const int64_t oc = o->p.out_channels;
    const nconv_operand_check ops[] = {{"x", x, r, o->xs, 0, 0, 0}, {"w", w, r, o->ws, 0, 0, 0},
                                       {"bias", bias, 1, &oc, 0, 0, 0}, {"z", z, r, o->ys, 0, 0, 0},
                                       {"y", y, r, o->ys, 0, 0, 1}};
    if ((st = nconv__check_operands(o->p.dtype, ops, 5))) return st;
    make_view(o, x, o->xs, &v->x);
    make_view(o, w, o->ws, &v->w);
    make_view(o, y, o->ys, &v->y);
    if (bias) make_vec_view(o, bias, oc, &v->bias);
    if (z) make_view(o, z, o->ys, &v->z);
    v->e = (nconv_epi){bias ? &v->bias : NULL, z ? &v->z : NULL, o->alpha, o->relu};
    return NCONV_OK;
}

void nconv__fwd_copies(const nconv_oplan *o, const nconv_fwd_ops *v, unsigned copies[3]) {
    copies[0] = copies[1] = copies[2] = NCONV_COPY_BOTH;
    if (!o->p.transposed) copies[NCONV_DIR_FWD] = copies_of(NCONV_DIR_FWD, &v->x, &v->y, &v->e);
    else copies[NCONV_DIR_BWD_D] = copies_of(NCONV_DIR_BWD_D, &v->y, &v->x, &v->e);
}

nconv_status nconv__fwd_check_layout(const nconv_oplan *o, const nconv_fwd_ops *v) {
    unsigned actual[3];
    nconv__fwd_copies(o, v, actual);
    const nconv_direction dir = nconv__oplan_fwd_dir(o);
    return check_copies(o->copies[dir], actual[dir], o->p.transposed ? "y" : "x", o->p.transposed ? "x" : "y");
}

nconv_status nconv__fwd_run(nconv_context *ctx, const nconv_oplan *o, const nconv_fwd_ops *v, const void *packed,
                            void *workspace, size_t workspace_size) {
    nconv_arena arena;
    void *owned;
    nconv_status st = open_arena(ctx, o, workspace, workspace_size, &arena, &owned);
    if (st) return st;
    if (!o->p.transposed)
        st = run_core(ctx, o, "forward", NCONV_DIR_FWD, &v->x, &v->w, &v->y, &v->e, &arena, NULL, NULL, packed);
    else /* the transposed input is the core's dy, its output the core's dx */
        st = run_core(ctx, o, "forward", NCONV_DIR_BWD_D, &v->y, &v->w, &v->x, &v->e, &arena, NULL, NULL, packed);
    nconv__ctx_ws_release(ctx, owned, o->need);
    return st;
}

/* ---------------------------------------------------------------- backward */

nconv_status nconv__bwd_ops(const nconv_oplan *o, const nconv_tensor *x, const nconv_tensor *w,
                            const nconv_tensor *y, const nconv_tensor *dy, const nconv_tensor *dx,
                            const nconv_tensor *dw, const nconv_tensor *db, const nconv_tensor *dz, nconv_bwd_ops *v) {
    const int r = o->p.ndims + 2;
    const int any = dx || dw || db || dz;
    nconv_status st;
    if ((st = check_tensor("dy", dy, any)) || (st = check_tensor("x", x, dw != NULL)) ||
        (st = check_tensor("w", w, dx != NULL)) || (st = check_tensor("y", y, o->relu && any)))
        return st;
    const int64_t oc = o->p.out_channels;
    const nconv_operand_check ops[] = {{"x", x, r, o->xs, 0, 0, 0},   {"w", w, r, o->ws, 0, 0, 0},
                                       {"y", y, r, o->ys, 0, 0, 0},   {"dy", dy, r, o->ys, 0, 0, 0},
                                       {"dx", dx, r, o->xs, 0, 0, 1}, {"dw", dw, r, o->ws, 0, 0, 1},
                                       {"db", db, 1, &oc, 0, 0, 1},  {"dz", dz, r, o->ys, 0, 0, 1}};
    if ((st = nconv__check_operands(o->p.dtype, ops, 8))) return st;
    memset(v, 0, sizeof *v);
    v->outputs = (dx ? NCONV_OUT_DX : 0u) | (dw ? NCONV_OUT_DW : 0u) | (db ? NCONV_OUT_DB : 0u) |
                 (dz ? NCONV_OUT_DZ : 0u);
    if (!any) return NCONV_OK;
    make_view(o, dy, o->ys, &v->dy);
    if (x) make_view(o, x, o->xs, &v->x);
    if (w) make_view(o, w, o->ws, &v->w);
    if (y && o->relu) make_view(o, y, o->ys, &v->y);
    if (dx) make_view(o, dx, o->xs, &v->dx);
    if (dw) make_view(o, dw, o->ws, &v->dw);
    if (db) make_vec_view(o, db, oc, &v->db);
    if (dz) make_view(o, dz, o->ys, &v->dz);
    return NCONV_OK;
}

/* (dpre is channels-last where dy is) */
void nconv__bwd_copies(const nconv_oplan *o, const nconv_bwd_ops *v, unsigned copies[3]) {
    const nconv_view *dx = v->outputs & NCONV_OUT_DX ? &v->dx : NULL;
    const nconv_view *x = v->outputs & NCONV_OUT_DW ? &v->x : NULL;
    copies[0] = copies[1] = copies[2] = NCONV_COPY_BOTH;
    if (!o->p.transposed) {
        copies[NCONV_DIR_BWD_D] = copies_of(NCONV_DIR_BWD_D, dx, &v->dy, NULL);
        copies[NCONV_DIR_BWD_W] = copies_of(NCONV_DIR_BWD_W, x, &v->dy, NULL);
    } else {
        copies[NCONV_DIR_FWD] = copies_of(NCONV_DIR_FWD, &v->dy, dx, NULL);
        copies[NCONV_DIR_BWD_W] = copies_of(NCONV_DIR_BWD_W, &v->dy, x, NULL);
    }
}

nconv_status nconv__check_outputs(unsigned given, unsigned planned) {
    static const char *const names[] = {"dx", "dw", "db", "dz", "ggy", "gx", "gw"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (given & ~planned & (1u << i))
            return INVALID("%s is given, but the plan was made without it (desc outputs)", names[i]);
    return NCONV_OK;
}

nconv_status nconv__bwd_check_layout(const nconv_oplan *o, const nconv_bwd_ops *v) {
    nconv_status st = nconv__check_outputs(v->outputs, o->outputs);
    if (st || !v->outputs) return st;
    unsigned actual[3];
    nconv__bwd_copies(o, v, actual);
    const int t = o->p.transposed;
    if (v->outputs & NCONV_OUT_DX)
        st = check_copies(o->copies[nconv__oplan_dx_dir(o)], actual[nconv__oplan_dx_dir(o)], t ? "dy" : "dx",
                          t ? "dx" : "dy");
    if (!st && (v->outputs & NCONV_OUT_DW))
        st = check_copies(o->copies[NCONV_DIR_BWD_W], actual[NCONV_DIR_BWD_W], t ? "dy" : "x", t ? "x" : "dy");
    return st;
}

nconv_status nconv__bwd_run(nconv_context *ctx, const nconv_oplan *o, const nconv_bwd_ops *v, const void *packed,
                            void *workspace, size_t workspace_size) {
    if (!v->outputs) return NCONV_OK;
    nconv_arena arena;
    void *owned;
    nconv_status st = open_arena(ctx, o, workspace, workspace_size, &arena, &owned);
    if (st) return st;
    const nconv_problem *p = &o->p;
    const int64_t oc = p->out_channels;

    /* dpre = dy * relu'(y): the caller's dy itself unless relu masks it, then
     * a dense copy in the problem's dtype, channels-last if dy is. */
    nconv_view dpre = v->dy;
    if (o->relu) {
        const size_t ny = (size_t)prod(o->ys, p->ndims + 2);
        nconv__view_dense_like(&dpre, nconv__arena_take(&arena, nconv_dtype_size(p->dtype) * ny), p->dtype, &v->dy);
        nconv__relu_grad(&dpre, &v->dy, &v->y);
    }
    if (v->outputs & NCONV_OUT_DX) {
        if (!p->transposed)
            st = run_core(ctx, o, "backward", NCONV_DIR_BWD_D, &v->dx, &v->w, &dpre, NULL, &arena, NULL, NULL, packed);
        else st = run_core(ctx, o, "backward", NCONV_DIR_FWD, &dpre, &v->w, &v->dx, NULL, &arena, NULL, NULL, packed);
    }
    /* dw's algorithm may sum dy's channels for db on its way (not when transposed: its dy is x). */
    const int db = (v->outputs & NCONV_OUT_DB) != 0, dw = (v->outputs & NCONV_OUT_DW) != 0;
    double *lanes = db && dw && !p->transposed ? nconv__arena_take(&arena, 4 * sizeof(double) * (size_t)oc) : NULL;
    int lanes_done = 0;
    if (dw && !st) {
        if (!p->transposed)
            st = run_core(ctx, o, "backward", NCONV_DIR_BWD_W, &v->x, &v->dw, &dpre, NULL, &arena, lanes, &lanes_done,
                          NULL);
        else st = run_core(ctx, o, "backward", NCONV_DIR_BWD_W, &dpre, &v->dw, &v->x, NULL, &arena, NULL, NULL, NULL);
    }
    if (db && !st) {
        double *sum = nconv__arena_take(&arena, 5 * sizeof(double) * (size_t)oc);
        if (lanes_done) nconv__channel_sums_of_lanes(lanes, oc, sum);
        else nconv__channel_sums(nconv__ctx_pool(ctx), o->threads, &dpre, sum);
        nconv__scatter(&v->db, sum, 1, NULL);
    }
    if ((v->outputs & NCONV_OUT_DZ) && !st) nconv__scale_copy(&v->dz, &dpre, o->alpha);
    nconv__ctx_ws_release(ctx, owned, o->need);
    return st;
}

/* ------------------------------------------------------------ packed weights */

size_t nconv__oplan_pack_size(const nconv_oplan *o, nconv_direction dir, size_t *scratch) {
    const nconv_algo *a = o->algo[dir];
    *scratch = 0;
    return a && a->pack_size ? a->pack_size(&o->c, dir, o->threads, scratch) : 0;
}

nconv_status nconv__oplan_pack(nconv_context *ctx, const nconv_oplan *o, nconv_direction dir, const nconv_tensor *w,
                               void *dst, void *scratch, size_t scratch_size) {
    nconv_view wv;
    make_view(o, w, o->ws, &wv);
    nconv_arena arena = {scratch, scratch_size, 0};
    const nconv_exec e = {.c = &o->c, .dir = dir, .w = &wv, .ws = &arena, .threads = o->threads,
                          .pool = nconv__ctx_pool(ctx), .k = o->k};
    return o->algo[dir]->pack(&e, dst);
}
