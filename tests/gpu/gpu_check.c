/*
 * The CUDA path against the CPU path: random problems over every feature a CUDA
 * context computes (dtypes, 1-3 spatial dims, groups and depthwise, stride,
 * dilation, asymmetric and negative end padding, transposed with output
 * padding, NCHW / NHWC / gapped strides, bias, z, alpha, relu, every backward
 * output), each computed on the device and on the CPU and compared within the
 * dtype's tolerance; then the refusals and the context's settings. Exits with
 * 77 (ctest's skip code) where no CUDA device is present.
 *
 *     gpu_check [PROBLEMS] [SEED] [--cpu]
 *
 * --cpu runs the whole check with a second CPU context in the device's place
 * (host memory for device memory): the harness's own test where there is no GPU.
 */
#include "internal.h"
#include "test_util.h"
#include "../tools/nconv/cuda_rt.h"

enum { SKIP = 77, OPS = 10 };

/* Device memory, or host memory standing in for it (--cpu). */
static int self_check;
static void *dev_malloc(size_t n) { return self_check ? malloc(n ? n : 1) : cuda_rt_malloc(n); }
static void dev_free(void *p) {
    if (self_check) free(p);
    else cuda_rt_free(p);
}
static int to_dev(void *d, const void *h, size_t n) {
    return self_check ? (memcpy(d, h, n), 0) : cuda_rt_to_device(d, h, n);
}
static int to_host(void *h, const void *d, size_t n) {
    return self_check ? (memcpy(h, d, n), 0) : cuda_rt_to_host(h, d, n);
}
static int sync_dev(void) { return self_check ? 0 : cuda_rt_synchronize(); }
enum { X, W, B, Z, Y, DY, DX, DW, DB, DZ };
static const char *const op_names[OPS] = {"x", "w", "bias", "z", "y", "dy", "dx", "dw", "db", "dz"};

typedef struct operand {
    int rank;
    int64_t shape[NCONV_MAX_DIMS];
    nconv_tensor host, dev;
    size_t bytes;
} operand;

static double tolerance(nconv_dtype dt) {
    return dt == NCONV_F64 ? 1e-10 : dt == NCONV_F32 ? 1e-4 : dt == NCONV_F16 ? 1e-2 : 4e-2;
}

static int64_t offset_of(const operand *o, int64_t i) {
    int64_t off = 0;
    for (int k = o->rank - 1; k >= 0; k--) off += (i % o->shape[k]) * o->host.stride[k], i /= o->shape[k];
    return off;
}

static int64_t numel(const operand *o) {
    int64_t n = 1;
    for (int k = 0; k < o->rank; k++) n *= o->shape[k];
    return n;
}

/* Host and device memory for an operand in `layout` (2: NCHW with a gap after each image). */
static int make(operand *o, int rank, const int64_t *shape, int layout, nconv_dtype dt, uint64_t *rng) {
    o->rank = rank;
    memcpy(o->shape, shape, sizeof(int64_t) * (size_t)rank);
    nconv_tensor_init(&o->host, NULL, rank, shape, layout == 1 ? NCONV_LAYOUT_NXC : NCONV_LAYOUT_NCX);
    if (layout == 2 && rank > 2) o->host.stride[0] += 7;
    int64_t span = 1;
    for (int k = 0; k < rank; k++) span += (shape[k] - 1) * o->host.stride[k];
    o->bytes = (size_t)span * nconv_dtype_size(dt);
    o->host.data = calloc(1, o->bytes);
    for (int64_t i = 0; i < span; i++) nconv__store1(o->host.data, dt, i, rng ? test_uniform(rng) : 0.0);
    o->dev = o->host;
    o->dev.data = dev_malloc(o->bytes);
    return !o->host.data || !o->dev.data || to_dev(o->dev.data, o->host.data, o->bytes);
}

static void release(operand *o) {
    free(o->host.data);
    dev_free(o->dev.data);
    memset(o, 0, sizeof *o);
}

/* max |gpu - cpu| / max(1, max |cpu|) over the operand's elements. */
static double compare(const operand *o, nconv_dtype dt) {
    void *back = malloc(o->bytes);
    double err = INFINITY, most = 1, diff = 0;
    if (back && !to_host(back, o->dev.data, o->bytes)) {
        for (int64_t i = 0; i < numel(o); i++) {
            const int64_t off = offset_of(o, i);
            const double ref = nconv__load(o->host.data, dt, off), got = nconv__load(back, dt, off);
            if (fabs(ref) > most) most = fabs(ref);
            const double d = isnan(ref) && isnan(got) ? 0 : fabs(got - ref);
            if (!(d <= diff)) diff = d;
        }
        err = diff / most;
    }
    free(back);
    return err;
}

