/*
 * Complex convolutions (c64, c128) on the real engine. A complex problem with
 * C input and O output channels is the real problem with 2C and 2O channels,
 * real channel 2c holding the real part of complex channel c and 2c + 1 its
 * imaginary part, under the real weight
 *     W'[2a + s][2b + t] = B[s][t],  B = [[wr, -wi], [wi, wr]]
 * for output channel a and input channel b (a transposed problem's weight is
 * [in, out/g], so there the block is B's transpose). That is one real
 * convolution of four times the multiply-adds, whose larger GEMMs run at the
 * engine's full speed, with the error of the real dtype's accumulation.
 *
 * The real problem is the complex one seen as a real-linear map, so the
 * real derivatives are PyTorch's complex ones: a gradient is dL/d(re) +
 * i dL/d(im), which makes dx = conv_transpose(dy, conj(w)); the real weight
 * gradient G folds back through W' = M(w) as dw = M^T(G) =
 * (G00 + G11) + i (G10 - G01) (transposed: i (G01 - G10)); a weight tangent
 * or a ggw goes through M like w; batching is the real batching.
 *
 * An activation or bias whose complex channel stride is 1 (channels-last,
 * or a single channel) already is its real form: the call reads and writes
 * it in place. Other activations are copied to (and outputs back from)
 * dense real tensors, and weights always are; every copy is taken, within the
 * memory limit, before any output is written.
 */
#include "internal.h"

#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

int nconv__is_complex(nconv_dtype dt) { return dt == NCONV_C64 || dt == NCONV_C128; }

nconv_dtype nconv__real_dtype(nconv_dtype dt) {
    return dt == NCONV_C64 ? NCONV_F32 : dt == NCONV_C128 ? NCONV_F64 : dt;
}

static nconv_status check_epi(const nconv_epilogue *epi) {
    if (epi && epi->activation == NCONV_ACT_RELU)
        return INVALID("epi activation = relu: complex numbers have no order, so a complex convolution has no "
                       "relu (as in PyTorch)");
    return NCONV_OK;
}

nconv_status nconv__complex_problem(const nconv_problem *p, const nconv_epilogue *epi, nconv_problem *real) {
    nconv_status st = nconv_problem_validate(p);
    if (st || (st = check_epi(epi))) return st;
    *real = *p;
    real->dtype = nconv__real_dtype(p->dtype);
    real->in_channels = 2 * p->in_channels; /* a validated problem's channels are far below 2^62 */
    real->out_channels = 2 * p->out_channels;
    return nconv_problem_validate(real);
}

/* ------------------------------------------------------------ conversions */

enum { SPLIT, JOIN, WEIGHT_IN, WEIGHT_OUT };

/* One pass between a complex tensor (strides cs, in complex elements) and its
 * real form (strides rs per complex index, in real elements): the real part
 * at offset 0 and the imaginary part at ra (activations, biases); weights
 * have the 2 x 2 block at offsets 0, ra (s = 1), rb (t = 1), ra + rb. */
typedef struct pass {
    int mode, rank;
    const int64_t *n, *cs, *rs;
    int64_t ra, rb;
    double sign; /* +1, or -1 for a transposed problem's block */
} pass;

#define PASS_INNER(T)                                                                                       \
    static void inner_##T(const pass *q, int64_t cst, int64_t rst, T *c, T *r) {                             \
        const int64_t n = q->n[q->rank - 1], a = q->ra, b = q->rb;                                           \
        const T sg = (T)q->sign;                                                                             \
        switch (q->mode) {                                                                                   \
        case SPLIT:                                                                                          \
            for (int64_t i = 0; i < n; i++, c += 2 * cst, r += rst) r[0] = c[0], r[a] = c[1];                \
            break;                                                                                           \
        case JOIN:                                                                                           \
            for (int64_t i = 0; i < n; i++, c += 2 * cst, r += rst) c[0] = r[0], c[1] = r[a];                \
            break;                                                                                           \
        case WEIGHT_IN:                                                                                      \
            for (int64_t i = 0; i < n; i++, c += 2 * cst, r += rst)                                          \
                r[0] = r[a + b] = c[0], r[a] = sg * c[1], r[b] = -sg * c[1];                                 \
            break;                                                                                           \
        default:                                                                                             \
            for (int64_t i = 0; i < n; i++, c += 2 * cst, r += rst)                                          \
                c[0] = r[0] + r[a + b], c[1] = sg * (r[a] - r[b]);                                           \
        }                                                                                                    \
    }
