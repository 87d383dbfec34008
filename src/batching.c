/*
 * Batched operands (functorch's convolution batching rules): B problems
 * become one, before planning, so every algorithm serves them.
 *   - Only activations batched (weight and bias shared), and no per-sample
 *     weight gradient asked for: fold B into the batch, N' = B * N.
 *   - Otherwise fold B into the groups: channels B * C and B * O, groups
 *     B * G, weights stacked along their first dim; a shared operand is
 *     repeated. This covers batched weights (ensembles) and per-sample
 *     gradients (x and dy batched, w shared: dw' holds dw per sample).
 * A folded operand is the caller's memory when its strides already express
 * the fold (e.g. a contiguous [B, N, ...] input, stacked [B, O, ...] weights);
 * else one copy of the whole operand, never one per batch entry.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

/* One operand: the caller's tensor with its batch stride, and its folded form. */
typedef struct operand {
    const nconv_tensor *user;
    int64_t bstride;   /* 0: shared */
    int64_t a, c;      /* per-b logical shape [a, c, sp...] */
    const int64_t *sp; /* spatial sizes (weights: kernel) */
    int dim;           /* folded along dim 0 (batch, weights, bias) or dim 1 (channels) */
    nconv_tensor fold; /* the folded tensor */
    void *owned;       /* its memory when it is a copy */
} operand;

static int64_t spatial(const nconv_problem *p, const int64_t *sp) {
    int64_t s = 1;
    for (int i = 0; i < p->ndims; i++) s *= sp[i];
    return s;
}

/* Slice b of a caller's batched tensor t (NULL stays NULL; batch stride 0: t itself). */
static const nconv_tensor *slice(const nconv_problem *p, const nconv_tensor *t, int64_t b, int64_t bstride,
                                 nconv_tensor *out) {
    if (!t) return NULL;
    *out = *t;
    out->data = (char *)t->data + (ptrdiff_t)(b * bstride * (int64_t)nconv_dtype_size(p->dtype));
    return out;
}

/* Element offset of slice b in the folded tensor. */
static int64_t slice_offset(const operand *o, int64_t b) { return b * (o->dim == 0 ? o->a : o->c) * o->fold.stride[o->dim]; }

/* Copies slice b between the caller's tensor and the folded one. */
static void slice_copy(const nconv_problem *p, const operand *o, int64_t b, int to_fold) {
    nconv_view u, f;
    nconv__make_view(p->ndims, p->dtype, o->user, b * o->bstride, o->a, o->c, o->sp, &u);
    nconv__make_view(p->ndims, p->dtype, &o->fold, slice_offset(o, b), o->a, o->c, o->sp, &f);
    if (to_fold) nconv__scale_copy(&f, &u, 1.0);
    else nconv__scale_copy(&u, &f, 1.0);
}

static int viewable(const operand *o) {
    const int64_t len = o->dim == 0 ? o->a : o->c; /* extent of the folded dim per b */
    return o->bstride != 0 && (len == 1 || o->bstride == len * o->user->stride[o->dim]);
}

/* Bytes of o's copy (0: the fold is a view of the caller's memory). */
static size_t fold_bytes(const nconv_problem *p, int64_t B, const operand *o) {
    return viewable(o) ? 0 : nconv__ws_round(nconv_dtype_size(p->dtype) * (size_t)(B * o->a * o->c * spatial(p, o->sp)));
}

/* Sets up o->fold: a view of the caller's memory when the strides allow,
 * else a dense copy (filled from the caller for inputs). */