static double worst[4];

static void check_problem(nconv_context *gpu, nconv_context *cpu, uint64_t *rng, int index) {
    static const nconv_dtype dtypes[] = {NCONV_F32, NCONV_F16, NCONV_BF16, NCONV_F64};
    nconv_problem p;
    const int nd = (int)test_int(rng, 1, 3);
    nconv_problem_init(&p, nd);
    p.batch = test_int(rng, 1, 3);
    p.groups = test_int(rng, 0, 2) == 0 ? test_int(rng, 2, 4) : 1;
    p.in_channels = test_int(rng, 0, 3) == 0 ? p.groups : p.groups * test_int(rng, 1, 6);
    p.out_channels = p.groups * test_int(rng, 1, 6);
    p.transposed = test_int(rng, 0, 3) == 0;
    p.dtype = dtypes[test_int(rng, 0, 3)];
    for (int i = 0; i < nd; i++) {
        p.in_size[i] = test_int(rng, 3, nd == 3 ? 7 : 12);
        p.kernel[i] = test_int(rng, 1, 4);
        p.stride[i] = test_int(rng, 1, 3);
        p.dilation[i] = test_int(rng, 1, 2);
        p.pad_begin[i] = test_int(rng, 0, 2);
        p.pad_end[i] = test_int(rng, -1, 2);
        if (p.transposed) p.output_padding[i] = test_int(rng, 0, 1);
    }
    if (!p.transposed && test_int(rng, 0, 3) == 0) p.padding_mode = (nconv_padding_mode)test_int(rng, 1, 3);
    if (nconv_problem_validate(&p)) return;
    const int layout = (int)test_int(rng, 0, 2), relu = (int)test_int(rng, 0, 1);
    const int with_bias = (int)test_int(rng, 0, 1), with_z = (int)test_int(rng, 0, 1);
    const unsigned outputs = (unsigned)test_int(rng, 1, 15);
    const nconv_epilogue epi = {relu ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY, with_z ? test_uniform(rng) : 1.0};
    int64_t xs[5], ws[5], ys[5];
    nconv_problem_shapes(&p, xs, ws, ys);
    const int r = nd + 2;
    const int64_t *shapes[OPS] = {xs, ws, &p.out_channels, ys, ys, ys, xs, ws, &p.out_channels, ys};
    operand o[OPS];
    memset(o, 0, sizeof o);
    int bad = 0;
    for (int i = 0; i < OPS; i++)
        bad |= make(&o[i], i == B || i == DB ? 1 : r, shapes[i], i == W || i == DW ? 0 : layout, p.dtype,
                    i < Y || i == DY ? rng : NULL);
    char desc[256];
    nconv_problem_to_desc(&p, desc, sizeof desc);
    CHECK(!bad, "%s: device memory (%s)", desc, cuda_rt_error());
    if (bad) goto out;
#define T(i, side) (&o[i].side)
#define FORWARD(side, ctx)                                                                                         \
    nconv_forward(ctx, &p, &epi, T(X, side), T(W, side), with_bias ? T(B, side) : NULL, with_z ? T(Z, side) : NULL, \
                  T(Y, side), NULL, 0)
#define BACKWARD(side, ctx)                                                                                        \
    nconv_backward(ctx, &p, &epi, T(X, side), T(W, side), T(Y, side), T(DY, side),                                 \
                   outputs & NCONV_OUT_DX ? T(DX, side) : NULL, outputs & NCONV_OUT_DW ? T(DW, side) : NULL,        \
                   outputs & NCONV_OUT_DB ? T(DB, side) : NULL, outputs & NCONV_OUT_DZ && with_z ? T(DZ, side) : NULL, \
                   NULL, 0)
    nconv_status st = FORWARD(host, cpu);
    CHECK(!st, "%s: CPU forward: %s", desc, nconv_last_error());
    if (st) goto out;
    st = FORWARD(dev, gpu);
    CHECK(!st, "%s (#%d, layout %d, relu %d, bias %d, z %d): forward: %s", desc, index, layout, relu, with_bias,
          with_z, nconv_last_error());
    if (st) goto out;
    /* Backward reads y for relu's mask: both sides get the CPU's y, so that a value near
     * zero rounded differently does not flip the mask. */
    const int d = p.dtype == NCONV_F32 ? 0 : p.dtype == NCONV_F16 ? 1 : p.dtype == NCONV_BF16 ? 2 : 3;
    double err = compare(&o[Y], p.dtype);
    if (err > worst[d]) worst[d] = err;
    CHECK(err <= tolerance(p.dtype), "%s (#%d, layout %d, relu %d, bias %d, z %d alpha %g): y error %.3g", desc,
          index, layout, relu, with_bias, with_z, epi.alpha, err);
    CHECK(!to_dev(o[Y].dev.data, o[Y].host.data, o[Y].bytes), "%s", cuda_rt_error());
    st = BACKWARD(host, cpu);
    CHECK(!st, "%s: CPU backward: %s", desc, nconv_last_error());
    if (st) goto out;
    st = BACKWARD(dev, gpu);
    CHECK(!st, "%s (#%d, layout %d, relu %d, outputs %u): backward: %s", desc, index, layout, relu, outputs,
          nconv_last_error());
    if (st) goto out;
    for (int i = DX; i < OPS; i++) {
        if ((i == DX && !(outputs & NCONV_OUT_DX)) || (i == DW && !(outputs & NCONV_OUT_DW)) ||
            (i == DB && !(outputs & NCONV_OUT_DB)) || (i == DZ && !(outputs & NCONV_OUT_DZ && with_z)))
            continue;
        err = compare(&o[i], p.dtype);
        if (err > worst[d]) worst[d] = err;
        CHECK(err <= tolerance(p.dtype), "%s (#%d, layout %d, relu %d, outputs %u): %s error %.3g", desc, index,
              layout, relu, outputs, op_names[i], err);
    }
out:
    for (int i = 0; i < OPS; i++) release(&o[i]);
}

