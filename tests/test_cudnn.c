/*
 * The CUDA backend where no GPU is needed: nconv problems mapped to cuDNN
 * graphs that cuDNN itself builds and finalizes (it checks every shape,
 * stride and padding against the convolution), the context calls' messages,
 * and the libraries missing (`test_cudnn absent`, run with
 * NCONV_CUDNN_LIBRARY naming no file). With a device the context is made;
 * tests/gpu/ computes on it.
 */
#include "cuda/cuda_internal.h"
#include "test_util.h"

#include <stdint.h>

static const nconv_cuda_lib *lib;
static int graphs_built;

/* Operands are never read here: distinct fake addresses, far apart, 256-byte aligned. */
static void *fake(int i) { return (void *)(uintptr_t)((uint64_t)(i + 1) << 40); }

static void tensor(nconv_tensor *t, int i, int rank, const int64_t *shape, nconv_layout layout) {
    nconv_tensor_init(t, fake(i), rank, shape, layout);
}

static int build_all(const nconv_gspec *g, int n, const char *what) {
    int ok = 1;
    for (int i = 0; i < n; i++) {
        nconv_cudnn_graph cg;
        nconv_status st = nconv__cudnn_graph(lib, &g[i], NULL, &cg);
        CHECK(st == NCONV_OK, "%s: graph %d (kind %d) not finalized: %s", what, i, (int)g[i].kind, nconv_last_error());
        if (st) {
            ok = 0;
            continue;
        }
        graphs_built++;
        nconv__cudnn_graph_destroy(lib, &cg);
    }
    return ok;
}

/* Every graph a forward (fused and unfused) and a backward of p would run. */
static void map_problem(const nconv_problem *p, nconv_layout layout, int relu, int bias, int z, unsigned outputs,
                        const char *what) {
    int64_t xs[5], ws[5], ys[5];
    if (nconv_problem_shapes(p, xs, ws, ys)) return;
    const int r = p->ndims + 2;
    nconv_tensor x, w, y, b, zt, dy, dx, dw, db, dz;
    tensor(&x, 0, r, xs, layout), tensor(&w, 1, r, ws, NCONV_LAYOUT_NCX), tensor(&y, 2, r, ys, layout);
    tensor(&b, 3, 1, &p->out_channels, NCONV_LAYOUT_NCX), tensor(&zt, 4, r, ys, layout);
    tensor(&dy, 5, r, ys, layout), tensor(&dx, 6, r, xs, layout), tensor(&dw, 7, r, ws, NCONV_LAYOUT_NCX);
    tensor(&db, 8, 1, &p->out_channels, NCONV_LAYOUT_NCX), tensor(&dz, 9, r, ys, layout);
    nconv_epilogue epi = {relu ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, 0.5};
    nconv_oplan o;
    nconv_fwd_ops f;
    nconv_status st = nconv__oplan_prepare(&o, p, &epi, 0, 0);
    if (!st) st = nconv__fwd_ops(&o, &x, &w, bias ? &b : NULL, z ? &zt : NULL, &y, &f);
    CHECK(st == NCONV_OK, "%s: forward operands: %s", what, nconv_last_error());
    if (st) return;
    nconv_gspec g[8];
    int kernels;
    const int padded = p->padding_mode != NCONV_PAD_ZEROS;
    for (int fused = 0; fused < 2; fused++) {
        /* one convolution; nconv's kernels: the padding, the epilogue where not fused */
        const int n = nconv__cuda_steps(&o, &f, NULL, fused, g, 8, &kernels);
        CHECK(n == 1 && kernels >= padded && kernels <= padded + 1, "%s: %d forward graphs, %d kernels", what, n,
              kernels);
        build_all(g, n, what);
    }
    nconv_bwd_ops v;
    st = nconv__oplan_prepare(&o, p, &epi, 1, outputs);
    if (!st)
        st = nconv__bwd_ops(&o, &x, &w, &y, &dy, outputs & NCONV_OUT_DX ? &dx : NULL,
                            outputs & NCONV_OUT_DW ? &dw : NULL, outputs & NCONV_OUT_DB ? &db : NULL,
                            outputs & NCONV_OUT_DZ ? &dz : NULL, &v);
    CHECK(st == NCONV_OK, "%s: backward operands: %s", what, nconv_last_error());
    if (st) return;
    /* a convolution each for dx and dw; kernels: relu's mask, dz, db, and the padding's */
    const int n = nconv__cuda_steps(&o, NULL, &v, 0, g, 8, &kernels);
    const int has_dx = !!(outputs & NCONV_OUT_DX), has_dw = !!(outputs & NCONV_OUT_DW);
    const int least = relu + !!(outputs & NCONV_OUT_DZ) + !!(outputs & NCONV_OUT_DB) + (padded ? has_dx + has_dw : 0);
    CHECK(n == has_dx + has_dw && kernels >= least && kernels <= least + has_dx, "%s: %d backward graphs, %d kernels",
          what, n, kernels);
    build_all(g, n, what);
}

