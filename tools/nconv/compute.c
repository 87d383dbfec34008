/*
 * nconv compute: runs one convolution on .npy arrays with PyTorch's
 * torch.nn.functional.conv{1,2,3}d / conv_transpose{1,2,3}d semantics and
 * writes y.npy (and, with --dy, dx.npy, dw.npy, db.npy, dz.npy; with tangents
 * --tx / --tw / --tb / --tz, the forward-mode derivative ty.npy) to --out.
 * Every input is checked before anything is written, and the outputs replace
 * the files in --out together or not at all (outdir.c).
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/internal.h" /* element conversions */

/* Flags that take a value, in the order of the contract. */
enum {
    A_X, A_W, A_B, A_OUT, A_STRIDE, A_PADDING, A_PAD_END, A_DILATION, A_GROUPS, A_OUTPUT_PADDING,
    A_PADDING_MODE, A_Z, A_ALPHA, A_DY, A_GGX, A_GGW, A_GGB, A_X_BDIM, A_W_BDIM, A_B_BDIM, A_Z_BDIM,
    A_DY_BDIM, A_DTYPE, A_LAYOUT, A_ALGO, A_THREADS, A_TX, A_TW, A_TB, A_TZ, A_GGX_BDIM,
    A_GGW_BDIM, A_GGB_BDIM, A_COUNT
};
static const char *const arg_names[A_COUNT] = {
    "--x", "--w", "--b", "--out", "--stride", "--padding", "--pad-end", "--dilation", "--groups",
    "--output-padding", "--padding-mode", "--z", "--alpha", "--dy", "--ggx", "--ggw", "--ggb", "--x-bdim",
    "--w-bdim", "--b-bdim", "--z-bdim", "--dy-bdim", "--dtype", "--layout", "--algo", "--threads", "--tx", "--tw",
    "--tb", "--tz", "--ggx-bdim", "--ggw-bdim", "--ggb-bdim"};

/* Writes a tensor as .npy in C order to fd: f16 as <f2, f64 as <f8, f32 and bf16 as <f4,
 * c64 as <c8, c128 as <c16. */
/* batch > 0: the file gets a leading dim of that size (the tensor's slices). */
static int write_tensor(int fd, const char *name, const host_tensor *h, int64_t batch, int rank,
                        const int64_t *shape, int drop_batch, nconv_dtype dt) {
    int64_t fshape[NCONV_MAX_DIMS + 1], slice, numel;
    int frank = 0;
    if (batch > 0) fshape[frank++] = batch;
    for (int i = drop_batch; i < rank; i++) fshape[frank++] = shape[i];
    if (cli_numel(rank, shape, &slice) || cli_numel(frank, fshape, &numel))
        return cli_fail("%s: shape overflows int64", name);
    const char *descr = dt == NCONV_F64 ? "f8" : dt == NCONV_F16 ? "f2" : dt == NCONV_C64 ? "c8" : dt == NCONV_C128 ? "c16" : "f4";
    const int parts = nconv__is_complex(dt) ? 2 : 1;
    const nconv_dtype rdt = nconv__real_dtype(dt); /* a complex element: two of these */
    const size_t isz = dt == NCONV_BF16 ? 4 : nconv_dtype_size(dt) / (size_t)parts; /* bytes of one real */
    char *out = malloc(isz * (size_t)parts * (size_t)(numel ? numel : 1));
    if (!out) {
        fprintf(stderr, "nconv: out of memory writing %s\n", name);
        return EXIT_CHECK_FAILED;
    }
    for (int64_t i = 0; i < numel; i++) {
        int64_t rem = i % slice, off = (i / slice) * h->batch_stride;
        for (int k = rank - 1; k >= 0; k--) {
            off += (rem % shape[k]) * h->t.stride[k];
            rem /= shape[k];
        }
        for (int part = 0; part < parts; part++) {
            const int64_t at = parts * off + part, to = parts * i + part;
            double v = nconv__load(h->buf, rdt, at);
            if (isz == 8) memcpy(out + 8 * to, &v, 8);
            else if (isz == 2) {
                uint16_t u = ((const uint16_t *)h->buf)[at];
                memcpy(out + 2 * to, &u, 2);
            } else {
                float f = (float)v;
                memcpy(out + 4 * to, &f, 4);
            }
        }
    }
    char err[512];
    int r = npy_write_fd(fd, name, out, descr, frank, fshape, err, sizeof err);
    free(out);
    if (r) {
        fprintf(stderr, "nconv: %s\n", err);
        return EXIT_CHECK_FAILED;
    }
    return 0;
}