PASS_INNER(float)
PASS_INNER(double)

static void pass_rec(const pass *q, int d, size_t es, char *c, char *r) {
    if (d == q->rank - 1) {
        if (es == 4) inner_float(q, q->cs[d], q->rs[d], (float *)c, (float *)r);
        else inner_double(q, q->cs[d], q->rs[d], (double *)c, (double *)r);
        return;
    }
    for (int64_t i = 0; i < q->n[d]; i++)
        pass_rec(q, d + 1, es, c + (ptrdiff_t)(2 * i * q->cs[d] * (int64_t)es), r + (ptrdiff_t)(i * q->rs[d] * (int64_t)es));
}

/* --------------------------------------------------------------- operands */

enum { ACT, WEIGHT, VEC };

/* One complex operand and its real form. */
typedef struct cx_op {
    const nconv_tensor *user; /* NULL: absent */
    int kind, output;
    const int64_t *shape;     /* complex logical shape (rank of the problem; VEC: 1) */
    int64_t bstride;          /* complex elements between batch slices (0: shared, or no batch) */
    nconv_tensor real;
    int64_t rbstride;
    void *owned;              /* the real form's memory when it is a copy */
    size_t bytes;
} cx_op;

/* A call: the complex problem, its number of batch slices (1: none), and the
 * layout of the real copies of activations (NCONV_LAYOUT_ANY: the caller's
 * memory where it is the real form, else channels-first copies). */
typedef struct cx_call {
    nconv_context *ctx;
    const nconv_problem *p;
    int64_t B;
    int batched;
    nconv_layout layout;
    const nconv_batch *bt;          /* the caller's batch, if any */
    const nconv_double_batch *dbt;
    nconv_plan *plan;               /* plan calls: the (real) plan */
} cx_call;

static cx_op op(const nconv_tensor *t, int kind, const int64_t *shape, int64_t bstride, int output) {
    cx_op o;
    memset(&o, 0, sizeof o);
    o.user = t, o.kind = kind, o.shape = shape, o.bstride = bstride, o.output = output;
    return o;
}

static int op_rank(const cx_call *k, const cx_op *o) { return o->kind == VEC ? 1 : k->p->ndims + 2; }

/* Whether the caller's memory is the operand's real form. */
static int in_place(const cx_call *k, const cx_op *o) {
    if (o->kind == WEIGHT || (o->kind == ACT && k->layout == NCONV_LAYOUT_NCX)) return 0;
    const int ch = o->kind == VEC ? 0 : 1;
    return o->shape[ch] == 1 || o->user->stride[ch] == 1;
}

/* Sets o->real (a view, or the layout of a copy, with o->bytes to allocate). */
static void real_form(const cx_call *k, cx_op *o) {
    const int r = op_rank(k, o);
    int64_t rshape[NCONV_MAX_DIMS];
    for (int i = 0; i < r; i++) rshape[i] = o->shape[i];
    if (o->kind == VEC) rshape[0] *= 2;
    else rshape[1] *= 2;
    if (o->kind == WEIGHT) rshape[0] *= 2;
    if (in_place(k, o)) {
        o->real.data = o->user->data;
        for (int i = 0; i < r; i++) o->real.stride[i] = 2 * o->user->stride[i];
        o->real.stride[o->kind == VEC ? 0 : 1] = 1;
        o->rbstride = 2 * o->bstride;
        return;
    }
    const nconv_layout lay = o->kind == ACT && k->layout == NCONV_LAYOUT_NXC ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX;
    nconv_tensor_init(&o->real, NULL, r, rshape, lay);
    int64_t slice = 1;
    for (int i = 0; i < r; i++) slice *= rshape[i]; /* twice or four times a checked operand */
    const int64_t slices = o->bstride ? k->B : 1;
    o->rbstride = o->bstride ? slice : 0;
    o->bytes = nconv__ws_round(nconv_dtype_size(nconv__real_dtype(k->p->dtype)) * (size_t)(slice * slices));
    if (!o->bytes) o->bytes = 64; /* an empty tensor still gets an address */
}