/* Per-sample gradients (batched x and dy, shared w), double backward and jvp on the device
 * against the CPU, on one problem per dtype. */
static void check_compositions(nconv_context *gpu, nconv_context *cpu) {
    static const nconv_dtype dtypes[] = {NCONV_F32, NCONV_F64, NCONV_F16, NCONV_BF16};
    for (int di = 0; di < 4; di++) {
        nconv_problem p;
        nconv_problem_init(&p, 2);
        p.batch = 2, p.in_channels = 6, p.out_channels = 4, p.groups = 2, p.dtype = dtypes[di];
        p.in_size[0] = 7, p.in_size[1] = 9, p.kernel[0] = p.kernel[1] = 3, p.stride[1] = 2;
        p.pad_begin[0] = p.pad_end[0] = 1;
        int64_t xs[5], ws[5], ys[5], bx[5], bw[5], by[5], bb = 2 * p.out_channels;
        nconv_problem_shapes(&p, xs, ws, ys);
        const int64_t B = 2;
        memcpy(bx, xs, sizeof bx), memcpy(bw, ws, sizeof bw), memcpy(by, ys, sizeof by);
        bx[0] *= B, bw[0] *= B, by[0] *= B;
        uint64_t rng = 17 + (uint64_t)di;
        enum { BX, W_, BDY, BY, BDW, BDB, X_, DY_, GGX, GGW, GGB, GGY, GX, GW, BIAS, TX, TW, TB, Y_, TY, N };
        operand o[N];
        const int64_t *sh[N] = {bx, ws, by, by, bw, &bb, xs, ys, xs, ws, &p.out_channels, ys, xs, ws,
                                &p.out_channels, xs, ws, &p.out_channels, ys, ys};
        const int input[N] = {1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0};
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad |= make(&o[i], sh[i] == &bb || sh[i] == &p.out_channels ? 1 : 4, sh[i], 0, p.dtype,
                        input[i] ? &rng : NULL);
        CHECK(!bad, "device memory");
        const int64_t nx = xs[0] * xs[1] * xs[2] * xs[3], ny = ys[0] * ys[1] * ys[2] * ys[3];
        const int64_t nw = ws[0] * ws[1] * ws[2] * ws[3];
        const nconv_batch bt = {.size = B, .x = nx, .dy = ny, .y = ny, .dw = nw, .db = p.out_channels};
        const nconv_epilogue relu = {NCONV_ACT_RELU, 0.5};
        for (int side = 0; !bad && side < 2; side++) {
            nconv_context *ctx = side ? gpu : cpu;
#define S(i) (side ? &o[i].dev : &o[i].host)
            nconv_status st = nconv_backward_batched(ctx, &p, NULL, &bt, S(BX), S(W_), NULL, S(BDY), NULL, S(BDW),
                                                     S(BDB), NULL);
            CHECK(!st, "%s per-sample backward: %s", side ? "GPU" : "CPU", nconv_last_error());
            st = nconv_double_backward(ctx, &p, S(X_), S(W_), S(DY_), S(GGX), S(GGW), S(GGB), S(GGY), S(GX), S(GW));
            CHECK(!st, "%s double backward: %s", side ? "GPU" : "CPU", nconv_last_error());
            st = nconv_forward_jvp(ctx, &p, &relu, S(X_), S(W_), S(BIAS), NULL, S(TX), S(TW), S(TB), NULL, S(Y_),
                                   S(TY));
            CHECK(!st, "%s jvp: %s", side ? "GPU" : "CPU", nconv_last_error());
#undef S
        }
        CHECK(!sync_dev(), "%s", cuda_rt_error());
        static const char *const names[N] = {"", "", "", "", "per-sample dw", "per-sample db", "", "", "", "", "",
                                             "ggy", "gx", "gw", "", "", "", "", "y", "ty"};
        for (int i = 0; i < N && !bad; i++) {
            if (input[i] || i == BY) continue;
            const double err = compare(&o[i], p.dtype);
            CHECK(err <= tolerance(p.dtype), "dtype %d: %s error %.3g", (int)p.dtype, names[i], err);
        }
        for (int i = 0; i < N; i++) release(&o[i]);
    }
}