/* The flags that set the geometry, each with what it means when not given; for a problem the
 * library refuses, the first flag whose default makes it valid is the one to name. */
static int blame_flag(const nconv_problem *p, const char *const *val) {
    static const int order[] = {A_PADDING, A_PAD_END, A_STRIDE, A_DILATION, A_OUTPUT_PADDING, A_PADDING_MODE};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        const int a = order[k];
        if (!val[a]) continue;
        nconv_problem q = *p;
        for (int i = 0; i < q.ndims; i++) {
            if (a == A_PADDING) q.pad_begin[i] = 0, q.pad_end[i] = val[A_PAD_END] ? q.pad_end[i] : 0;
            if (a == A_PAD_END) q.pad_end[i] = q.pad_begin[i];
            if (a == A_STRIDE) q.stride[i] = 1;
            if (a == A_DILATION) q.dilation[i] = 1;
            if (a == A_OUTPUT_PADDING) q.output_padding[i] = 0;
        }
        if (a == A_PADDING_MODE) q.padding_mode = NCONV_PAD_ZEROS;
        if (!nconv_problem_validate(&q)) return a;
    }
    return -1;
}

static void shape_str(char *buf, size_t cap, int rank, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%lld%s", (long long)shape[i], rank == 1 ? "," : (i + 1 < rank ? ", " : ""));
    if (n < cap) snprintf(buf + n, cap - n, ")");
}

/* An output file: its tensor, whether it carries the vmap dim, its shape and whether its
 * file drops the batch dim (unbatched activations), and whether the run writes it. */
typedef struct out_spec {
    const char *name;
    const host_tensor *h;
    int batched, rank;
    const int64_t *shape;
    int drop, on;
} out_spec;

static int same_shape(const npy_array *a, int rank, const int64_t *shape) {
    if (a->ndim != rank) return 0;
    for (int i = 0; i < rank; i++)
        if (a->shape[i] != shape[i]) return 0;
    return 1;
}