static nconv_status fold_operand(nconv_context *ctx, const nconv_problem *p, int64_t B, operand *o, int input) {
    const nconv_tensor *t = o->user;
    if (viewable(o)) {
        o->fold = *t;
        if ((o->dim == 0 ? o->a : o->c) == 1) o->fold.stride[o->dim] = o->bstride;
        return NCONV_OK;
    }
    const size_t bytes = fold_bytes(p, B, o);
    o->owned = nconv__alloc(ctx, bytes);
    if (!o->owned) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes for a batch fold", bytes);
    int64_t shape[NCONV_MAX_DIMS] = {o->a * (o->dim == 0 ? B : 1), o->c * (o->dim == 1 ? B : 1)};
    for (int i = 0; i < p->ndims; i++) shape[2 + i] = o->sp[i];
    nconv_tensor_init(&o->fold, o->owned, p->ndims + 2, shape, NCONV_LAYOUT_NCX);
    if (input)
        for (int64_t b = 0; b < B; b++) slice_copy(p, o, b, 1);
    return NCONV_OK;
}

static void unfold_output(const nconv_problem *p, int64_t B, const operand *o) {
    if (!o->owned) return; /* written in place */
    for (int64_t b = 0; b < B; b++) slice_copy(p, o, b, 0);
}

/* The folded problem, and the shapes of one slice. */
typedef struct plan {
    nconv_problem p;
    int64_t B;
    int by_n;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
} plan;

static nconv_status make_plan(const nconv_problem *p, const nconv_batch *bt, int by_n, plan *pl) {
    if (!bt) return INVALID("batch is NULL");
    if (bt->size < 1) return INVALID("batch size = %lld: must be >= 1", (long long)bt->size);
    nconv_status st = nconv_problem_shapes(p, pl->xs, pl->ws, pl->ys);
    if (st) return st;
    const int64_t B = bt->size;
    pl->p = *p;
    pl->B = B;
    pl->by_n = by_n;
    int64_t t;
    if (by_n) {
        if (!nconv__mul_ok(p->batch, B, &t)) return INVALID("batch size = %lld: batch * B overflows", (long long)B);
        pl->p.batch = t;
    } else if (!nconv__mul_ok(p->in_channels, B, &pl->p.in_channels) || !nconv__mul_ok(p->out_channels, B, &pl->p.out_channels) ||
               !nconv__mul_ok(p->groups, B, &pl->p.groups)) {
        return INVALID("batch size = %lld: channels * B overflows", (long long)B);
    }
    return nconv_problem_validate(&pl->p);
}

/* Activation operand of shape [N, C, sp] (per b). */
static operand act(const plan *pl, const nconv_tensor *t, int64_t bstride, const int64_t *shape) {
    operand o = {t, bstride, shape[0], shape[1], shape + 2, pl->by_n ? 0 : 1, {0}, NULL};
    return o;
}

static operand weight(const plan *pl, const nconv_tensor *t, int64_t bstride) {
    operand o = {t, bstride, pl->ws[0], pl->ws[1], pl->ws + 2, 0, {0}, NULL};
    return o;
}

/* A bias [C] as an operand of shape [C, 1, 1...]: folded along dim 0. */
static operand vector(const nconv_tensor *t, int64_t bstride, int64_t n, nconv_tensor *as_act) {
    static const int64_t ones[NCONV_MAX_SPATIAL] = {1, 1, 1};
    memset(as_act, 0, sizeof *as_act);
    as_act->data = t->data;
    as_act->stride[0] = t->stride[0];
    operand o = {as_act, bstride, n, 1, ones, 0, {0}, NULL};
    return o;
}

static void release(nconv_context *ctx, operand *ops, int n) {
    for (int i = 0; i < n; i++) nconv__free(ctx, ops[i].owned);
}

/* Every copy and the folded call's workspace, taken before anything is
 * written (and checked against the memory limit first: the call's threads
 * fit in what the copies leave of it). `need[n]` says which operands take
 * part and whether they are inputs (2) or outputs (1). */