/* Plans on the device: weights given once (a device copy), executed, reshaped; backward
 * and double backward plans; each against the CPU's one-shot calls. */
static void check_plans(nconv_context *gpu, nconv_context *cpu) {
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = 3, p.in_channels = 8, p.out_channels = 16, p.in_size[0] = 12, p.in_size[1] = 10;
    p.kernel[0] = p.kernel[1] = 3, p.pad_begin[0] = p.pad_end[0] = p.pad_begin[1] = p.pad_end[1] = 1;
    int64_t xs[5], ws[5], ys[5];
    nconv_problem_shapes(&p, xs, ws, ys);
    uint64_t rng = 5;
    operand x, w, b, y, dy, dx, dw, ggx, ggw, ggy, gx, gw;
    make(&x, 4, xs, 1, NCONV_F32, &rng), make(&w, 4, ws, 0, NCONV_F32, &rng);
    make(&b, 1, &p.out_channels, 0, NCONV_F32, &rng), make(&y, 4, ys, 1, NCONV_F32, NULL);
    make(&dy, 4, ys, 1, NCONV_F32, &rng), make(&dx, 4, xs, 1, NCONV_F32, NULL), make(&dw, 4, ws, 0, NCONV_F32, NULL);
    make(&ggx, 4, xs, 1, NCONV_F32, &rng), make(&ggw, 4, ws, 0, NCONV_F32, &rng), make(&ggy, 4, ys, 1, NCONV_F32, NULL);
    make(&gx, 4, xs, 1, NCONV_F32, NULL), make(&gw, 4, ws, 0, NCONV_F32, NULL);
    const nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};
    nconv_plan_desc d;
    nconv_plan *fp = NULL, *bp = NULL, *dp = NULL;
    nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
    d.epi = relu;
    CHECK(!nconv_plan_create(gpu, &p, &d, &fp) && !nconv_plan_set_weights(fp, &w.dev, &b.dev), "%s",
          nconv_last_error());
    const char *algo = NULL;
    CHECK(!nconv_plan_algorithm(fp, NCONV_DIR_FWD, &algo) && algo && !strcmp(algo, "cudnn"), "algorithm %s",
          algo ? algo : "(none)");
    nconv_variant_pack v = {.x = &x.dev, .y = &y.dev};
    CHECK(!nconv_plan_execute(fp, &v), "forward plan: %s", nconv_last_error());
    CHECK(!nconv_forward(cpu, &p, &relu, &x.host, &w.host, &b.host, NULL, &y.host, NULL, 0), "%s", nconv_last_error());
    CHECK(compare(&y, NCONV_F32) <= 1e-4, "forward plan: error %g", compare(&y, NCONV_F32));
    /* Reshaped to one image: the first image of x gives the first of y. */
    CHECK(!nconv_plan_reshape(fp, 1), "%s", nconv_last_error());
    CHECK(!cuda_rt_memset(y.dev.data, 0, y.bytes) && !nconv_plan_execute(fp, &v), "reshaped: %s", nconv_last_error());
    float first[4];
    CHECK(!cuda_rt_to_host(first, y.dev.data, sizeof first) && first[0] == ((float *)y.host.data)[0], "reshaped");
    nconv_plan_desc_init(&d, NCONV_OP_BACKWARD);
    d.outputs = NCONV_OUT_DX | NCONV_OUT_DW;
    CHECK(!nconv_plan_create(gpu, &p, &d, &bp) && !nconv_plan_set_weights(bp, &w.dev, NULL), "%s", nconv_last_error());
    nconv_variant_pack vb = {.x = &x.dev, .dy = &dy.dev, .dx = &dx.dev, .dw = &dw.dev};
    CHECK(!nconv_plan_execute(bp, &vb), "backward plan: %s", nconv_last_error());
    CHECK(!nconv_backward(cpu, &p, NULL, &x.host, &w.host, NULL, &dy.host, &dx.host, &dw.host, NULL, NULL, NULL, 0),
          "%s", nconv_last_error());
    CHECK(compare(&dx, NCONV_F32) <= 1e-4 && compare(&dw, NCONV_F32) <= 1e-4, "backward plan: errors %g %g",
          compare(&dx, NCONV_F32), compare(&dw, NCONV_F32));
    nconv_plan_desc_init(&d, NCONV_OP_DOUBLE_BACKWARD);
    CHECK(!nconv_plan_create(gpu, &p, &d, &dp), "%s", nconv_last_error());
    nconv_variant_pack vd = {.x = &x.dev, .w = &w.dev, .dy = &dy.dev, .ggx = &ggx.dev, .ggw = &ggw.dev,
                             .ggy = &ggy.dev, .gx = &gx.dev, .gw = &gw.dev};
    CHECK(!nconv_plan_execute(dp, &vd), "double backward plan: %s", nconv_last_error());
    CHECK(!nconv_double_backward(cpu, &p, &x.host, &w.host, &dy.host, &ggx.host, &ggw.host, NULL, &ggy.host, &gx.host,
                                 &gw.host),
          "%s", nconv_last_error());
    CHECK(compare(&ggy, NCONV_F32) <= 1e-4 && compare(&gx, NCONV_F32) <= 1e-4 && compare(&gw, NCONV_F32) <= 1e-4,
          "double backward plan: errors %g %g %g", compare(&ggy, NCONV_F32), compare(&gx, NCONV_F32),
          compare(&gw, NCONV_F32));
    nconv_plan_destroy(fp), nconv_plan_destroy(bp), nconv_plan_destroy(dp);
    operand *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &ggx, &ggw, &ggy, &gx, &gw};
    for (int i = 0; i < 12; i++) release(all[i]);
}