int cmd_compute(int argc, char **argv) {
    /* A write past the file-size limit then fails (EFBIG), is reported and its files removed,
     * instead of the signal ending the process with a partial file. */
    signal(SIGXFSZ, SIG_IGN);
    const char *val[A_COUNT] = {0};
    int transposed = 0, relu = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--transposed")) {
            if (transposed) return cli_fail("--transposed: given twice");
            transposed = 1;
            continue;
        }
        if (!strcmp(argv[i], "--relu")) {
            if (relu) return cli_fail("--relu: given twice");
            relu = 1;
            continue;
        }
        int a = 0;
        const char *v = NULL;
        for (; a < A_COUNT; a++)
            if (flag_value(argc, argv, &i, arg_names[a], &v)) break;
        if (a == A_COUNT) return cli_fail("compute: unknown argument '%s' (see nconv help)", argv[i]);
        if (!v) return cli_fail("%s: missing value", arg_names[a]);
        if (val[a]) return cli_fail("%s: given twice", arg_names[a]);
        val[a] = v;
    }
    /* --NAME-bdim K: that operand carries the vmap dimension at position K. */
    int64_t bdim[A_COUNT];
    int batched = 0;
    for (int a = 0; a < A_COUNT; a++) bdim[a] = -1;
    static const int bdim_of[8][2] = {{A_X_BDIM, A_X},     {A_W_BDIM, A_W},     {A_B_BDIM, A_B},
                                      {A_Z_BDIM, A_Z},     {A_DY_BDIM, A_DY},   {A_GGX_BDIM, A_GGX},
                                      {A_GGW_BDIM, A_GGW}, {A_GGB_BDIM, A_GGB}};
    for (int k = 0; k < 8; k++) {
        const int f = bdim_of[k][0];
        if (!val[f]) continue;
        if (parse_i64(val[f], &bdim[bdim_of[k][1]]) || bdim[bdim_of[k][1]] < 0)
            return cli_fail("%s = '%s': expected a dimension index >= 0", arg_names[f], val[f]);
        if (!val[bdim_of[k][1]]) return cli_fail("%s: needs %s", arg_names[f], arg_names[bdim_of[k][1]]);
        batched = 1;
    }
    const int dbl = val[A_GGX] || val[A_GGW] || val[A_GGB];
    /* Tangents: each like its operand, the vmap dim (if any) where the operand has it. */
    static const int tangent_of[4][2] = {{A_TX, A_X}, {A_TW, A_W}, {A_TB, A_B}, {A_TZ, A_Z}};
    const int jvp = val[A_TX] || val[A_TW] || val[A_TB] || val[A_TZ];
    for (int k = 0; k < 4; k++) {
        const int t = tangent_of[k][0], a = tangent_of[k][1];
        if (val[t] && !val[a]) return cli_fail("%s: needs %s (the tangent of an absent operand)", arg_names[t], arg_names[a]);
        if (val[t]) bdim[t] = bdim[a];
    }
    if (dbl && !val[A_DY]) return cli_fail("%s: double backward needs --dy", arg_names[val[A_GGX] ? A_GGX : val[A_GGW] ? A_GGW : A_GGB]);
    if (dbl && (relu || val[A_Z]))
        return cli_fail("%s: double backward is for a convolution without epilogue (no --relu, no --z)",
                        relu ? "--relu" : "--z");
    if (!val[A_X]) return cli_fail("--x: required");
    if (!val[A_W]) return cli_fail("--w: required");
    if (!val[A_OUT]) return cli_fail("--out: required");

    /* Scalar flags that do not depend on the arrays. */
    int64_t groups = 1, threads = 1;
    double alpha = 1.0;
    nconv_padding_mode mode = NCONV_PAD_ZEROS;
    nconv_layout layout = NCONV_LAYOUT_NCX;
    int dtype_set = 0;
    nconv_dtype dt = NCONV_F32;
    if (val[A_GROUPS] && (parse_i64(val[A_GROUPS], &groups) || groups < 1))
        return cli_fail("--groups = '%s': expected an integer >= 1", val[A_GROUPS]);
    if (val[A_THREADS] && (parse_i64(val[A_THREADS], &threads) || threads < 1 || threads > 1024))
        return cli_fail("--threads = '%s': expected an integer 1..1024", val[A_THREADS]);
    if (val[A_ALPHA] && parse_f64(val[A_ALPHA], &alpha))
        return cli_fail("--alpha = '%s': expected a finite number", val[A_ALPHA]);
    if (val[A_PADDING_MODE] && parse_padding_mode(val[A_PADDING_MODE], &mode))
        return cli_fail("--padding-mode = '%s': expected zeros, reflect, replicate or circular", val[A_PADDING_MODE]);
    if (transposed && mode != NCONV_PAD_ZEROS)
        return cli_fail("--padding-mode = '%s': only zeros is supported with --transposed", val[A_PADDING_MODE]);
    if (val[A_LAYOUT]) {
        if (!strcmp(val[A_LAYOUT], "ncx")) layout = NCONV_LAYOUT_NCX;
        else if (!strcmp(val[A_LAYOUT], "nxc")) layout = NCONV_LAYOUT_NXC;
        else return cli_fail("--layout = '%s': expected ncx or nxc", val[A_LAYOUT]);
    }
    if (val[A_DTYPE]) {
        if (parse_dtype(val[A_DTYPE], &dt)) return cli_fail("--dtype = '%s': expected f32, f64, f16, bf16, c64 or c128", val[A_DTYPE]);
        dtype_set = 1;
    }
    nconv_context *ctx = NULL;
    if (nconv_context_create(&ctx)) return cli_fail("%s", nconv_last_error() + strlen("nconv: "));
    int rc = EXIT_INVALID;
    out_dir od = {.n = 0, .created = 0};
    npy_array x = {0}, w = {0}, b = {0}, z = {0}, dy = {0}, ggx = {0}, ggw = {0}, ggb = {0};
    npy_array tgx = {0}, tgw = {0}, tgb = {0}, tgz = {0}; /* the tangents */
    host_tensor htx = {0}, htw = {0}, htb = {0}, htz = {0}, hty = {0};
    host_tensor hx = {0}, hw = {0}, hb = {0}, hz = {0}, hy = {0}, hdy = {0}, hdx = {0}, hdw = {0}, hdb = {0}, hdz = {0};
    host_tensor hggx = {0}, hggw = {0}, hggb = {0}, hggy = {0}, hgx = {0}, hgw = {0};
    char err[1024];
    if (val[A_ALGO] && strcmp(val[A_ALGO], "auto")) {
        if (!strcmp(val[A_ALGO], "benchmark")) nconv_context_set_policy(ctx, NCONV_POLICY_BENCHMARK);
        else if (nconv_context_set_algorithm(ctx, val[A_ALGO])) {
            rc = cli_fail("--algo: %s", nconv_last_error() + strlen("nconv: "));
            goto done;
        }
    }
    nconv_context_set_threads(ctx, (int)threads);

    struct { int a; npy_array *arr; } loads[] = {{A_X, &x},     {A_W, &w},     {A_B, &b},     {A_Z, &z},
                                                 {A_DY, &dy},   {A_GGX, &ggx}, {A_GGW, &ggw}, {A_GGB, &ggb},
                                                 {A_TX, &tgx},  {A_TW, &tgw},  {A_TB, &tgb},  {A_TZ, &tgz}};
    for (size_t k = 0; k < sizeof loads / sizeof loads[0]; k++) {
        if (!val[loads[k].a]) continue;
        if (npy_read(val[loads[k].a], loads[k].arr, err, sizeof err)) {
            rc = cli_fail("%s: %s", arg_names[loads[k].a], err);
            goto done;
        }
    }
    /* Batched operands: move the vmap dim to the front; the arrays then describe one slice. */
    int64_t B = 0;
    for (size_t k = 0; k < sizeof loads / sizeof loads[0]; k++) {
        const int a = loads[k].a;
        if (!val[a] || bdim[a] < 0) continue;
        npy_array *arr = loads[k].arr;
        int primal = a;
        for (int k = 0; k < 4; k++)
            if (tangent_of[k][0] == a) primal = tangent_of[k][1];
        int bf = A_X_BDIM; /* the flag that batched it */
        for (int k = 0; k < 8; k++)
            if (bdim_of[k][1] == primal) bf = bdim_of[k][0];
        if (bdim[a] >= arr->ndim) {
            rc = cli_fail("%s = %lld: %s has only %d dims", arg_names[bf], (long long)bdim[a], arg_names[a], arr->ndim);
            goto done;
        }
        const int64_t size = arr->shape[bdim[a]];
        if (B && size != B) {
            rc = cli_fail("%s = %lld: batch size %lld differs from another batched operand's %lld", arg_names[bf],
                          (long long)bdim[a], (long long)size, (long long)B);
            goto done;
        }
        B = size;
        if (npy_move_axis_front(arr, (int)bdim[a])) {
            rc = cli_fail("%s: out of memory", arg_names[a]);
            goto done;
        }
        arr->ndim--;
        memmove(arr->shape, arr->shape + 1, sizeof(int64_t) * (size_t)arr->ndim);
        arr->numel = B ? arr->numel / B : 0;
    }
    if (batched && B < 1) {
        rc = cli_fail("batch size 0: the batched dimension is empty");
        goto done;
    }
    if (w.ndim < 3 || w.ndim > 5) {
        rc = cli_fail("--w: expected 3, 4 or 5 dims (O, C/groups, kernel...), got %d", w.ndim);
        goto done;
    }
    const int nd = w.ndim - 2;
    if (x.ndim != nd + 2 && x.ndim != nd + 1) {
        rc = cli_fail("--x: expected %d (batched) or %d (unbatched) dims for a %dD convolution, got %d", nd + 2, nd + 1,
                      nd, x.ndim);
        goto done;
    }
    const int unbatched = x.ndim == nd + 1;
    if (!dtype_set)
        dt = !strcmp(x.descr, "f2")    ? NCONV_F16
             : !strcmp(x.descr, "f8")  ? NCONV_F64
             : !strcmp(x.descr, "c8")  ? NCONV_C64
             : !strcmp(x.descr, "c16") ? NCONV_C128
                                       : NCONV_F32;
    if (relu && nconv__is_complex(dt)) {
        rc = cli_fail("--relu: complex numbers have no order, so a %s convolution has no relu (as in PyTorch)",
                      dtype_str(dt));
        goto done;
    }
    /* A complex computation reads real arrays as complex ones with zero imaginary parts; a
     * real one refuses complex arrays rather than drop their imaginary parts. */
    for (size_t k = 0; k < sizeof loads / sizeof loads[0]; k++) {
        npy_array *arr = loads[k].arr;
        if (!val[loads[k].a]) continue;
        if (arr->parts == 2 && !nconv__is_complex(dt)) {
            rc = cli_fail("%s: a complex array (%s) for the real dtype %s (give --dtype c64 or c128)",
                          arg_names[loads[k].a], arr->descr, dtype_str(dt));
            goto done;
        }
        if (arr->parts == 1 && nconv__is_complex(dt) && npy_make_complex(arr)) {
            rc = cli_fail("%s: out of memory", arg_names[loads[k].a]);
            goto done;
        }
    }

    nconv_problem p;
    nconv_problem_init(&p, nd);
    p.batch = unbatched ? 1 : x.shape[0];
    p.in_channels = x.shape[unbatched ? 0 : 1];
    p.groups = groups;
    p.transposed = transposed;
    p.padding_mode = mode;
    p.dtype = dt;
    for (int i = 0; i < nd; i++) {
        p.in_size[i] = x.shape[x.ndim - nd + i];
        p.kernel[i] = w.shape[2 + i];
    }
    int64_t wide; /* w.shape[1] * groups */
    if (!nconv__mul_ok(w.shape[1], groups, &wide)) {
        rc = cli_fail("--groups = %lld: w.shape[1] * groups = %lld * %lld overflows int64", (long long)groups,
                      (long long)w.shape[1], (long long)groups);
        goto done;
    }
    if (!transposed) {
        if (p.in_channels != wide) {
            rc = cli_fail("--x: %lld input channels, but --w expects w.shape[1] * groups = %lld * %lld = %lld",
                          (long long)p.in_channels, (long long)w.shape[1], (long long)groups, (long long)wide);
            goto done;
        }
        if (w.shape[0] % groups) {
            rc = cli_fail("--groups = %lld: does not divide the output channels w.shape[0] = %lld", (long long)groups,
                          (long long)w.shape[0]);
            goto done;
        }
        p.out_channels = w.shape[0];
    } else {
        if (p.in_channels != w.shape[0]) {
            rc = cli_fail("--x: %lld input channels, but a transposed --w of shape[0] = %lld expects as many",
                          (long long)p.in_channels, (long long)w.shape[0]);
            goto done;
        }
        if (p.in_channels % groups) {
            rc = cli_fail("--groups = %lld: does not divide the input channels %lld", (long long)groups,
                          (long long)p.in_channels);
            goto done;
        }
        p.out_channels = wide;
    }
    if (p.out_channels < 1 || p.in_channels < 1) {
        rc = cli_fail("--w: channel dims must be >= 1 (w.shape[0] = %lld, w.shape[1] = %lld)", (long long)w.shape[0],
                      (long long)w.shape[1]);
        goto done;
    }
    for (int i = 0; i < nd; i++) {
        if (p.kernel[i] < 1) {
            rc = cli_fail("--w: kernel size w.shape[%d] = %lld must be >= 1", 2 + i, (long long)p.kernel[i]);
            goto done;
        }
        if (p.in_size[i] < 1) {
            rc = cli_fail("--x: spatial size x.shape[%d] = %lld must be >= 1", x.ndim - nd + i, (long long)p.in_size[i]);
            goto done;
        }
    }

    /* Per-dim integer lists. */
    struct { int a; int64_t *dst; int64_t min; } lists[] = {
        {A_STRIDE, p.stride, 1}, {A_DILATION, p.dilation, 1}, {A_OUTPUT_PADDING, p.output_padding, 0}};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        if (!val[lists[k].a]) continue;
        if (parse_i64_list(val[lists[k].a], nd, lists[k].dst)) {
            rc = cli_fail("%s = '%s': expected one integer or %d comma-separated integers", arg_names[lists[k].a],
                          val[lists[k].a], nd);
            goto done;
        }
        for (int i = 0; i < nd; i++)
            if (lists[k].dst[i] < lists[k].min) {
                rc = cli_fail("%s = '%s': values must be >= %lld", arg_names[lists[k].a], val[lists[k].a],
                              (long long)lists[k].min);
                goto done;
            }
    }
    if (val[A_OUTPUT_PADDING] && !transposed) {
        rc = cli_fail("--output-padding = '%s': only valid with --transposed", val[A_OUTPUT_PADDING]);
        goto done;
    }
    const char *pad = val[A_PADDING];
    if (pad && (!strcmp(pad, "same") || !strcmp(pad, "valid"))) {
        if (val[A_PAD_END]) {
            rc = cli_fail("--pad-end = '%s': cannot be combined with --padding %s", val[A_PAD_END], pad);
            goto done;
        }
        if (!strcmp(pad, "same")) {
            if (transposed) {
                rc = cli_fail("--padding = same: not supported with --transposed");
                goto done;
            }
            for (int i = 0; i < nd; i++)
                if (p.stride[i] != 1) {
                    rc = cli_fail("--padding = same: needs --stride 1, got stride %lld", (long long)p.stride[i]);
                    goto done;
                }
            if (nconv_problem_set_padding_same(&p)) {
                rc = cli_fail("--padding = same: %s", nconv_last_error() + strlen("nconv: "));
                goto done;
            }
        }
    } else {
        if (pad && parse_i64_list(pad, nd, p.pad_begin)) {
            rc = cli_fail("--padding = '%s': expected same, valid, one integer or %d comma-separated integers", pad, nd);
            goto done;
        }
        for (int i = 0; i < nd; i++)
            if (p.pad_begin[i] < 0) {
                rc = cli_fail("--padding = '%s': values must be >= 0", pad);
                goto done;
            }
        memcpy(p.pad_end, p.pad_begin, sizeof p.pad_end);
        if (val[A_PAD_END] && parse_i64_list(val[A_PAD_END], nd, p.pad_end)) {
            rc = cli_fail("--pad-end = '%s': expected one integer or %d comma-separated integers", val[A_PAD_END], nd);
            goto done;
        }
    }
    if (nconv_problem_validate(&p)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", nconv_last_error() + strlen("nconv: "));
        const int a = blame_flag(&p, val);
        if (a >= 0) rc = cli_fail("%s = '%s': %s", arg_names[a], val[a], why);
        else rc = cli_fail("--x, --w: the arrays' shapes give %s", why);
        goto done;
    }

    int64_t xs[NCONV_MAX_DIMS], wsh[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    nconv_problem_shapes(&p, xs, wsh, ys);
    const int r = nd + 2;
    const int drop = unbatched; /* file arrays of activations lack the batch dim */
    char want[128], got[128];
    if (val[A_B] && (b.ndim != 1 || b.shape[0] != p.out_channels)) {
        shape_str(got, sizeof got, b.ndim, b.shape);
        rc = cli_fail("--b: shape %s, expected (%lld,) (out_channels)", got, (long long)p.out_channels);
        goto done;
    }
    struct { int a; npy_array *arr; } blike[] = {{A_GGB, &ggb}, {A_TB, &tgb}};
    for (size_t k = 0; k < 2; k++)
        if (val[blike[k].a] && (blike[k].arr->ndim != 1 || blike[k].arr->shape[0] != p.out_channels)) {
            shape_str(got, sizeof got, blike[k].arr->ndim, blike[k].arr->shape);
            rc = cli_fail("%s: shape %s, expected (%lld,) (out_channels)", arg_names[blike[k].a], got,
                          (long long)p.out_channels);
            goto done;
        }
    struct { int a; npy_array *arr; } wlike[] = {{A_GGW, &ggw}, {A_TW, &tgw}};
    for (size_t k = 0; k < 2; k++)
        if (val[wlike[k].a] && !same_shape(wlike[k].arr, r, wsh)) {
            shape_str(got, sizeof got, wlike[k].arr->ndim, wlike[k].arr->shape);
            shape_str(want, sizeof want, r, wsh);
            rc = cli_fail("%s: shape %s, expected the weight shape %s", arg_names[wlike[k].a], got, want);
            goto done;
        }
    struct { int a; npy_array *arr; } xlike[] = {{A_GGX, &ggx}, {A_TX, &tgx}};
    for (size_t k = 0; k < 2; k++)
        if (val[xlike[k].a] && !same_shape(xlike[k].arr, r - drop, xs + drop)) {
            shape_str(got, sizeof got, xlike[k].arr->ndim, xlike[k].arr->shape);
            shape_str(want, sizeof want, r - drop, xs + drop);
            rc = cli_fail("%s: shape %s, expected the input shape %s", arg_names[xlike[k].a], got, want);
            goto done;
        }
    struct { int a; npy_array *arr; } ylike[] = {{A_Z, &z}, {A_DY, &dy}, {A_TZ, &tgz}};
    for (size_t k = 0; k < 3; k++) {
        if (!val[ylike[k].a]) continue;
        if (!same_shape(ylike[k].arr, r - drop, ys + drop)) {
            shape_str(got, sizeof got, ylike[k].arr->ndim, ylike[k].arr->shape);
            shape_str(want, sizeof want, r - drop, ys + drop);
            rc = cli_fail("%s: shape %s, expected the output shape %s", arg_names[ylike[k].a], got, want);
            goto done;
        }
    }

    /* The outputs, in the order of the contract; their files are made before the computation,
     * and replace the old ones only when all are written. */
    const out_spec all_outs[] = {
        {"y.npy", &hy, 1, r, ys, drop, 1},
        {"ty.npy", &hty, 1, r, ys, drop, jvp},
        {"dx.npy", &hdx, 1, r, xs, drop, val[A_DY] != NULL},
        {"dw.npy", &hdw, 1, r, wsh, 0, val[A_DY] != NULL},
        {"db.npy", &hdb, 1, 1, &p.out_channels, 0, val[A_DY] && val[A_B]},
        {"dz.npy", &hdz, 1, r, ys, drop, val[A_DY] && val[A_Z]},
        {"ggy.npy", &hggy, 1, r, ys, drop, dbl},
        {"gx.npy", &hgx, 1, r, xs, drop, dbl},
        {"gw.npy", &hgw, 1, r, wsh, 0, dbl}};
    out_spec outs[OUTDIR_MAX];
    int nout = 0;
    const char *out_names[OUTDIR_MAX];
    for (size_t k = 0; k < sizeof all_outs / sizeof all_outs[0]; k++)
        if (all_outs[k].on) outs[nout] = all_outs[k], out_names[nout++] = all_outs[k].name;
    if ((rc = outdir_open(&od, "--out", val[A_OUT], out_names, nout))) goto done;

    rc = EXIT_CHECK_FAILED;
    /* Inputs: their slices (one when shared); outputs: one slice per b. */
#define NB(a) (bdim[a] >= 0 ? B : 1)
    const int64_t OB = batched ? B : 1;
    int oom = to_tensor_batch(x.data, NB(A_X), r, xs, dt, layout, &hx) ||
              to_tensor_batch(w.data, NB(A_W), r, wsh, dt, layout, &hw) || to_tensor_batch(NULL, OB, r, ys, dt, layout, &hy) ||
              (val[A_B] && to_tensor_batch(b.data, NB(A_B), 1, &p.out_channels, dt, layout, &hb)) ||
              (val[A_Z] && to_tensor_batch(z.data, NB(A_Z), r, ys, dt, layout, &hz));
    if (jvp)
        oom = oom || (val[A_TX] && to_tensor_batch(tgx.data, NB(A_X), r, xs, dt, layout, &htx)) ||
              (val[A_TW] && to_tensor_batch(tgw.data, NB(A_W), r, wsh, dt, layout, &htw)) ||
              (val[A_TB] && to_tensor_batch(tgb.data, NB(A_B), 1, &p.out_channels, dt, layout, &htb)) ||
              (val[A_TZ] && to_tensor_batch(tgz.data, NB(A_Z), r, ys, dt, layout, &htz)) ||
              to_tensor_batch(NULL, OB, r, ys, dt, layout, &hty);
    if (val[A_DY])
        oom = oom || to_tensor_batch(dy.data, NB(A_DY), r, ys, dt, layout, &hdy) ||
              to_tensor_batch(NULL, OB, r, xs, dt, layout, &hdx) || to_tensor_batch(NULL, OB, r, wsh, dt, layout, &hdw) ||
              (val[A_B] && to_tensor_batch(NULL, OB, 1, &p.out_channels, dt, layout, &hdb)) ||
              (val[A_Z] && to_tensor_batch(NULL, OB, r, ys, dt, layout, &hdz));
    if (dbl)
        oom = oom || (val[A_GGX] && to_tensor_batch(ggx.data, NB(A_GGX), r, xs, dt, layout, &hggx)) ||
              (val[A_GGW] && to_tensor_batch(ggw.data, NB(A_GGW), r, wsh, dt, layout, &hggw)) ||
              (val[A_GGB] && to_tensor_batch(ggb.data, NB(A_GGB), 1, &p.out_channels, dt, layout, &hggb)) ||
              to_tensor_batch(NULL, OB, r, ys, dt, layout, &hggy) || to_tensor_batch(NULL, OB, r, xs, dt, layout, &hgx) ||
              to_tensor_batch(NULL, OB, r, wsh, dt, layout, &hgw);
#undef NB
    if (oom) {
        fprintf(stderr, "nconv: out of memory\n");
        goto done;
    }
    nconv_epilogue epi = {relu ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, val[A_Z] ? alpha : 1.0};
    /* Batch strides: a slice apart for batched operands, 0 for shared ones. */
#define BS(a, h) (bdim[a] >= 0 ? (h).batch_stride : 0)
    const nconv_batch bt = {B, BS(A_X, hx), BS(A_W, hw), BS(A_B, hb), BS(A_Z, hz), hy.batch_stride, BS(A_DY, hdy),
                            hdx.batch_stride, hdw.batch_stride, hdb.batch_stride, hdz.batch_stride};
    /* A tangent is batched where its primal is. */
    const nconv_jvp_batch btj = {B,           BS(A_X, hx),  BS(A_W, hw),  BS(A_B, hb),  BS(A_Z, hz),    BS(A_X, htx),
                                 BS(A_W, htw), BS(A_B, htb), BS(A_Z, htz), hy.batch_stride, hty.batch_stride};
#undef BS
    const nconv_tensor *tb = val[A_B] ? &hb.t : NULL, *tz = val[A_Z] ? &hz.t : NULL;
    const nconv_tensor *tg[4] = {val[A_TX] ? &htx.t : NULL, val[A_TW] ? &htw.t : NULL, val[A_TB] ? &htb.t : NULL,
                                 val[A_TZ] ? &htz.t : NULL};
    if (jvp) {
        if (batched ? nconv_forward_jvp_batched(ctx, &p, &epi, &btj, &hx.t, &hw.t, tb, tz, tg[0], tg[1], tg[2], tg[3],
                                                &hy.t, &hty.t)
                    : nconv_forward_jvp(ctx, &p, &epi, &hx.t, &hw.t, tb, tz, tg[0], tg[1], tg[2], tg[3], &hy.t,
                                        &hty.t)) {
            fprintf(stderr, "%s\n", nconv_last_error());
            goto done;
        }
    } else if (batched ? nconv_forward_batched(ctx, &p, &epi, &bt, &hx.t, &hw.t, tb, tz, &hy.t)
                       : nconv_forward(ctx, &p, &epi, &hx.t, &hw.t, tb, tz, &hy.t, NULL, 0)) {
        fprintf(stderr, "%s\n", nconv_last_error());
        goto done;
    }
    const nconv_tensor *tdb = val[A_B] ? &hdb.t : NULL, *tdz = val[A_Z] ? &hdz.t : NULL;
    if (val[A_DY] &&
        (batched ? nconv_backward_batched(ctx, &p, &epi, &bt, &hx.t, &hw.t, &hy.t, &hdy.t, &hdx.t, &hdw.t, tdb, tdz)
                 : nconv_backward(ctx, &p, &epi, &hx.t, &hw.t, &hy.t, &hdy.t, &hdx.t, &hdw.t, tdb, tdz, NULL, 0))) {
        fprintf(stderr, "%s\n", nconv_last_error());
        goto done;
    }
#define BS(a, h) (bdim[a] >= 0 ? (h).batch_stride : 0)
    const nconv_double_batch bt2 = {B,           BS(A_X, hx),       BS(A_W, hw),       BS(A_DY, hdy),
                                    BS(A_GGX, hggx), BS(A_GGW, hggw), BS(A_GGB, hggb), hggy.batch_stride,
                                    hgx.batch_stride, hgw.batch_stride};
#undef BS
    const nconv_tensor *gg[3] = {val[A_GGX] ? &hggx.t : NULL, val[A_GGW] ? &hggw.t : NULL, val[A_GGB] ? &hggb.t : NULL};
    if (dbl && (batched ? nconv_double_backward_batched(ctx, &p, &bt2, &hx.t, &hw.t, &hdy.t, gg[0], gg[1], gg[2],
                                                        &hggy.t, &hgx.t, &hgw.t)
                        : nconv_double_backward(ctx, &p, &hx.t, &hw.t, &hdy.t, gg[0], gg[1], gg[2], &hggy.t, &hgx.t,
                                                &hgw.t))) {
        fprintf(stderr, "%s\n", nconv_last_error());
        goto done;
    }
    rc = 0;
    for (int k = 0; k < nout && !rc; k++)
        rc = write_tensor(outdir_fd(&od, k), outs[k].name, outs[k].h, outs[k].batched ? B : 0, outs[k].rank,
                          outs[k].shape, outs[k].drop, dt);
    if (!rc) rc = outdir_commit(&od);
done:
    outdir_abort(&od);
    npy_free(&x), npy_free(&w), npy_free(&b), npy_free(&z), npy_free(&dy);
    npy_free(&ggx), npy_free(&ggw), npy_free(&ggb), npy_free(&tgx), npy_free(&tgw), npy_free(&tgb), npy_free(&tgz);
    host_tensor *all[] = {&hx,   &hw,   &hb,   &hz,   &hy,  &hdy, &hdx, &hdw, &hdb, &hdz, &hggx,
                          &hggw, &hggb, &hggy, &hgx,  &hgw, &htx, &htw, &htb, &htz, &hty};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]->buf);
    nconv_context_destroy(ctx);
    return rc;
}