/* Runs the pass of `mode` over every slice of o between the caller's memory and the copy. */
static void convert(const cx_call *k, const cx_op *o, int mode) {
    const int r = op_rank(k, o);
    const size_t es = nconv_dtype_size(nconv__real_dtype(k->p->dtype));
    int64_t rs[NCONV_MAX_DIMS];
    pass q = {mode, r, o->shape, o->user->stride, rs, 0, 0, 1.0};
    for (int i = 0; i < r; i++) rs[i] = o->real.stride[i];
    if (o->kind == WEIGHT) {
        q.ra = rs[0], q.rb = rs[1];
        rs[0] *= 2, rs[1] *= 2;
        if (k->p->transposed) q.sign = -1.0;
    } else {
        const int ch = o->kind == VEC ? 0 : 1;
        q.ra = rs[ch];
        rs[ch] *= 2;
    }
    for (int i = 0; i < r; i++)
        if (o->shape[i] == 0) return;
    const int64_t slices = o->bstride ? k->B : 1;
    for (int64_t b = 0; b < slices; b++)
        pass_rec(&q, 0, es, (char *)o->user->data + (ptrdiff_t)(2 * b * o->bstride * (int64_t)es),
                 (char *)o->real.data + (ptrdiff_t)(b * o->rbstride * (int64_t)es));
}

static void release(const cx_call *k, cx_op *ops, int n) {
    for (int i = 0; i < n; i++) nconv__free(k->ctx, ops[i].owned);
}

/* The real form of every operand present; returns the bytes of its copies. */
static size_t forms(const cx_call *k, cx_op *ops, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].user) real_form(k, &ops[i]), total += ops[i].bytes;
    return total;
}

/* The copies allocated and the inputs' filled, `total` bytes (the copies and
 * what the real call will hold beside them) checked against the memory limit first. */
static nconv_status take(const cx_call *k, cx_op *ops, int n, size_t total) {
    nconv_status st = nconv__check_memory(k->ctx, total, "the complex call");
    for (int i = 0; i < n && !st; i++) {
        if (!ops[i].user || !ops[i].bytes) continue;
        if (!(ops[i].owned = nconv__alloc(k->ctx, ops[i].bytes)))
            st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes for a complex operand's real copy",
                              ops[i].bytes);
        ops[i].real.data = ops[i].owned;
        if (!st && !ops[i].output) convert(k, &ops[i], ops[i].kind == WEIGHT ? WEIGHT_IN : SPLIT);
    }
    if (st) release(k, ops, n);
    return st;
}

/* After the real call: its outputs copied back where they are copies (when it succeeded); every copy freed. */
static void give(const cx_call *k, cx_op *ops, int n, nconv_status st) {
    for (int i = 0; i < n && !st; i++)
        if (ops[i].output && ops[i].owned) convert(k, &ops[i], ops[i].kind == WEIGHT ? WEIGHT_OUT : JOIN);
    release(k, ops, n);
}

static const nconv_tensor *real_of(const cx_op *o) { return o->user ? &o->real : NULL; }

/* Names, strides and aliasing of the complex operands, before anything is taken. */
static nconv_status check(const cx_call *k, const cx_op *ops, const char *const *names, int n) {
    nconv_operand_check chk[16];
    for (int i = 0; i < n; i++)
        chk[i] = (nconv_operand_check){names[i],     ops[i].user,   op_rank(k, &ops[i]), ops[i].shape,
                                       k->batched ? k->B : 0, ops[i].bstride, ops[i].output};
    return nconv__check_operands(k->p->dtype, chk, n);
}

typedef struct cx_shapes {
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], oc;
} cx_shapes;

static nconv_status begin(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi, int batched,
                          int64_t B, nconv_problem *real, cx_shapes *s, cx_call *k) {
    nconv_status st = nconv__complex_problem(p, epi, real);
    if (st || (st = nconv_problem_shapes(p, s->xs, s->ws, s->ys))) return st;
    if (batched && B < 1) return INVALID("batch size = %lld: must be >= 1", (long long)B);
    s->oc = p->out_channels;
    *k = (cx_call){ctx, p, batched ? B : 1, batched, NCONV_LAYOUT_ANY, NULL, NULL, NULL};
    return NCONV_OK;
}