static void test_mapping_random(void) {
    uint64_t rng = 7;
    static const nconv_dtype dtypes[] = {NCONV_F32, NCONV_F16, NCONV_BF16, NCONV_F64};
    int mapped = 0;
    for (int it = 0; it < 400 && mapped < test_iterations(150); it++) {
        nconv_problem p;
        const int nd = (int)test_int(&rng, 1, 3);
        nconv_problem_init(&p, nd);
        p.batch = test_int(&rng, 1, 3);
        p.groups = test_int(&rng, 0, 3) == 0 ? test_int(&rng, 2, 4) : 1;
        const int depthwise = test_int(&rng, 0, 4) == 0;
        p.in_channels = depthwise ? p.groups : p.groups * test_int(&rng, 1, 4);
        p.out_channels = p.groups * test_int(&rng, 1, 4);
        p.transposed = test_int(&rng, 0, 3) == 0;
        p.dtype = dtypes[test_int(&rng, 0, 3)];
        for (int i = 0; i < nd; i++) {
            p.in_size[i] = test_int(&rng, 3, 9);
            p.kernel[i] = test_int(&rng, 1, 3);
            p.stride[i] = test_int(&rng, 1, 2);
            p.dilation[i] = test_int(&rng, 1, 2);
            p.pad_begin[i] = test_int(&rng, 0, 2);
            p.pad_end[i] = test_int(&rng, -1, 2);
            if (p.transposed) p.output_padding[i] = test_int(&rng, 0, 1);
        }
        if (!p.transposed && test_int(&rng, 0, 3) == 0) p.padding_mode = (nconv_padding_mode)test_int(&rng, 1, 3);
        if (nconv_problem_validate(&p)) continue;
        char what[256];
        nconv_problem_to_desc(&p, what, sizeof what);
        const nconv_layout layout = test_int(&rng, 0, 1) ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX;
        const unsigned outputs = (unsigned)test_int(&rng, 1, 15);
        map_problem(&p, layout, (int)test_int(&rng, 0, 1), (int)test_int(&rng, 0, 1), (int)test_int(&rng, 0, 1),
                    outputs, what);
        mapped++;
    }
    CHECK(mapped >= test_iterations(150), "only %d valid problems drawn", mapped);
}

/* The mapping's shapes: a 1-d problem gains a unit dim, a negative end padding cuts the
 * input's tail off, a transposed forward is cuDNN's backward-data into y. */
