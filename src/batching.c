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

/* Sets up o->fold: a view of the caller's memory when the strides allow,
 * else a dense copy (filled from the caller for inputs). */
static nconv_status fold_operand(const nconv_problem *p, int64_t B, operand *o, int input) {
    const nconv_tensor *t = o->user;
    const int64_t len = o->dim == 0 ? o->a : o->c; /* extent of the folded dim per b */
    const int viewable = o->bstride != 0 && (len == 1 || o->bstride == len * t->stride[o->dim]);
    if (viewable) {
        o->fold = *t;
        if (len == 1) o->fold.stride[o->dim] = o->bstride;
        return NCONV_OK;
    }
    const int64_t S = spatial(p, o->sp), n = B * o->a * o->c * S;
    o->owned = malloc(nconv_dtype_size(p->dtype) * (size_t)(n ? n : 1));
    if (!o->owned) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %lld elements for a batch fold", (long long)n);
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

static void release(operand *ops, int n) {
    for (int i = 0; i < n; i++) free(ops[i].owned);
}

nconv_status nconv_forward_batched(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                   const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                   const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *y) {
    nconv__clear_error();
    if (!bt) return INVALID("batch is NULL");
    if (!x || !w || !y) return INVALID("%s is NULL but required", !x ? "x" : !w ? "w" : "y");
    if (!bt->y) return INVALID("batch y stride = 0: every output carries the batch");
    plan pl;
    nconv_status st = make_plan(p, bt, !bt->w && !bt->bias, &pl);
    if (st) return st;
    const int64_t B = bt->size;
    nconv_tensor bias_act;
    operand ops[5] = {act(&pl, x, bt->x, pl.xs), weight(&pl, w, bt->w), act(&pl, y, bt->y, pl.ys),
                      act(&pl, z ? z : y, z ? bt->z : 0, pl.ys), vector(bias ? bias : y, bias ? bt->bias : 0, p->out_channels, &bias_act)};
    for (int n = 0; n < 5 && !st; n++) {
        if ((n == 3 && !z) || (n == 4 && !bias)) continue;
        if (pl.by_n && (n == 1 || n == 4)) { /* shared weight and bias need no fold */
            ops[n].fold = *ops[n].user;
            continue;
        }
        st = fold_operand(p, B, &ops[n], n != 2);
    }
    if (!st)
        st = nconv_forward(ctx, &pl.p, epi, &ops[0].fold, &ops[1].fold, bias ? &ops[4].fold : NULL,
                           z ? &ops[3].fold : NULL, &ops[2].fold, NULL, 0);
    if (!st) unfold_output(p, B, &ops[2]);
    release(ops, 5);
    return st;
}

nconv_status nconv_backward_batched(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                    const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                    const nconv_tensor *y, const nconv_tensor *dy, const nconv_tensor *dx,
                                    const nconv_tensor *dw, const nconv_tensor *db, const nconv_tensor *dz) {
    nconv__clear_error();
    if (!bt) return INVALID("batch is NULL");
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
    const int64_t B = bt->size;
    nconv_tensor db_act;
    enum { X, W, Y, DY, DX, DW, DB, DZ, NOPS };
    operand ops[NOPS] = {act(&pl, x ? x : dy, x ? bt->x : 0, pl.xs), weight(&pl, w ? w : dy, w ? bt->w : 0),
                         act(&pl, y ? y : dy, y ? bt->y : 0, pl.ys), act(&pl, dy, bt->dy, pl.ys),
                         act(&pl, dx ? dx : dy, bt->dx, pl.xs), weight(&pl, dw ? dw : dy, bt->dw),
                         vector(db ? db : dy, bt->db, p->out_channels, &db_act), act(&pl, dz ? dz : dy, bt->dz, pl.ys)};
    const int present[NOPS] = {x != NULL, w != NULL, relu && y, 1, dx != NULL, dw != NULL, db != NULL, dz != NULL};
    for (int n = 0; n < NOPS && !st; n++) {
        if (!present[n]) continue;
        if (pl.by_n && n == W) { /* shared weights are used as they are */
            ops[n].fold = *ops[n].user;
            continue;
        }
        st = fold_operand(p, B, &ops[n], n < DX);
    }
    if (!st)
        st = nconv_backward(ctx, &pl.p, epi, x ? &ops[X].fold : NULL, w ? &ops[W].fold : NULL,
                            present[Y] ? &ops[Y].fold : NULL, &ops[DY].fold, dx ? &ops[DX].fold : NULL,
                            dw ? &ops[DW].fold : NULL, db ? &ops[DB].fold : NULL, dz ? &ops[DZ].fold : NULL, NULL, 0);
    if (!st)
        for (int n = DX; n < NOPS; n++)
            if (present[n]) unfold_output(p, B, &ops[n]);
    release(ops, NOPS);
    return st;
}