/* begin for a call with an nconv_batch (NULL: unbatched; *b then has size 1 and no strides). */
static nconv_status begin_batch(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                const nconv_batch *bt, nconv_batch *b, nconv_problem *real, cx_shapes *s, cx_call *k) {
    *b = bt ? *bt : (nconv_batch){.size = 1};
    nconv_status st = begin(ctx, p, epi, bt != NULL, b->size, real, s, k);
    k->bt = bt;
    return st;
}

/* ------------------------------------------------------------- the calls */

/* The real call on the operands' real forms (ws: the workspace handed to it, or NULL). */
typedef nconv_status (*real_call)(const cx_call *k, const nconv_problem *rp, const nconv_epilogue *epi,
                                  const cx_op *o, void *ws, size_t wsz);

/* Checks, copies, the real call and the copies back. The one-shot forward
 * (`op` >= 0) gets its workspace here, within what the copies leave of the
 * memory limit, unless the caller gave one; the other calls size their own. */
static nconv_status run(const cx_call *k, const nconv_problem *rp, int op, const nconv_epilogue *epi, cx_op *o,
                        const char *const *names, int n, void *workspace, size_t workspace_size, real_call f) {
    nconv_status st = check(k, o, names, n);
    if (st) return st;
    size_t total = forms(k, o, n), wsz = workspace ? workspace_size : 0;
    const int acquire = op >= 0 && !workspace;
    if (acquire &&
        (st = nconv__workspace_within(k->ctx, rp, (nconv_op)op, epi, nconv__ctx_room(k->ctx, total), &wsz)))
        return st;
    if ((st = take(k, o, n, total + (acquire ? wsz : 0)))) return st;
    void *ws = acquire && wsz ? nconv__ctx_ws_acquire(k->ctx, wsz) : workspace;
    if (acquire && wsz && !ws) st = nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of workspace", wsz);
    else st = f(k, rp, epi, o, ws, wsz);
    if (acquire) nconv__ctx_ws_release(k->ctx, ws, wsz);
    give(k, o, n, st);
    return st;
}

enum { FX, FW, FBIAS, FZ, FY, FN };

static nconv_status forward_real(const cx_call *k, const nconv_problem *rp, const nconv_epilogue *epi, const cx_op *o,
                                 void *ws, size_t wsz) {
    if (!k->bt)
        return nconv_forward(k->ctx, rp, epi, real_of(&o[FX]), real_of(&o[FW]), real_of(&o[FBIAS]), real_of(&o[FZ]),
                             real_of(&o[FY]), ws, wsz);
    nconv_batch b = *k->bt;
    b.x = o[FX].rbstride, b.w = o[FW].rbstride, b.bias = o[FBIAS].rbstride, b.z = o[FZ].rbstride, b.y = o[FY].rbstride;
    return nconv_forward_batched(k->ctx, rp, epi, &b, real_of(&o[FX]), real_of(&o[FW]), real_of(&o[FBIAS]),
                                 real_of(&o[FZ]), real_of(&o[FY]));
}

nconv_status nconv__complex_forward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                    const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                    const nconv_tensor *bias, const nconv_tensor *z, const nconv_tensor *y,
                                    void *workspace, size_t workspace_size) {
    nconv_problem rp;
    cx_shapes s;
    cx_call k;
    nconv_batch b;
    nconv_status st = begin_batch(ctx, p, epi, bt, &b, &rp, &s, &k);
    if (st) return st;
    static const char *const names[FN] = {"x", "w", "bias", "z", "y"};
    cx_op o[FN] = {op(x, ACT, s.xs, b.x, 0), op(w, WEIGHT, s.ws, b.w, 0), op(bias, VEC, &s.oc, b.bias, 0),
                   op(z, ACT, s.ys, b.z, 0), op(y, ACT, s.ys, b.y, 1)};
    return run(&k, &rp, bt ? -1 : NCONV_OP_FORWARD, epi, o, names, FN, workspace, workspace_size, forward_real);
}