static void test_mapping_shapes(void) {
    nconv_problem p;
    nconv_problem_init(&p, 1);
    p.batch = 2, p.in_channels = 4, p.out_channels = 6, p.in_size[0] = 10, p.kernel[0] = 3, p.pad_end[0] = -2;
    int64_t xs[5], ws[5], ys[5];
    nconv_problem_shapes(&p, xs, ws, ys);
    nconv_tensor x, w, y;
    tensor(&x, 0, 3, xs, NCONV_LAYOUT_NCX), tensor(&w, 1, 3, ws, NCONV_LAYOUT_NCX);
    tensor(&y, 2, 3, ys, NCONV_LAYOUT_NCX);
    nconv_oplan o;
    nconv_fwd_ops f;
    nconv_gspec g[8];
    int kernels;
    CHECK(!nconv__oplan_prepare(&o, &p, NULL, 0, 0) && !nconv__fwd_ops(&o, &x, &w, NULL, NULL, &y, &f), "%s",
          nconv_last_error());
    int n = nconv__cuda_steps(&o, &f, NULL, 1, g, 8, &kernels);
    CHECK(n == 1 && g[0].kind == NCONV_G_CONV_FWD, "n %d kind %d", n, (int)g[0].kind);
    CHECK(g[0].x.rank == 4 && g[0].x.dims[2] == 1 && g[0].x.dims[3] == 8 && g[0].post[0] == 0,
          "x rank %d dims %lld x %lld, post %lld", g[0].x.rank, (long long)g[0].x.dims[2], (long long)g[0].x.dims[3],
          (long long)g[0].post[0]);
    CHECK(g[0].y.dims[3] == 6 && g[0].w.dims[0] == 6 && g[0].w.dims[1] == 4, "y %lld", (long long)g[0].y.dims[3]);
    build_all(g, n, "1-d, negative end padding");

    /* Backward-data of the same problem: dx's tail reads no window, so the convolution
     * writes a zeroed temporary and a copy step writes dx. */
    nconv_tensor dy, dx;
    tensor(&dy, 3, 3, ys, NCONV_LAYOUT_NCX), tensor(&dx, 4, 3, xs, NCONV_LAYOUT_NCX);
    nconv_bwd_ops v;
    CHECK(!nconv__oplan_prepare(&o, &p, NULL, 1, NCONV_OUT_DX) &&
              !nconv__bwd_ops(&o, &x, &w, &y, &dy, &dx, NULL, NULL, NULL, &v),
          "%s", nconv_last_error());
    n = nconv__cuda_steps(&o, NULL, &v, 0, g, 8, &kernels);
    CHECK(n == 1 && kernels == 1 && g[0].kind == NCONV_G_CONV_BWD_D && g[0].x.dims[3] == 8, "n %d, kernels %d", n,
          kernels);
    build_all(g, n, "1-d backward-data, negative end padding");

    /* Transposed 2-d, output padding beyond the end padding, channels-last, bias + relu. */
    nconv_problem_init(&p, 2);
    p.batch = 1, p.in_channels = 8, p.out_channels = 4, p.groups = 2, p.transposed = 1;
    for (int i = 0; i < 2; i++) p.in_size[i] = 5, p.kernel[i] = 3, p.stride[i] = 2, p.output_padding[i] = 1;
    nconv_problem_shapes(&p, xs, ws, ys);
    nconv_tensor b;
    const int64_t oc = 4;
    tensor(&x, 0, 4, xs, NCONV_LAYOUT_NXC), tensor(&w, 1, 4, ws, NCONV_LAYOUT_NCX);
    tensor(&y, 2, 4, ys, NCONV_LAYOUT_NXC);
    tensor(&b, 3, 1, &oc, NCONV_LAYOUT_NCX);
    const nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};
    CHECK(!nconv__oplan_prepare(&o, &p, &relu, 0, 0) && !nconv__fwd_ops(&o, &x, &w, &b, NULL, &y, &f), "%s",
          nconv_last_error());
    n = nconv__cuda_steps(&o, &f, NULL, 1, g, 8, &kernels);
    CHECK(n == 1 && kernels == 1 && g[0].kind == NCONV_G_CONV_BWD_D && g[0].x.dims[2] == 11 && !g[0].fused,
          "n %d, kernels %d, direct input %lld", n, kernels, (long long)g[0].x.dims[2]);
    build_all(g, n, "transposed 2-d, output padding");
    /* Without output padding: one fused graph. */
    p.output_padding[0] = p.output_padding[1] = 0, p.pad_end[0] = p.pad_end[1] = 0;
    nconv_problem_shapes(&p, xs, ws, ys);
    tensor(&y, 2, 4, ys, NCONV_LAYOUT_NXC);
    CHECK(!nconv__oplan_prepare(&o, &p, &relu, 0, 0) && !nconv__fwd_ops(&o, &x, &w, &b, NULL, &y, &f), "%s",
          nconv_last_error());
    n = nconv__cuda_steps(&o, &f, NULL, 1, g, 8, &kernels);
    CHECK(n == 1 && kernels == 0 && g[0].fused && g[0].relu && g[0].bias.uid, "n %d, kernels %d", n, kernels);
    build_all(g, n, "transposed 2-d, fused bias + relu");

    /* cuDNN checks the mapping: a wrong output size is refused, with cuDNN's reason. */
    g[0].y.dims[2] += 1;
    nconv_cudnn_graph cg;
    const nconv_status st = nconv__cudnn_graph(lib, &g[0], NULL, &cg);
    CHECK(st != NCONV_OK && strstr(nconv_last_error(), "cuDNN 9"), "status %d: %s", (int)st, nconv_last_error());
}