enum { ABSENT, OUTPUT, INPUT, AS_IS };
static nconv_status take_memory(nconv_context *ctx, const nconv_problem *p, const plan *pl, operand *ops,
                                const int *need, int n, nconv_op op, const nconv_epilogue *epi, void **ws,
                                size_t *ws_size) {
    const int64_t B = pl->B;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (need[i] == INPUT || need[i] == OUTPUT) total += fold_bytes(p, B, &ops[i]);
    const size_t room = nconv__ctx_room(ctx, total);
    nconv_status st = nconv__workspace_within(ctx, &pl->p, op, epi, room, ws_size);
    if (st || (st = nconv__check_memory(ctx, total + *ws_size, "the batched call"))) return st;
    for (int i = 0; i < n && !st; i++) {
        if (need[i] == AS_IS) ops[i].fold = *ops[i].user;
        else if (need[i] != ABSENT) st = fold_operand(ctx, p, B, &ops[i], need[i] == INPUT);
    }
    if (!st && !(*ws = nconv__ctx_ws_acquire(ctx, *ws_size)))
        st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of workspace", *ws_size);
    if (st) release(ctx, ops, n);
    return st;
}

nconv_status nconv_forward_batched(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                   const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                   const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *y) {
    nconv__clear_error();
    if (!bt) return INVALID("batch is NULL");
    if (p && nconv__is_complex(p->dtype)) {
        const nconv_status cuda_st = nconv__ctx_cpu_only(ctx, "a complex nconv_forward_batched");
        return cuda_st ? cuda_st : nconv__complex_forward(ctx, p, epi, bt, x, w, bias, z, y, NULL, 0);
    }
    if (!x || !w || !y) return INVALID("%s is NULL but required", !x ? "x" : !w ? "w" : "y");
    if (!bt->y) return INVALID("batch y stride = 0: every output carries the batch");
    plan pl;
    nconv_status st = make_plan(p, bt, !bt->w && !bt->bias, &pl);
    if (st) return st;
    const int64_t B = bt->size, oc = p->out_channels;
    const int r = p->ndims + 2;
    const nconv_operand_check chk[] = {{"x", x, r, pl.xs, B, bt->x, 0},       {"w", w, r, pl.ws, B, bt->w, 0},
                                       {"bias", bias, 1, &oc, B, bt->bias, 0}, {"z", z, r, pl.ys, B, bt->z, 0},
                                       {"y", y, r, pl.ys, B, bt->y, 1}};
    if ((st = nconv__check_operands(p->dtype, chk, 5))) return st;
    if (nconv__ctx_cuda(ctx)) { /* on the device: the unbatched call per b, on slices */
        nconv_tensor s[5];
        for (int64_t b = 0; !st && b < B; b++)
            st = nconv_forward(ctx, p, epi, slice(p, x, b, bt->x, &s[0]), slice(p, w, b, bt->w, &s[1]),
                               slice(p, bias, b, bt->bias, &s[2]), slice(p, z, b, bt->z, &s[3]),
                               slice(p, y, b, bt->y, &s[4]), NULL, 0);
        return st;
    }
    nconv_tensor bias_act;
    enum { X, W, Y, Z, BIAS, NOPS };
    operand ops[NOPS] = {act(&pl, x, bt->x, pl.xs), weight(&pl, w, bt->w), act(&pl, y, bt->y, pl.ys),
                         act(&pl, z ? z : y, z ? bt->z : 0, pl.ys),
                         vector(bias ? bias : y, bias ? bt->bias : 0, oc, &bias_act)};
    /* Shared weight and bias need no fold when B goes into the batch. */
    const int need[NOPS] = {INPUT, pl.by_n ? AS_IS : INPUT, OUTPUT, z ? INPUT : ABSENT,
                            !bias ? ABSENT : pl.by_n ? AS_IS : INPUT};
    void *ws;
    size_t ws_size;
    if ((st = take_memory(ctx, p, &pl, ops, need, NOPS, NCONV_OP_FORWARD, epi, &ws, &ws_size))) return st;
    st = nconv_forward(ctx, &pl.p, epi, &ops[X].fold, &ops[W].fold, bias ? &ops[BIAS].fold : NULL,
                       z ? &ops[Z].fold : NULL, &ops[Y].fold, ws, ws_size);
    if (!st) unfold_output(p, B, &ops[Y]);
    nconv__ctx_ws_release(ctx, ws, ws_size);
    release(ctx, ops, NOPS);
    return st;
}