/* What a CUDA context refuses, and its settings. */
static void check_context(nconv_context *gpu, nconv_context *cpu) {
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.in_channels = 4, p.out_channels = 8, p.in_size[0] = p.in_size[1] = 9, p.kernel[0] = p.kernel[1] = 3;
    int64_t xs[5], ws[5], ys[5];
    nconv_problem_shapes(&p, xs, ws, ys);
    uint64_t rng = 3;
    operand x, w, y;
    make(&x, 4, xs, 0, NCONV_F32, &rng), make(&w, 4, ws, 0, NCONV_F32, &rng), make(&y, 4, ys, 0, NCONV_F32, NULL);
    CHECK_ERROR(nconv_forward(gpu, &p, NULL, &x.host, &w.dev, NULL, NULL, &y.dev, NULL, 0), NCONV_INVALID_ARGUMENT,
                "x.data");
    p.dtype = NCONV_C64;
    CHECK_ERROR(nconv_forward(gpu, &p, NULL, &x.dev, &w.dev, NULL, NULL, &y.dev, NULL, 0), NCONV_UNSUPPORTED,
                "a complex nconv_forward on a CUDA context");
    p.dtype = NCONV_F32;
    size_t bytes = 0;
    CHECK_ERROR(nconv_workspace_size(gpu, &p, NCONV_OP_FORWARD, NULL, &bytes), NCONV_UNSUPPORTED, "CUDA context");
    /* Deterministic (the default): two runs give the same bits; the benchmark policy and a
     * caller's workspace give the CPU's values. */
    operand y2;
    make(&y2, 4, ys, 0, NCONV_F32, NULL);
    CHECK(!nconv_forward(gpu, &p, NULL, &x.dev, &w.dev, NULL, NULL, &y.dev, NULL, 0) &&
              !nconv_forward(gpu, &p, NULL, &x.dev, &w.dev, NULL, NULL, &y2.dev, NULL, 0),
          "%s", nconv_last_error());
    void *a = malloc(y.bytes), *b = malloc(y.bytes);
    CHECK(!cuda_rt_to_host(a, y.dev.data, y.bytes) && !cuda_rt_to_host(b, y2.dev.data, y.bytes) &&
              !memcmp(a, b, y.bytes),
          "two deterministic runs differ");
    free(a), free(b);
    CHECK(!nconv_context_set_policy(gpu, NCONV_POLICY_BENCHMARK), "%s", nconv_last_error());
    void *ws_mem = cuda_rt_malloc(64 << 20);
    CHECK(!nconv_forward(gpu, &p, NULL, &x.dev, &w.dev, NULL, NULL, &y.dev, ws_mem, 64 << 20), "%s",
          nconv_last_error());
    CHECK(!nconv_forward(cpu, &p, NULL, &x.host, &w.host, NULL, NULL, &y.host, NULL, 0), "%s", nconv_last_error());
    CHECK(compare(&y, NCONV_F32) <= 1e-4, "benchmark policy: error %g", compare(&y, NCONV_F32));
    CHECK_ERROR(nconv_forward(gpu, &p, NULL, &x.dev, &w.dev, NULL, NULL, &y.dev, ws_mem, 0), NCONV_OUT_OF_MEMORY,
                "workspace_size = 0");
    cuda_rt_free(ws_mem);
    nconv_context_set_policy(gpu, NCONV_POLICY_HEURISTIC);
    CHECK(!nconv_context_set_allow_tf32(gpu, 1) &&
              !nconv_forward(gpu, &p, NULL, &x.dev, &w.dev, NULL, NULL, &y.dev, NULL, 0),
          "tf32: %s", nconv_last_error());
    CHECK(compare(&y, NCONV_F32) <= 1e-2, "tf32: error %g", compare(&y, NCONV_F32));
    nconv_context_set_allow_tf32(gpu, 0);
    release(&x), release(&w), release(&y), release(&y2);
}