static void test_context_calls(void) {
    nconv_context *cpu;
    CHECK(!nconv_context_create(&cpu), "%s", nconv_last_error());
    int device = 7;
    CHECK(!nconv_context_device(cpu, &device) && device == -1, "device %d", device);
    CHECK(!nconv_context_device(NULL, &device) && device == -1, "device %d", device);
    CHECK_ERROR(nconv_context_device(cpu, NULL), NCONV_INVALID_ARGUMENT, "device is NULL");
    CHECK_ERROR(nconv_context_set_stream(cpu, NULL), NCONV_INVALID_ARGUMENT, "CPU context");
    CHECK_ERROR(nconv_context_set_allow_tf32(cpu, 1), NCONV_INVALID_ARGUMENT, "CPU context");
    CHECK_ERROR(nconv_context_set_stream(NULL, NULL), NCONV_INVALID_ARGUMENT, "ctx is NULL");
    nconv_context_destroy(cpu);
    CHECK_ERROR(nconv_context_create_cuda(NULL, 0), NCONV_INVALID_ARGUMENT, "ctx is NULL");

    /* Without a device the context is refused with the runtime's reason; with one it is
     * made (tests/gpu computes on it). */
    nconv_context *ctx = NULL;
    const nconv_status st = nconv_context_create_cuda(&ctx, 0);
    if (st == NCONV_OK) {
        printf("a CUDA device is present: context made\n");
        CHECK(!nconv_context_device(ctx, &device) && device == 0, "device %d", device);
        CHECK_ERROR(nconv_context_create_cuda(&ctx, 1 << 20), NCONV_INVALID_ARGUMENT, "device = 1048576");
        nconv_context_destroy(ctx);
    } else {
        printf("no CUDA device: %s\n", nconv_last_error());
        CHECK(st == NCONV_UNSUPPORTED && ctx == NULL && strstr(nconv_last_error(), "cudaGetDeviceCount"),
              "status %d: %s", (int)st, nconv_last_error());
    }
}

/* The padding kernels' index logic (pad_index.h, compiled into the PTX as well): along one
 * axis, the fold visits each padded position exactly once, from the input element the pad
 * reads, in increasing order; so fold is pad's adjoint: <pad(x), y> = <x, fold(y)>. */