nconv_status nconv_backward_batched(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                    const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                    const nconv_tensor *y, const nconv_tensor *dy, const nconv_tensor *dx,
                                    const nconv_tensor *dw, const nconv_tensor *db, const nconv_tensor *dz) {
    nconv__clear_error();
    if (!bt) return INVALID("batch is NULL");
    if (p && nconv__is_complex(p->dtype)) {
        const nconv_status cuda_st = nconv__ctx_cpu_only(ctx, "a complex nconv_backward_batched");
        return cuda_st ? cuda_st : nconv__complex_backward(ctx, p, epi, bt, x, w, y, dy, dx, dw, db, dz, NULL, 0);
    }
    if (!dy) return INVALID("dy is NULL but required");
    if ((dx && !bt->dx) || (dw && !bt->dw) || (db && !bt->db) || (dz && !bt->dz))
        return INVALID("batch stride of %s = 0: every output carries the batch",
                       dx && !bt->dx ? "dx" : dw && !bt->dw ? "dw" : db && !bt->db ? "db" : "dz");
    const int relu = epi && epi->activation == NCONV_ACT_RELU;
    if (dw && !x) return INVALID("x is NULL but required");
    if (dx && !w) return INVALID("w is NULL but required");
    if (relu && !y) return INVALID("y is NULL but required");
    /* Per-b weight and bias gradients need the group fold. */
    plan pl;
    nconv_status st = make_plan(p, bt, !bt->w && !dw && !db, &pl);
    if (st) return st;
    const int64_t B = bt->size, oc = p->out_channels;
    const int r = p->ndims + 2;
    const nconv_operand_check chk[] = {
        {"x", x, r, pl.xs, B, bt->x, 0},   {"w", w, r, pl.ws, B, bt->w, 0},   {"y", y, r, pl.ys, B, bt->y, 0},
        {"dy", dy, r, pl.ys, B, bt->dy, 0}, {"dx", dx, r, pl.xs, B, bt->dx, 1}, {"dw", dw, r, pl.ws, B, bt->dw, 1},
        {"db", db, 1, &oc, B, bt->db, 1},   {"dz", dz, r, pl.ys, B, bt->dz, 1}};
    if ((st = nconv__check_operands(p->dtype, chk, 8))) return st;
    if (nconv__ctx_cuda(ctx)) {
        nconv_tensor s[8];
        for (int64_t b = 0; !st && b < B; b++)
            st = nconv_backward(ctx, p, epi, slice(p, x, b, bt->x, &s[0]), slice(p, w, b, bt->w, &s[1]),
                                slice(p, y, b, bt->y, &s[2]), slice(p, dy, b, bt->dy, &s[3]),
                                slice(p, dx, b, bt->dx, &s[4]), slice(p, dw, b, bt->dw, &s[5]),
                                slice(p, db, b, bt->db, &s[6]), slice(p, dz, b, bt->dz, &s[7]), NULL, 0);
        return st;
    }
    nconv_tensor db_act;
    enum { X, W, Y, DY, DX, DW, DB, DZ, NOPS };
    operand ops[NOPS] = {act(&pl, x ? x : dy, x ? bt->x : 0, pl.xs), weight(&pl, w ? w : dy, w ? bt->w : 0),
                         act(&pl, y ? y : dy, y ? bt->y : 0, pl.ys), act(&pl, dy, bt->dy, pl.ys),
                         act(&pl, dx ? dx : dy, bt->dx, pl.xs), weight(&pl, dw ? dw : dy, bt->dw),
                         vector(db ? db : dy, bt->db, oc, &db_act), act(&pl, dz ? dz : dy, bt->dz, pl.ys)};
    const int need[NOPS] = {x ? INPUT : ABSENT, !w ? ABSENT : pl.by_n ? AS_IS : INPUT, relu && y ? INPUT : ABSENT,
                            INPUT, dx ? OUTPUT : ABSENT, dw ? OUTPUT : ABSENT, db ? OUTPUT : ABSENT,
                            dz ? OUTPUT : ABSENT};
    void *ws;
    size_t ws_size;
    if ((st = take_memory(ctx, p, &pl, ops, need, NOPS, NCONV_OP_BACKWARD, epi, &ws, &ws_size))) return st;
    st = nconv_backward(ctx, &pl.p, epi, x ? &ops[X].fold : NULL, w ? &ops[W].fold : NULL,
                        need[Y] ? &ops[Y].fold : NULL, &ops[DY].fold, dx ? &ops[DX].fold : NULL,
                        dw ? &ops[DW].fold : NULL, db ? &ops[DB].fold : NULL, dz ? &ops[DZ].fold : NULL, ws, ws_size);
    if (!st)
        for (int n = DX; n < NOPS; n++)
            if (need[n]) unfold_output(p, B, &ops[n]);
    nconv__ctx_ws_release(ctx, ws, ws_size);
    release(ctx, ops, NOPS);
    return st;
}