int main(int argc, char **argv) {
    self_check = argc > 1 && !strcmp(argv[argc - 1], "--cpu");
    if (self_check) argc--;
    const int problems = argc > 1 ? atoi(argv[1]) : 300;
    uint64_t rng = argc > 2 ? strtoull(argv[2], NULL, 10) : 11;
    char why[256];
    nconv_context *gpu = NULL, *cpu = NULL;
    if (self_check) {
        nconv_context_create(&gpu);
        nconv_context_create(&cpu);
        for (int i = 0; i < problems; i++) check_problem(gpu, cpu, &rng, i);
        check_compositions(gpu, cpu);
        printf("largest errors: f32 %.3g, f16 %.3g, bf16 %.3g, f64 %.3g\n", worst[0], worst[1], worst[2], worst[3]);
        nconv_context_destroy(gpu);
        nconv_context_destroy(cpu);
        return test_summary();
    }
    if (cuda_rt_load(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return SKIP;
    }
    if (nconv_context_create_cuda(&gpu, 0)) {
        printf("SKIP: no CUDA context: %s\n", nconv_last_error());
        return SKIP;
    }
    nconv_context_create(&cpu);
    check_context(gpu, cpu);
    check_compositions(gpu, cpu);
    check_plans(gpu, cpu);
    for (int i = 0; i < problems; i++) check_problem(gpu, cpu, &rng, i);
    printf("largest errors: f32 %.3g, f16 %.3g, bf16 %.3g, f64 %.3g\n", worst[0], worst[1], worst[2], worst[3]);
    nconv_context_destroy(gpu);
    nconv_context_destroy(cpu);
    return test_summary();
}