enum { BX, BW, BDY, BDX, BDW, BDB, BDZ, BN };

static nconv_status backward_real(const cx_call *k, const nconv_problem *rp, const nconv_epilogue *epi,
                                  const cx_op *o, void *ws, size_t wsz) {
    if (!k->bt)
        return nconv_backward(k->ctx, rp, epi, real_of(&o[BX]), real_of(&o[BW]), NULL, real_of(&o[BDY]),
                              real_of(&o[BDX]), real_of(&o[BDW]), real_of(&o[BDB]), real_of(&o[BDZ]), ws, wsz);
    nconv_batch b = *k->bt;
    b.x = o[BX].rbstride, b.w = o[BW].rbstride, b.dy = o[BDY].rbstride, b.dx = o[BDX].rbstride;
    b.dw = o[BDW].rbstride, b.db = o[BDB].rbstride, b.dz = o[BDZ].rbstride;
    return nconv_backward_batched(k->ctx, rp, epi, &b, real_of(&o[BX]), real_of(&o[BW]), NULL, real_of(&o[BDY]),
                                  real_of(&o[BDX]), real_of(&o[BDW]), real_of(&o[BDB]), real_of(&o[BDZ]));
}

/* y is read only under relu, which no complex call has: it is checked, never copied. */
nconv_status nconv__complex_backward(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                     const nconv_batch *bt, const nconv_tensor *x, const nconv_tensor *w,
                                     const nconv_tensor *y, const nconv_tensor *dy, const nconv_tensor *dx,
                                     const nconv_tensor *dw, const nconv_tensor *db, const nconv_tensor *dz,
                                     void *workspace, size_t workspace_size) {
    nconv_problem rp;
    cx_shapes s;
    cx_call k;
    nconv_batch b;
    nconv_status st = begin_batch(ctx, p, epi, bt, &b, &rp, &s, &k);
    if (st) return st;
    const int r = p->ndims + 2;
    const nconv_operand_check ychk = {"y", y, r, s.ys, bt ? b.size : 0, b.y, 0};
    if ((st = nconv__check_operands(p->dtype, &ychk, 1))) return st;
    static const char *const names[BN] = {"x", "w", "dy", "dx", "dw", "db", "dz"};
    cx_op o[BN] = {op(x, ACT, s.xs, b.x, 0),   op(w, WEIGHT, s.ws, b.w, 0),    op(dy, ACT, s.ys, b.dy, 0),
                   op(dx, ACT, s.xs, b.dx, 1), op(dw, WEIGHT, s.ws, b.dw, 1), op(db, VEC, &s.oc, b.db, 1),
                   op(dz, ACT, s.ys, b.dz, 1)};
    /* without a workspace the real call sizes its own, for the outputs it is given */
    return run(&k, &rp, -1, epi, o, names, BN, workspace, workspace_size, backward_real);
}

enum { DX_, DW_, DDY, DGGX, DGGW, DGGB, DGGY, DGX, DGW, DN };

static nconv_status double_real(const cx_call *k, const nconv_problem *rp, const nconv_epilogue *epi, const cx_op *o,
                                void *ws, size_t wsz) {
    (void)epi, (void)ws, (void)wsz;
    const nconv_tensor *t[DN];
    for (int i = 0; i < DN; i++) t[i] = real_of(&o[i]);
    if (!k->dbt)
        return nconv_double_backward(k->ctx, rp, t[DX_], t[DW_], t[DDY], t[DGGX], t[DGGW], t[DGGB], t[DGGY], t[DGX],
                                     t[DGW]);
    nconv_double_batch b = *k->dbt;
    b.x = o[DX_].rbstride, b.w = o[DW_].rbstride, b.dy = o[DDY].rbstride, b.ggx = o[DGGX].rbstride;
    b.ggw = o[DGGW].rbstride, b.ggb = o[DGGB].rbstride, b.ggy = o[DGGY].rbstride, b.gx = o[DGX].rbstride;
    b.gw = o[DGW].rbstride;
    return nconv_double_backward_batched(k->ctx, rp, &b, t[DX_], t[DW_], t[DDY], t[DGGX], t[DGGW], t[DGGB], t[DGGY],
                                         t[DGX], t[DGW]);
}