/* Double backward of batched operands: every output is per b (gw too, even with w shared), so B
 * always goes into the groups; ggb folds as a bias. */
nconv_status nconv_double_backward_batched(nconv_context *ctx, const nconv_problem *p, const nconv_double_batch *bt,
                                           const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *dy,
                                           const nconv_tensor *ggx, const nconv_tensor *ggw, const nconv_tensor *ggb,
                                           const nconv_tensor *ggy, const nconv_tensor *gx, const nconv_tensor *gw) {
    nconv__clear_error();
    if (!bt) return INVALID("batch is NULL");
    if (p && nconv__is_complex(p->dtype)) {
        const nconv_status cuda_st = nconv__ctx_cpu_only(ctx, "a complex nconv_double_backward_batched");
        return cuda_st ? cuda_st : nconv__complex_double_backward(ctx, p, bt, x, w, dy, ggx, ggw, ggb, ggy, gx, gw);
    }
    if ((ggy && !bt->ggy) || (gx && !bt->gx) || (gw && !bt->gw))
        return INVALID("batch stride of %s = 0: every output carries the batch",
                       ggy && !bt->ggy ? "ggy" : gx && !bt->gx ? "gx" : "gw");
    const nconv_batch size = {.size = bt->size};
    plan pl;
    nconv_status st = make_plan(p, &size, 0, &pl);
    if (st) return st;
    const int64_t B = bt->size, oc = p->out_channels;
    const int r = p->ndims + 2;
    const nconv_operand_check chk[] = {
        {"x", x, r, pl.xs, B, bt->x, 0},         {"w", w, r, pl.ws, B, bt->w, 0},
        {"dy", dy, r, pl.ys, B, bt->dy, 0},      {"ggx", ggx, r, pl.xs, B, bt->ggx, 0},
        {"ggw", ggw, r, pl.ws, B, bt->ggw, 0},   {"ggb", ggb, 1, &oc, B, bt->ggb, 0},
        {"ggy", ggy, r, pl.ys, B, bt->ggy, 1},   {"gx", gx, r, pl.xs, B, bt->gx, 1},
        {"gw", gw, r, pl.ws, B, bt->gw, 1}};
    if ((st = nconv__check_operands(p->dtype, chk, 9))) return st;
    if (nconv__ctx_cuda(ctx)) {
        nconv_tensor s[9];
        for (int64_t b = 0; !st && b < B; b++)
            st = nconv_double_backward(ctx, p, slice(p, x, b, bt->x, &s[0]), slice(p, w, b, bt->w, &s[1]),
                                       slice(p, dy, b, bt->dy, &s[2]), slice(p, ggx, b, bt->ggx, &s[3]),
                                       slice(p, ggw, b, bt->ggw, &s[4]), slice(p, ggb, b, bt->ggb, &s[5]),
                                       slice(p, ggy, b, bt->ggy, &s[6]), slice(p, gx, b, bt->gx, &s[7]),
                                       slice(p, gw, b, bt->gw, &s[8]));
        return st;
    }
    /* What the unbatched call needs, refused before any copy (its own messages) */
    const nconv_tensor *any = ggy ? ggy : gx ? gx : gw;
    if (!any) return NCONV_OK;
    if ((ggw && ggy && !x) || (ggx && ggy && !w) || (((gx && ggw) || (gw && ggx)) && !dy))
        return INVALID("%s is NULL but required for the given gradients",
                       ggw && ggy && !x ? "x" : ggx && ggy && !w ? "w" : "dy");
    nconv_tensor ggb_act;
    enum { X, W, DY, GGX, GGW, GGB, GGY, GX, GW, NOPS };
    const nconv_tensor *in[NOPS] = {x, w, dy, ggx, ggw, ggb, ggy, gx, gw};
    const int64_t bs[NOPS] = {bt->x, bt->w, bt->dy, bt->ggx, bt->ggw, bt->ggb, bt->ggy, bt->gx, bt->gw};
    operand ops[NOPS] = {act(&pl, x ? x : any, bs[X], pl.xs),       weight(&pl, w ? w : any, bs[W]),
                         act(&pl, dy ? dy : any, bs[DY], pl.ys),    act(&pl, ggx ? ggx : any, bs[GGX], pl.xs),
                         weight(&pl, ggw ? ggw : any, bs[GGW]),     vector(ggb ? ggb : any, bs[GGB], oc, &ggb_act),
                         act(&pl, ggy ? ggy : any, bs[GGY], pl.ys), act(&pl, gx ? gx : any, bs[GX], pl.xs),
                         weight(&pl, gw ? gw : any, bs[GW])};
    int need[NOPS];
    for (int i = 0; i < NOPS; i++) need[i] = !in[i] ? ABSENT : i >= GGY ? OUTPUT : INPUT;
    void *ws;
    size_t ws_size;
    /* The workspace is given back at once: the double backward takes it again from the context. */
    if ((st = take_memory(ctx, p, &pl, ops, need, NOPS, NCONV_OP_DOUBLE_BACKWARD, NULL, &ws, &ws_size))) return st;
    nconv__ctx_ws_release(ctx, ws, ws_size);
    const nconv_tensor *f[NOPS];
    for (int i = 0; i < NOPS; i++) f[i] = in[i] ? &ops[i].fold : NULL;
    st = nconv_double_backward(ctx, &pl.p, f[X], f[W], f[DY], f[GGX], f[GGW], f[GGB], f[GGY], f[GX], f[GW]);
    if (!st)
        for (int i = GGY; i < NOPS; i++)
            if (need[i]) unfold_output(p, B, &ops[i]);
    release(ctx, ops, NOPS);
    return st;
}

