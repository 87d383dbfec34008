/*
 * Fuzz target: problem validation and execution (the library itself).
 * The input picks a problem (sometimes with raw, likely invalid fields),
 * dtype, layouts, epilogue, algorithm, thread count and operation. Invalid
 * problems must be refused with a message; valid small ones run forward and
 * backward with the chosen algorithm and with the reference, and the results
 * must agree within the dtype's tolerance.
 */
#include "../../src/internal.h" /* element load / store in every dtype */

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct input {
    const unsigned char *p;
    size_t n;
} input;

static unsigned take(input *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static int64_t take_range(input *in, int64_t lo, int64_t hi) { return lo + (int64_t)(take(in) % (unsigned)(hi - lo + 1)); }

static int64_t take_raw(input *in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | take(in);
    return (int64_t)v;
}

enum { X, W, B, Z, DY, Y, DX, DW, DB, DZ, NT };

typedef struct tens {
    void *buf;
    int64_t numel;
    nconv_tensor t;
} tens;

/* Values are multiples of 1/64 in [-2, 2): exact in every dtype. */
static double load(const void *b, nconv_dtype dt, int64_t i) { return nconv__load(b, dt, i); }
static void store(void *b, nconv_dtype dt, int64_t i, double v) { nconv__store1(b, dt, i, v); }

static size_t esize(nconv_dtype dt) { return dt == NCONV_F64 ? 8 : dt == NCONV_F32 ? 4 : 2; }

static void tens_make(tens *t, int rank, const int64_t *shape, nconv_dtype dt, nconv_layout layout, input *in,
                      int fill) {
    t->numel = 1;
    for (int i = 0; i < rank; i++) t->numel *= shape[i];
    t->buf = calloc((size_t)(t->numel ? t->numel : 1), esize(dt));
    nconv_tensor_init(&t->t, t->buf, rank, shape, layout);
    for (int64_t i = 0; i < t->numel && fill; i++) store(t->buf, dt, i, ((int)take(in) - 128) / 64.0);
}

static void run_pair(const nconv_problem *p, input *in) {
    const nconv_dtype dt = p->dtype;
    const int r = p->ndims + 2;
    int64_t xs[5], ws[5], ys[5], oc = p->out_channels;
    if (nconv_problem_shapes(p, xs, ws, ys) != NCONV_OK) abort();
    const nconv_layout layout = (nconv_layout)(take(in) & 1);
    const int relu = take(in) & 1, has_b = take(in) & 1, has_z = take(in) & 1, threads = (int)take_range(in, 1, 3);
    const int algo = (int)take_range(in, 0, nconv_algorithm_count() - 1);
    const nconv_epilogue epi = {relu ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, ((int)take(in) - 128) / 64.0};
    const int64_t *shape[NT] = {xs, ws, &oc, ys, ys, ys, xs, ws, &oc, ys};
    tens a[2][NT];
    for (int k = 0; k < 2; k++) {
        input copy = *in; /* both runs see the same values */
        for (int i = 0; i < NT; i++)
            tens_make(&a[k][i], i == B || i == DB ? 1 : r, shape[i], dt, layout, &copy, i < Y);
        if (k == 1) *in = copy;
    }
    nconv_context *ctx[2];
    nconv_context_create(&ctx[0]);
    nconv_context_create(&ctx[1]);
    nconv_context_set_algorithm(ctx[0], "ref");
    nconv_context_set_algorithm(ctx[1], nconv_algorithm_name(algo));
    nconv_context_set_threads(ctx[1], threads);
    nconv_status st[2];
    for (int k = 0; k < 2; k++) {
        tens *t = a[k];
        st[k] = nconv_forward(ctx[k], p, &epi, &t[X].t, &t[W].t, has_b ? &t[B].t : NULL, has_z ? &t[Z].t : NULL,
                              &t[Y].t, NULL, 0);
    }
    /* Both backward calls get the reference's y as relu's mask: an algorithm whose y rounds an
     * exact 0 to a tiny value (Winograd's transforms) would flip the mask there, and with it a
     * whole term of dx and dw, without being wrong. The y compared below is each one's own. */
    for (int k = 0; k < 2; k++) {
        tens *t = a[k];
        if (!st[k])
            st[k] = nconv_backward(ctx[k], p, &epi, &t[X].t, &t[W].t, &a[0][Y].t, &t[DY].t, &t[DX].t, &t[DW].t,
                                   has_b ? &t[DB].t : NULL, has_z ? &t[DZ].t : NULL, NULL, 0);
    }
    if (st[0] != NCONV_OK) abort(); /* the reference runs every valid problem */
    if (st[1] != NCONV_OK && st[1] != NCONV_UNSUPPORTED) abort();
    const double tol = dt == NCONV_F64 ? 1e-10 : dt == NCONV_F32 ? 1e-4 : dt == NCONV_F16 ? 1e-2 : 5e-2;
    for (int i = Y; i < NT && st[1] == NCONV_OK; i++) {
        double md = 0, mr = 0;
        for (int64_t j = 0; j < a[0][i].numel; j++) {
            const double want = load(a[0][i].buf, dt, j), got = load(a[1][i].buf, dt, j);
            /* f16 may overflow to Inf: then both must, with one sign */
            const double d = isfinite(want) ? fabs(got - want) : (got == want || (isnan(got) && isnan(want))) ? 0 : INFINITY;
            if (!(d <= md)) md = d;
            if (isfinite(want) && fabs(want) > mr) mr = fabs(want);
        }
        if (!(md <= tol * (mr > 1 ? mr : 1))) {
            char desc[512] = "";
            nconv_problem_to_desc(p, desc, sizeof desc);
            fprintf(stderr, "%s differs from ref on output %d (y dx dw db dz): %g > %g; %s dtype %d layout %d relu %d "
                    "bias %d z %d alpha %g threads %d\n", nconv_algorithm_name(algo), i - Y, md, tol * (mr > 1 ? mr : 1),
                    desc, (int)dt, (int)layout, relu, has_b, has_z, epi.alpha, threads);
            abort();
        }
    }
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < NT; i++) free(a[k][i].buf);
        nconv_context_destroy(ctx[k]);
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    input in = {data, size};
    nconv_problem p;
    const unsigned flags = take(&in);
    nconv_problem_init(&p, (int)take_range(&in, 1, 3));
    if (flags & 1) { /* raw fields: mostly invalid or huge; must be refused or validated, never crash */
        p.ndims = (int)(take(&in) % 6) - 1;
        p.batch = take_raw(&in), p.in_channels = take_raw(&in), p.out_channels = take_raw(&in);
        p.groups = take_raw(&in);
        for (int i = 0; i < 3; i++) {
            p.in_size[i] = take_raw(&in), p.kernel[i] = take_raw(&in), p.stride[i] = take_raw(&in);
            p.dilation[i] = take_raw(&in), p.pad_begin[i] = take_raw(&in), p.pad_end[i] = take_raw(&in);
            p.output_padding[i] = take_raw(&in);
        }
        p.transposed = (int)(take(&in) % 3);
        p.padding_mode = (nconv_padding_mode)(take(&in) % 5);
        p.dtype = (nconv_dtype)(take(&in) % 5);
    } else {
        p.batch = take_range(&in, 0, 3);
        p.groups = take_range(&in, 1, 4);
        p.in_channels = p.groups * take_range(&in, 1, 4);
        p.out_channels = p.groups * take_range(&in, 1, 4);
        p.transposed = (int)(take(&in) & 1);
        p.padding_mode = (nconv_padding_mode)take_range(&in, 0, 3);
        p.dtype = (nconv_dtype)take_range(&in, 0, 3);
        for (int i = 0; i < p.ndims; i++) {
            p.in_size[i] = take_range(&in, 1, 8), p.kernel[i] = take_range(&in, 1, 4);
            p.stride[i] = take_range(&in, 1, 3), p.dilation[i] = take_range(&in, 1, 3);
            p.pad_begin[i] = take_range(&in, 0, 3), p.pad_end[i] = take_range(&in, -2, 3);
            p.output_padding[i] = take_range(&in, 0, 2);
        }
    }
    int64_t out[3];
    const nconv_status vs = nconv_problem_validate(&p);
    if ((vs == NCONV_OK) != (nconv_problem_output_size(&p, out) == NCONV_OK)) abort();
    if (vs != NCONV_OK) {
        if (!nconv_last_error()[0]) abort(); /* refusals name the parameter */
        float dummy[4] = {0};
        nconv_tensor t = {dummy, {1, 1, 1, 1, 1}};
        if (nconv_forward(NULL, &p, NULL, &t, &t, NULL, NULL, &t, NULL, 0) == NCONV_OK) abort();
        return 0;
    }
    double flops;
    nconv_problem_flops(&p, &flops);
    int64_t xs[5], ws[5], ys[5], nx = 1, nw = 1, ny = 1;
    nconv_problem_shapes(&p, xs, ws, ys);
    for (int i = 0; i < p.ndims + 2; i++) nx *= xs[i], nw *= ws[i], ny *= ys[i];
    if (nx > 4096 || nw > 4096 || ny > 4096 || flops > 4e6) return 0; /* valid but too big to run here */
    run_pair(&p, &in);
    return 0;
}