nconv_status nconv__complex_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_double_batch *bt,
                                            const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *dy,
                                            const nconv_tensor *ggx, const nconv_tensor *ggw, const nconv_tensor *ggb,
                                            const nconv_tensor *ggy, const nconv_tensor *gx, const nconv_tensor *gw) {
    nconv_problem rp;
    cx_shapes s;
    cx_call k;
    const nconv_double_batch b = bt ? *bt : (nconv_double_batch){.size = 1};
    nconv_status st = begin(ctx, p, NULL, bt != NULL, b.size, &rp, &s, &k);
    if (st) return st;
    k.dbt = bt;
    static const char *const names[DN] = {"x", "w", "dy", "ggx", "ggw", "ggb", "ggy", "gx", "gw"};
    cx_op o[DN] = {op(x, ACT, s.xs, b.x, 0),     op(w, WEIGHT, s.ws, b.w, 0),      op(dy, ACT, s.ys, b.dy, 0),
                   op(ggx, ACT, s.xs, b.ggx, 0), op(ggw, WEIGHT, s.ws, b.ggw, 0), op(ggb, VEC, &s.oc, b.ggb, 0),
                   op(ggy, ACT, s.ys, b.ggy, 1), op(gx, ACT, s.xs, b.gx, 1),      op(gw, WEIGHT, s.ws, b.gw, 1)};
    return run(&k, &rp, -1, NULL, o, names, DN, NULL, 0, double_real);
}

enum { JX, JW, JBIAS, JZ, JTX, JTW, JTB, JTZ, JY, JTY, JN };

static nconv_status jvp_real(const cx_call *k, const nconv_problem *rp, const nconv_epilogue *epi, const cx_op *o,
                             void *ws, size_t wsz) {
    (void)ws, (void)wsz;
    const nconv_tensor *t[JN];
    for (int i = 0; i < JN; i++) t[i] = real_of(&o[i]);
    return nconv_forward_jvp(k->ctx, rp, epi, t[JX], t[JW], t[JBIAS], t[JZ], t[JTX], t[JTW], t[JTB], t[JTZ], t[JY],
                             t[JTY]);
}

nconv_status nconv__complex_forward_jvp(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                        const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                                        const nconv_tensor *z, const nconv_tensor *tx, const nconv_tensor *tw,
                                        const nconv_tensor *tb, const nconv_tensor *tz, const nconv_tensor *y,
                                        const nconv_tensor *ty) {
    nconv_problem rp;
    cx_shapes s;
    cx_call k;
    nconv_status st = begin(ctx, p, epi, 0, 1, &rp, &s, &k);
    if (st) return st;
    static const char *const names[JN] = {"x", "w", "bias", "z", "tx", "tw", "tb", "tz", "y", "ty"};
    cx_op o[JN] = {op(x, ACT, s.xs, 0, 0),  op(w, WEIGHT, s.ws, 0, 0),  op(bias, VEC, &s.oc, 0, 0),
                   op(z, ACT, s.ys, 0, 0),  op(tx, ACT, s.xs, 0, 0),    op(tw, WEIGHT, s.ws, 0, 0),
                   op(tb, VEC, &s.oc, 0, 0), op(tz, ACT, s.ys, 0, 0),   op(y, ACT, s.ys, 0, 1),
                   op(ty, ACT, s.ys, 0, 1)};
    return run(&k, &rp, -1, epi, o, names, JN, NULL, 0, jvp_real);
}

/* ------------------------------------------------------------------ plans */

/* A complex plan is the plan of its real problem; the complex problem comes back from it. */
static void plan_call(const nconv_plan *pl, nconv_problem *cp, cx_shapes *s, cx_call *k) {
    *cp = pl->p;
    cp->dtype = pl->complex_dtype;
    cp->in_channels /= 2, cp->out_channels /= 2;
    nconv_problem_shapes(cp, s->xs, s->ws, s->ys); /* validated when the plan was made */
    s->oc = cp->out_channels;
    *k = (cx_call){pl->ctx, cp, 1, 0, pl->desc.layout, NULL, NULL, (nconv_plan *)pl};
}