static void test_pad_index(void) {
    int cases = 0;
    for (int mode = 1; mode <= 3; mode++)
        for (int64_t n = 1; n <= 7; n++)
            for (int64_t pb = 0; pb <= 9; pb++)
                for (int64_t pe = -2; pe <= 9; pe++) {
                    const int64_t limit = mode == 1 ? n - 1 : mode == 3 ? n : 1 << 20; /* as PyTorch */
                    const int64_t out = pb + n + pe;
                    if (pb > limit || pe > limit || out < 1) continue;
                    int64_t visits[32] = {0}, x[8], y[32], lhs = 0, rhs = 0;
                    for (int64_t i = 0; i < n; i++) x[i] = 3 * i - 5;
                    for (int64_t q = 0; q < out; q++) y[q] = 7 - 2 * q;
                    for (int64_t q = 0; q < out; q++) lhs += x[nconv__map_index(q - pb, n, mode)] * y[q];
                    int ordered = 1;
                    for (int64_t i = 0; i < n; i++) {
                        int64_t sum = 0, last = -1;
                        for (int64_t q = nconv__pad_next_source(-1, i, pb, n, out, mode); q >= 0;
                             q = nconv__pad_next_source(q, i, pb, n, out, mode)) {
                            ordered &= q > last && nconv__map_index(q - pb, n, mode) == i;
                            last = q, sum += y[q], visits[q]++;
                        }
                        rhs += x[i] * sum;
                    }
                    int once = 1;
                    for (int64_t q = 0; q < out; q++) once &= visits[q] == 1;
                    CHECK(once && ordered && lhs == rhs,
                          "mode %d n %lld pb %lld pe %lld: once %d ordered %d, %lld vs %lld", mode, (long long)n,
                          (long long)pb, (long long)pe, once, ordered, (long long)lhs, (long long)rhs);
                    cases++;
                }
    CHECK(cases > 500, "%d cases", cases);
    /* The build's PTX holds every kernel the backend launches. */
    if (!nconv__pad_ptx_size || !nconv__elementwise_ptx_size) printf("this build has no CUDA kernels (no nvcc)\n");
    static const char *const pads[] = {"nconv_pad_b2", "nconv_pad_b4", "nconv_pad_b8", "nconv_fold_f32",
                                       "nconv_fold_f64", "nconv_fold_f16", "nconv_fold_bf16"};
    for (int i = 0; nconv__pad_ptx_size && i < 7; i++)
        CHECK(strstr(nconv__pad_ptx, pads[i]) != NULL, "%s missing from the PTX", pads[i]);
    static const char *const kinds[] = {"epilogue", "mask", "chsum"}, *const types[] = {"f32", "f64", "f16", "bf16"};
    for (int i = 0; nconv__elementwise_ptx_size && i < 12; i++) {
        char name[64];
        snprintf(name, sizeof name, ".entry nconv_%s_%s(", kinds[i / 4], types[i % 4]);
        CHECK(strstr(nconv__elementwise_ptx, name) != NULL, "%s missing from the PTX", name);
    }
}

/* NCONV_CUDNN_LIBRARY names a missing file: every CUDA entry refuses, saying so. */
static int test_absent(void) {
    nconv_context *ctx = NULL;
    CHECK_ERROR(nconv_context_create_cuda(&ctx, 0), NCONV_UNSUPPORTED, "cannot load");
    CHECK(ctx == NULL, "ctx set");
    CHECK(strstr(nconv_last_error(), "NCONV_CUDNN_LIBRARY") != NULL, "%s", nconv_last_error());
    CHECK(nconv__cudnn_lib() == NULL, "cuDNN loaded");
    /* The CPU path is untouched. */
    CHECK(!nconv_context_create(&ctx), "%s", nconv_last_error());
    nconv_context_destroy(ctx);
    return test_summary();
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "absent")) return test_absent();
    lib = nconv__cudnn_lib();
    CHECK(lib != NULL, "cuDNN not loaded: %s", nconv_last_error());
    if (!lib) return test_summary();
    printf("cuDNN %zu\n", lib->cudnnGetVersion());
    test_context_calls();
    test_mapping_shapes();
    test_pad_index();
    test_mapping_random();
    printf("%d graphs finalized\n", graphs_built);
    return test_summary();
}