/* Forward jvp of batched operands: the tangents fold as their primals do (tb as a bias), so B
 * goes into the batch exactly when w, bias and their tangents are all shared. */
nconv_status nconv_forward_jvp_batched(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                       const nconv_jvp_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                       const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *tx,
                                       const nconv_tensor *tw, const nconv_tensor *tb, const nconv_tensor *tz,
                                       const nconv_tensor *y, const nconv_tensor *ty) {
    nconv__clear_error();
    if (!bt) return INVALID("batch is NULL");
    if (!x || !w || !y || !ty) return INVALID("%s is NULL but required", !x ? "x" : !w ? "w" : !y ? "y" : "ty");
    if (!bt->y || !bt->ty) return INVALID("batch %s stride = 0: every output carries the batch", !bt->y ? "y" : "ty");
    if (tb && !bias) return INVALID("tb is given without bias: an absent bias has no tangent");
    if (tz && !z) return INVALID("tz is given without z: an absent z has no tangent");
    const nconv_batch size = {.size = bt->size};
    plan pl;
    const int by_n = !bt->w && !(bias && bt->bias) && !(tw && bt->tw) && !(tb && bt->tb);
    nconv_status st = make_plan(p, &size, by_n, &pl);
    if (st) return st;
    const int64_t B = bt->size, oc = p->out_channels;
    const int r = p->ndims + 2;
    const nconv_operand_check chk[] = {
        {"x", x, r, pl.xs, B, bt->x, 0},   {"w", w, r, pl.ws, B, bt->w, 0},   {"bias", bias, 1, &oc, B, bt->bias, 0},
        {"z", z, r, pl.ys, B, bt->z, 0},   {"tx", tx, r, pl.xs, B, bt->tx, 0}, {"tw", tw, r, pl.ws, B, bt->tw, 0},
        {"tb", tb, 1, &oc, B, bt->tb, 0},  {"tz", tz, r, pl.ys, B, bt->tz, 0}, {"y", y, r, pl.ys, B, bt->y, 1},
        {"ty", ty, r, pl.ys, B, bt->ty, 1}};
    if ((st = nconv__check_operands(p->dtype, chk, 10))) return st;
    if (nconv__ctx_cuda(ctx) || nconv__is_complex(p->dtype)) { /* the unbatched call per b, on slices */
        nconv_tensor s[10];
        for (int64_t b = 0; !st && b < B; b++)
            st = nconv_forward_jvp(ctx, p, epi, slice(p, x, b, bt->x, &s[0]), slice(p, w, b, bt->w, &s[1]),
                                   slice(p, bias, b, bt->bias, &s[2]), slice(p, z, b, bt->z, &s[3]),
                                   slice(p, tx, b, bt->tx, &s[4]), slice(p, tw, b, bt->tw, &s[5]),
                                   slice(p, tb, b, bt->tb, &s[6]), slice(p, tz, b, bt->tz, &s[7]),
                                   slice(p, y, b, bt->y, &s[8]), slice(p, ty, b, bt->ty, &s[9]));
        return st;
    }
    nconv_tensor bias_act, tb_act;
    enum { X, W, BIAS, Z, TX, TW, TB, TZ, Y, TY, NOPS };
    const nconv_tensor *in[NOPS] = {x, w, bias, z, tx, tw, tb, tz, y, ty};
    operand ops[NOPS] = {act(&pl, x, bt->x, pl.xs),
                         weight(&pl, w, bt->w),
                         vector(bias ? bias : y, bt->bias, oc, &bias_act),
                         act(&pl, z ? z : y, bt->z, pl.ys),
                         act(&pl, tx ? tx : y, bt->tx, pl.xs),
                         weight(&pl, tw ? tw : w, bt->tw),
                         vector(tb ? tb : y, bt->tb, oc, &tb_act),
                         act(&pl, tz ? tz : y, bt->tz, pl.ys),
                         act(&pl, y, bt->y, pl.ys),
                         act(&pl, ty, bt->ty, pl.ys)};
    int need[NOPS];
    for (int i = 0; i < NOPS; i++) need[i] = !in[i] ? ABSENT : i >= Y ? OUTPUT : INPUT;
    /* Shared weights, bias and their tangents need no fold when B goes into the batch. */
    if (pl.by_n)
        for (int i = 0; i < NOPS; i++)
            if (need[i] && (i == W || i == BIAS || i == TW || i == TB)) need[i] = AS_IS;
    void *ws;
    size_t ws_size;
    /* The workspace is given back at once: the jvp takes its own from the context. */
    if ((st = take_memory(ctx, p, &pl, ops, need, NOPS, NCONV_OP_FORWARD, epi, &ws, &ws_size))) return st;
    nconv__ctx_ws_release(ctx, ws, ws_size);
    const nconv_tensor *f[NOPS];
    for (int i = 0; i < NOPS; i++) f[i] = in[i] ? &ops[i].fold : NULL;
    st = nconv_forward_jvp(ctx, &pl.p, epi, f[X], f[W], f[BIAS], f[Z], f[TX], f[TW], f[TB], f[TZ], f[Y], f[TY]);
    if (!st) {
        unfold_output(p, B, &ops[Y]);
        unfold_output(p, B, &ops[TY]);
    }
    release(ctx, ops, NOPS);
    return st;
}