static nconv_status weights_real(const cx_call *k, const nconv_problem *rp, const nconv_epilogue *epi, const cx_op *o,
                                 void *ws, size_t wsz) {
    (void)rp, (void)epi, (void)ws, (void)wsz;
    return nconv__plan_set_weights_real(k->plan, real_of(&o[0]), real_of(&o[1]));
}

nconv_status nconv__complex_plan_set_weights(nconv_plan *pl, const nconv_tensor *w, const nconv_tensor *bias) {
    if (!w) return nconv__plan_set_weights_real(pl, NULL, bias);
    nconv_problem cp;
    cx_shapes s;
    cx_call k;
    plan_call(pl, &cp, &s, &k);
    static const char *const names[2] = {"w", "bias"};
    cx_op o[2] = {op(w, WEIGHT, s.ws, 0, 0), op(bias, VEC, &s.oc, 0, 0)};
    return run(&k, &pl->p, -1, NULL, o, names, 2, NULL, 0, weights_real);
}

enum { PX, PW, PBIAS, PZ, PY, PDY, PDX, PDW, PDB, PDZ, PGGX, PGGW, PGGB, PGGY, PGX, PGW, PN };

static nconv_status execute_real(const cx_call *k, const nconv_problem *rp, const nconv_epilogue *epi, const cx_op *o,
                                 void *ws, size_t wsz) {
    (void)rp, (void)epi;
    const nconv_variant_pack v = {
        .x = real_of(&o[PX]),     .w = real_of(&o[PW]),     .bias = real_of(&o[PBIAS]), .z = real_of(&o[PZ]),
        .y = real_of(&o[PY]),     .dy = real_of(&o[PDY]),   .dx = real_of(&o[PDX]),     .dw = real_of(&o[PDW]),
        .db = real_of(&o[PDB]),   .dz = real_of(&o[PDZ]),   .ggx = real_of(&o[PGGX]),   .ggw = real_of(&o[PGGW]),
        .ggb = real_of(&o[PGGB]), .ggy = real_of(&o[PGGY]), .gx = real_of(&o[PGX]),     .gw = real_of(&o[PGW]),
        .workspace = ws,          .workspace_size = wsz};
    return nconv__plan_execute_real(k->plan, &v);
}

/* A backward plan reads y only under relu, which no complex plan has: it is checked, never copied. */
nconv_status nconv__complex_plan_execute(const nconv_plan *pl, const nconv_variant_pack *vp) {
    nconv_problem cp;
    cx_shapes s;
    cx_call k;
    plan_call(pl, &cp, &s, &k);
    const int fwd = pl->desc.op == NCONV_OP_FORWARD;
    if (!fwd) {
        const nconv_operand_check ychk = {"y", vp->y, cp.ndims + 2, s.ys, 0, 0, 0};
        nconv_status st = nconv__check_operands(cp.dtype, &ychk, 1);
        if (st) return st;
    }
    static const char *const names[PN] = {"x",  "w",  "bias", "z",   "y",   "dy",  "dx", "dw",
                                          "db", "dz", "ggx",  "ggw", "ggb", "ggy", "gx", "gw"};
    cx_op o[PN] = {op(vp->x, ACT, s.xs, 0, 0),      op(vp->w, WEIGHT, s.ws, 0, 0),  op(vp->bias, VEC, &s.oc, 0, 0),
                   op(vp->z, ACT, s.ys, 0, 0),      op(fwd ? vp->y : NULL, ACT, s.ys, 0, 1),
                   op(vp->dy, ACT, s.ys, 0, 0),     op(vp->dx, ACT, s.xs, 0, 1),    op(vp->dw, WEIGHT, s.ws, 0, 1),
                   op(vp->db, VEC, &s.oc, 0, 1),    op(vp->dz, ACT, s.ys, 0, 1),    op(vp->ggx, ACT, s.xs, 0, 0),
                   op(vp->ggw, WEIGHT, s.ws, 0, 0), op(vp->ggb, VEC, &s.oc, 0, 0), op(vp->ggy, ACT, s.ys, 0, 1),
                   op(vp->gx, ACT, s.xs, 0, 1),     op(vp->gw, WEIGHT, s.ws, 0, 1)};
    return run(&k, &pl->p, -1, NULL, o, names, PN, vp->workspace, vp->workspace_size, execute_real);
}
