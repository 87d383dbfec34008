/* Geometry, validation messages, descriptors, repro lines and API misuse. */
#include "test_util.h"

static nconv_problem conv2d(int64_t n, int64_t c, int64_t o, int64_t h, int64_t w, int64_t k) {
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = n, p.in_channels = c, p.out_channels = o;
    p.in_size[0] = h, p.in_size[1] = w;
    p.kernel[0] = p.kernel[1] = k;
    return p;
}

static void test_geometry(void) {
    int64_t out[3];
    nconv_problem p = conv2d(2, 3, 4, 10, 11, 3);
    CHECK(nconv_problem_output_size(&p, out) == NCONV_OK && out[0] == 8 && out[1] == 9, "%lld %lld",
          (long long)out[0], (long long)out[1]);
    p.stride[0] = 2, p.stride[1] = 3, p.pad_begin[0] = 1, p.pad_end[0] = 1, p.dilation[1] = 2;
    /* h: floor((10 + 2 - 2 - 1) / 2) + 1 = 5; w: floor((11 - 4 - 1) / 3) + 1 = 3 */
    CHECK(nconv_problem_output_size(&p, out) == NCONV_OK && out[0] == 5 && out[1] == 3, "%lld %lld",
          (long long)out[0], (long long)out[1]);
    /* Negative end padding drops trailing input. */
    p = conv2d(1, 1, 1, 10, 10, 3);
    p.pad_end[0] = -2;
    CHECK(nconv_problem_output_size(&p, out) == NCONV_OK && out[0] == 6 && out[1] == 8, "%lld", (long long)out[0]);
    /* Transposed: (in - 1) * s - pb - pe + d * (k - 1) + op + 1 */
    p = conv2d(1, 4, 6, 5, 5, 4);
    p.transposed = 1;
    p.stride[0] = p.stride[1] = 2;
    p.pad_begin[0] = p.pad_end[0] = 1;
    p.output_padding[0] = 1;
    CHECK(nconv_problem_output_size(&p, out) == NCONV_OK && out[0] == 11 && out[1] == 12, "%lld %lld",
          (long long)out[0], (long long)out[1]);
    int64_t xs[5], ws[5], ys[5];
    CHECK(nconv_problem_shapes(&p, xs, ws, ys) == NCONV_OK && ws[0] == 4 && ws[1] == 6 && ys[1] == 6 && ys[2] == 11,
          "transposed weight shape %lld %lld", (long long)ws[0], (long long)ws[1]);
    double f;
    /* Transposed FLOPs count the direct convolution: 2 * N * 4 * 6 * 16 * 25. */
    CHECK(nconv_problem_flops(&p, &f) == NCONV_OK && f == 2.0 * 4 * 6 * 16 * 25, "%g", f);
    p = conv2d(2, 4, 8, 6, 6, 3);
    p.groups = 2;
    CHECK(nconv_problem_flops(&p, &f) == NCONV_OK && f == 2.0 * 2 * 8 * 2 * 9 * 16, "%g", f);

    /* same: extra padding of even kernels at the end. */
    p = conv2d(1, 1, 1, 9, 9, 4);
    p.dilation[1] = 3;
    CHECK(nconv_problem_set_padding_same(&p) == NCONV_OK && p.pad_begin[0] == 1 && p.pad_end[0] == 2 &&
              p.pad_begin[1] == 4 && p.pad_end[1] == 5,
          "%lld %lld %lld %lld", (long long)p.pad_begin[0], (long long)p.pad_end[0], (long long)p.pad_begin[1],
          (long long)p.pad_end[1]);
    CHECK(nconv_problem_output_size(&p, out) == NCONV_OK && out[0] == 9 && out[1] == 9, "same keeps the size");
    p.stride[1] = 2;
    CHECK_ERROR(nconv_problem_set_padding_same(&p), NCONV_INVALID_ARGUMENT, "stride[1] = 2");
}

static void test_validation(void) {
    nconv_problem p;
#define BAD(mutate, needle)                                                 \
    do {                                                                    \
        p = conv2d(2, 4, 6, 8, 8, 3);                                       \
        mutate;                                                             \
        CHECK_ERROR(nconv_problem_validate(&p), NCONV_INVALID_ARGUMENT, needle); \
    } while (0)
    BAD(p.ndims = 4, "ndims = 4");
    BAD(p.ndims = 0, "ndims = 0");
    BAD(p.batch = -1, "batch = -1");
    BAD(p.in_channels = 0, "in_channels = 0");
    BAD(p.out_channels = -3, "out_channels = -3");
    BAD(p.groups = 0, "groups = 0");
    BAD(p.groups = 3, "in_channels = 4 is not divisible by groups = 3");
    BAD((p.groups = 2, p.out_channels = 5), "out_channels = 5 is not divisible by groups = 2");
    BAD(p.transposed = 2, "transposed = 2");
    BAD(p.padding_mode = (nconv_padding_mode)7, "padding_mode = 7");
    BAD(p.dtype = (nconv_dtype)9, "dtype = 9");
    BAD((p.transposed = 1, p.padding_mode = NCONV_PAD_REFLECT), "only zeros padding");
    BAD(p.in_size[1] = 0, "in_size[1] = 0");
    BAD(p.kernel[0] = 0, "kernel[0] = 0");
    BAD(p.stride[1] = 0, "stride[1] = 0");
    BAD(p.dilation[0] = 0, "dilation[0] = 0");
    BAD(p.pad_begin[1] = -1, "pad_begin[1] = -1");
    BAD(p.output_padding[0] = 1, "output_padding[0] = 1: only a transposed");
    BAD((p.transposed = 1, p.stride[0] = 2, p.output_padding[0] = 2), "output_padding[0] = 2");
    BAD((p.padding_mode = NCONV_PAD_REFLECT, p.pad_begin[0] = 8), "reflect padding must be smaller than");
    BAD((p.padding_mode = NCONV_PAD_CIRCULAR, p.pad_end[1] = 9), "circular padding must be at most");
    BAD(p.kernel[1] = 9, "output size < 1 along dim 1");
    BAD((p.transposed = 1, p.pad_begin[0] = 20), "output size < 1 along dim 0");
    BAD((p.dilation[0] = INT64_MAX / 2, p.kernel[0] = 4), "overflows");
    BAD((p.batch = INT64_MAX / 4, p.in_channels = 1024), "more than NCONV_MAX_ELEMENTS");
    BAD((p.batch = (int64_t)1 << 40, p.in_channels = 1 << 9), "input tensor [1099511627776, 512, ");
    BAD((p.pad_begin[0] = (int64_t)1 << 47, p.pad_end[0] = (int64_t)1 << 47), "NCONV_MAX_ELEMENTS");
#undef BAD
    /* The output padding rule takes the larger of stride and dilation. */
    p = conv2d(1, 1, 1, 4, 4, 3);
    p.transposed = 1, p.dilation[0] = 3, p.output_padding[0] = 2;
    CHECK(nconv_problem_validate(&p) == NCONV_OK, "%s", nconv_last_error());
    CHECK_ERROR(nconv_problem_init(NULL, 2), NCONV_INVALID_ARGUMENT, "problem is NULL");
    CHECK_ERROR(nconv_problem_init(&p, 5), NCONV_INVALID_ARGUMENT, "ndims = 5");
}

static void test_text(void) {
    nconv_problem p = conv2d(8, 64, 128, 56, 56, 3);
    p.stride[0] = p.stride[1] = 2, p.pad_begin[0] = p.pad_begin[1] = 1, p.pad_end[0] = p.pad_end[1] = 1;
    char buf[1024];
    CHECK(nconv_problem_to_desc(&p, buf, sizeof buf) == NCONV_OK &&
              !strcmp(buf, "g1mb8_ic64ih56iw56_oc128oh28ow28_kh3kw3_sh2sw2_ph1pw1_dh0dw0"),
          "%s", buf);
    CHECK_ERROR(nconv_problem_to_desc(&p, buf, 10), NCONV_INVALID_ARGUMENT, "too small");
    CHECK(nconv_problem_repro(&p, NCONV_REPRO_CLI, buf, sizeof buf) == NCONV_OK &&
              !strcmp(buf, "nconv check --dtype f32 g1mb8_ic64ih56iw56_oc128oh28ow28_kh3kw3_sh2sw2_ph1pw1_dh0dw0"),
          "%s", buf);
    CHECK(nconv_problem_repro(&p, NCONV_REPRO_PYTORCH, buf, sizeof buf) == NCONV_OK &&
              strstr(buf, "F.conv2d(x, w, stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=1)"),
          "%s", buf);
    p.padding_mode = NCONV_PAD_REFLECT;
    p.pad_end[1] = 0;
    CHECK(nconv_problem_repro(&p, NCONV_REPRO_PYTORCH, buf, sizeof buf) == NCONV_OK &&
              strstr(buf, "F.pad(x, (1, 0, 1, 1), mode='reflect')"),
          "%s", buf);
    p.transposed = 1;
    p.padding_mode = NCONV_PAD_ZEROS;
    CHECK(nconv_problem_repro(&p, NCONV_REPRO_PYTORCH, buf, sizeof buf) == NCONV_OK &&
              strstr(buf, "F.conv_transpose2d(") && strstr(buf, "y = F.pad(y, (-1, 0, -1, -1))"),
          "%s", buf);
    /* A rejected problem still gets a line saying why. */
    p.kernel[0] = 0;
    CHECK(nconv_problem_repro(&p, NCONV_REPRO_CLI, buf, sizeof buf) == NCONV_OK && strstr(buf, "kernel[0] = 0"),
          "%s", buf);
}

static void test_api_misuse(void) {
    nconv_problem p = conv2d(1, 2, 3, 5, 5, 3);
    float x[50], w[54], y[27], b[3];
    int64_t xs[4] = {1, 2, 5, 5}, wsh[4] = {3, 2, 3, 3}, ys[4] = {1, 3, 3, 3}, bs[1] = {3};
    nconv_tensor tx, tw, ty, tb;
    for (int i = 0; i < 50; i++) x[i] = (float)i / 50;
    for (int i = 0; i < 54; i++) w[i] = (float)i / 54;
    nconv_tensor_init(&tx, x, 4, xs, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tw, w, 4, wsh, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&ty, y, 4, ys, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tb, b, 1, bs, NCONV_LAYOUT_NCX);
    for (int i = 0; i < 27; i++) y[i] = -7.0f;
    CHECK_ERROR(nconv_forward(NULL, &p, NULL, NULL, &tw, NULL, NULL, &ty, NULL, 0), NCONV_INVALID_ARGUMENT,
                "x is NULL");
    nconv_tensor nodata = tx;
    nodata.data = NULL;
    CHECK_ERROR(nconv_forward(NULL, &p, NULL, &nodata, &tw, NULL, NULL, &ty, NULL, 0), NCONV_INVALID_ARGUMENT,
                "x->data is NULL");
    nconv_epilogue bad_act = {(nconv_activation)5, 1.0}, bad_alpha = {NCONV_ACT_RELU, NAN};
    CHECK_ERROR(nconv_forward(NULL, &p, &bad_act, &tx, &tw, NULL, NULL, &ty, NULL, 0), NCONV_INVALID_ARGUMENT,
                "activation = 5");
    CHECK_ERROR(nconv_forward(NULL, &p, &bad_alpha, &tx, &tw, NULL, NULL, &ty, NULL, 0), NCONV_INVALID_ARGUMENT,
                "alpha = nan");
    CHECK_ERROR(nconv_forward(NULL, &p, NULL, &tx, &tw, NULL, &ty, &ty, NULL, 0), NCONV_INVALID_ARGUMENT,
                "y overlaps z");
    char small[16];
    CHECK_ERROR(nconv_forward(NULL, &p, NULL, &tx, &tw, &tb, NULL, &ty, small, sizeof small), NCONV_OUT_OF_MEMORY,
                "workspace_size = 16");
    nconv_problem q = p;
    q.stride[0] = 0;
    CHECK_ERROR(nconv_forward(NULL, &q, NULL, &tx, &tw, NULL, NULL, &ty, NULL, 0), NCONV_INVALID_ARGUMENT,
                "stride[0] = 0");
    int untouched = 1;
    for (int i = 0; i < 27; i++) untouched &= y[i] == -7.0f;
    CHECK(untouched, "a rejected call wrote its output");

    /* Caller workspace of exactly the queried size works. */
    size_t need = 0;
    CHECK(nconv_workspace_size(NULL, &p, NCONV_OP_FORWARD, NULL, &need) == NCONV_OK && need > 0, "%zu", need);
    void *ws = malloc(need);
    for (int i = 0; i < 3; i++) b[i] = 0.5f;
    CHECK(nconv_forward(NULL, &p, NULL, &tx, &tw, &tb, NULL, &ty, ws, need) == NCONV_OK, "%s", nconv_last_error());
    CHECK(nconv_workspace_size(NULL, &p, NCONV_OP_BACKWARD, NULL, &need) == NCONV_OK, "backward query");
    ws = realloc(ws, need);
    float dy[27], dx[50], dw[54], db[3];
    nconv_tensor tdy, tdx, tdw, tdb;
    for (int i = 0; i < 27; i++) dy[i] = 1.0f;
    nconv_tensor_init(&tdy, dy, 4, ys, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdx, dx, 4, xs, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdw, dw, 4, wsh, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdb, db, 1, bs, NCONV_LAYOUT_NCX);
    CHECK(nconv_backward(NULL, &p, NULL, &tx, &tw, &ty, &tdy, &tdx, &tdw, &tdb, NULL, ws, need) == NCONV_OK, "%s",
          nconv_last_error());
    CHECK(db[0] == 9.0f && db[2] == 9.0f, "db = %g", db[0]);
    /* relu's backward needs dy masked by y's sign (27 floats): the query with relu says so, the
     * call gets its workspace, and without that room it fails before writing. */
    nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};
    size_t need_relu = 0;
    CHECK(nconv_workspace_size(NULL, &p, NCONV_OP_BACKWARD, &relu, &need_relu) == NCONV_OK &&
              need_relu >= need + 27 * sizeof(float),
          "backward query with relu: %zu, without: %zu", need_relu, need);
    for (int i = 0; i < 3; i++) db[i] = -7.0f;
    if (need_relu > need)
        CHECK_ERROR(nconv_backward(NULL, &p, &relu, &tx, &tw, &ty, &tdy, &tdx, &tdw, &tdb, NULL, ws, need),
                    NCONV_OUT_OF_MEMORY, "this call needs");
    CHECK(db[0] == -7.0f, "a call short of workspace wrote db");
    ws = realloc(ws, need_relu);
    CHECK(nconv_backward(NULL, &p, &relu, &tx, &tw, &ty, &tdy, &tdx, &tdw, &tdb, NULL, ws, need_relu) == NCONV_OK,
          "%s", nconv_last_error());
    free(ws);
    /* The query is for the algorithm the call will run: the heuristic's choice or a forced one;
     * under the benchmark policy the winner of the trials, which take what fits the heuristic's. */
    nconv_context *qctx;
    nconv_context_create(&qctx);
    const char *chosen = "";
    size_t heur = 0, forced = 0, most = 0, bench = 0;
    nconv_algorithm_chosen(qctx, &p, NCONV_DIR_FWD, &chosen);
    nconv_workspace_size(qctx, &p, NCONV_OP_FORWARD, NULL, &heur);
    for (int k = 0; k < nconv_algorithm_count(); k++) {
        int applies = 0;
        size_t s = 0;
        nconv_algorithm_applies(nconv_algorithm_name(k), &p, NCONV_DIR_FWD, &applies, NULL);
        if (!applies) continue;
        nconv_context_set_algorithm(qctx, nconv_algorithm_name(k));
        nconv_workspace_size(qctx, &p, NCONV_OP_FORWARD, NULL, &s);
        if (!strcmp(nconv_algorithm_name(k), chosen)) forced = s;
        if (s > most) most = s;
    }
    nconv_context_set_algorithm(qctx, "auto");
    nconv_context_set_policy(qctx, NCONV_POLICY_BENCHMARK);
    nconv_workspace_size(qctx, &p, NCONV_OP_FORWARD, NULL, &bench);
    CHECK(heur == forced && heur < most && bench <= heur, "heuristic %zu (%s forced %zu), benchmark %zu, most %zu", heur,
          chosen, forced, bench, most);
    nconv_context_destroy(qctx);
    CHECK_ERROR(nconv_backward(NULL, &p, NULL, NULL, &tw, NULL, &tdy, NULL, &tdw, NULL, NULL, NULL, 0),
                NCONV_INVALID_ARGUMENT, "x is NULL but required");
    CHECK_ERROR(nconv_backward(NULL, &p, &relu, &tx, &tw, NULL, &tdy, &tdx, NULL, NULL, NULL, NULL, 0),
                NCONV_INVALID_ARGUMENT, "y is NULL but required");
    CHECK(nconv_backward(NULL, &p, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0) == NCONV_OK,
          "an empty output mask is a no-op");

    /* Double backward: operands a requested gradient needs. */
    CHECK_ERROR(nconv_double_backward(NULL, &p, NULL, &tw, &tdy, NULL, &tw, NULL, &ty, NULL, NULL), NCONV_INVALID_ARGUMENT,
                "x is NULL but required");
    CHECK_ERROR(nconv_double_backward(NULL, &p, &tx, &tw, NULL, &tx, NULL, NULL, NULL, NULL, &tw), NCONV_INVALID_ARGUMENT,
                "dy is NULL but required");
    for (int i = 0; i < 54; i++) dw[i] = 5.0f;
    CHECK(nconv_double_backward(NULL, &p, &tx, &tw, &tdy, NULL, NULL, &tdb, NULL, NULL, &tdw) == NCONV_OK && dw[0] == 0.0f &&
              dw[53] == 0.0f,
          "gw with no ggx is zeros: %s", nconv_last_error());
    /* Batch 0 with both second-order terms of ggy: its temporary is empty but still described
     * (valgrind reported the conditional jumps on an uninitialised tensor here); gw over no
     * images is zeros, the empty ggy and gx are not touched. */
    nconv_problem p0 = p;
    p0.batch = 0;
    int64_t xs0[NCONV_MAX_DIMS], ws0[NCONV_MAX_DIMS], ys0[NCONV_MAX_DIMS];
    nconv_problem_shapes(&p0, xs0, ws0, ys0);
    nconv_tensor tx0, tdy0, tggx0, tggy0, tgx0;
    nconv_tensor_init(&tx0, NULL, 4, xs0, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdy0, NULL, 4, ys0, NCONV_LAYOUT_NCX);
    tggx0 = tgx0 = tx0, tggy0 = tdy0;
    for (int i = 0; i < 54; i++) dw[i] = 5.0f;
    CHECK(nconv_double_backward(NULL, &p0, &tx0, &tw, &tdy0, &tggx0, &tw, &tdb, &tggy0, &tgx0, &tdw) == NCONV_OK &&
              dw[0] == 0.0f && dw[53] == 0.0f,
          "double backward at batch 0: %s, gw[0] = %g", nconv_last_error(), dw[0]);

    /* Context. */
    nconv_context *ctx = NULL;
    CHECK(nconv_context_create(&ctx) == NCONV_OK, "create");
    CHECK_ERROR(nconv_context_set_threads(ctx, 0), NCONV_INVALID_ARGUMENT, "threads = 0");
    CHECK_ERROR(nconv_context_set_deterministic(ctx, 3), NCONV_INVALID_ARGUMENT, "deterministic = 3");
    CHECK_ERROR(nconv_context_set_algorithm(ctx, "winograd9"), NCONV_INVALID_ARGUMENT, "'winograd9': unknown");
    CHECK_ERROR(nconv_context_set_policy(ctx, NCONV_POLICY_FORCED), NCONV_INVALID_ARGUMENT, "name the algorithm");
    CHECK_ERROR(nconv_context_set_policy(ctx, (nconv_algo_policy)9), NCONV_INVALID_ARGUMENT, "policy = 9");
    CHECK(nconv_context_set_algorithm(ctx, "igemm") == NCONV_OK, "force igemm");
    nconv_problem pd = p;
    pd.dtype = NCONV_F64;
    double xd[50] = {0}, wd[54] = {0}, yd[27];
    nconv_tensor txd = tx, twd = tw, tyd = ty;
    txd.data = xd, twd.data = wd, tyd.data = yd;
    CHECK_ERROR(nconv_forward(ctx, &pd, NULL, &txd, &twd, NULL, NULL, &tyd, NULL, 0), NCONV_UNSUPPORTED,
                "algorithm = 'igemm' does not apply: f64");
    const char *name = NULL;
    CHECK(nconv_context_set_algorithm(ctx, "auto") == NCONV_OK &&
              nconv_algorithm_chosen(ctx, &pd, NCONV_DIR_FWD, &name) == NCONV_OK && !strcmp(name, "gemm"),
          "f64 runs on gemm, got %s", name ? name : "(null)");
    CHECK(nconv_context_set_policy(ctx, NCONV_POLICY_BENCHMARK) == NCONV_OK, "benchmark policy");
    CHECK(nconv_forward(ctx, &p, NULL, &tx, &tw, &tb, NULL, &ty, NULL, 0) == NCONV_OK, "%s", nconv_last_error());
    CHECK(nconv_forward(ctx, &p, NULL, &tx, &tw, &tb, NULL, &ty, NULL, 0) == NCONV_OK, "cached: %s",
          nconv_last_error());
    nconv_context_destroy(ctx);

    /* Tensors and names. */
    nconv_tensor t;
    int64_t shape[4] = {2, 3, 4, 5};
    CHECK(nconv_tensor_init(&t, NULL, 4, shape, NCONV_LAYOUT_NXC) == NCONV_OK && t.stride[1] == 1 && t.stride[3] == 3 &&
              t.stride[2] == 15 && t.stride[0] == 60,
          "nxc strides %lld %lld %lld %lld", (long long)t.stride[0], (long long)t.stride[1], (long long)t.stride[2],
          (long long)t.stride[3]);
    CHECK_ERROR(nconv_tensor_init(&t, NULL, 6, shape, NCONV_LAYOUT_NCX), NCONV_INVALID_ARGUMENT, "rank = 6");
    shape[2] = -1;
    CHECK_ERROR(nconv_tensor_init(&t, NULL, 4, shape, NCONV_LAYOUT_NCX), NCONV_INVALID_ARGUMENT, "shape[2] = -1");
    CHECK(!strcmp(nconv_status_string(NCONV_OUT_OF_MEMORY), "out of memory"), "status string");
    CHECK(nconv_dtype_size(NCONV_BF16) == 2 && nconv_dtype_size((nconv_dtype)7) == 0, "dtype sizes");
    int applies = 1;
    const char *why = NULL;
    CHECK(nconv_algorithm_applies("winograd", &pd, NCONV_DIR_BWD_W, &applies, &why) == NCONV_OK && !applies &&
              strstr(why, "f64"),
          "applies");
    CHECK_ERROR(nconv_algorithm_applies("nope", &p, NCONV_DIR_FWD, &applies, NULL), NCONV_INVALID_ARGUMENT,
                "'nope': unknown");
}

/* Run with NCONV_MAX_ISA=bogus (tests/CMakeLists.txt): a cap that names no ISA is refused by
 * every call that would pick kernels, with the variable and its value in the message. */
static void test_isa_cap_refused(void) {
    nconv_context *ctx = NULL;
    CHECK_ERROR(nconv_context_create(&ctx), NCONV_INVALID_ARGUMENT, "NCONV_MAX_ISA = 'bogus': expected generic");
    CHECK(ctx == NULL, "no context on failure");
    nconv_problem p;
    nconv_problem_init(&p, 1);
    float x[1] = {1}, w[1] = {2}, y[1] = {-3};
    const int64_t one[3] = {1, 1, 1};
    nconv_tensor tx, tw, ty;
    nconv_tensor_init(&tx, x, 3, one, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tw, w, 3, one, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&ty, y, 3, one, NCONV_LAYOUT_NCX);
    CHECK_ERROR(nconv_forward(NULL, &p, NULL, &tx, &tw, NULL, NULL, &ty, NULL, 0), NCONV_INVALID_ARGUMENT,
                "NCONV_MAX_ISA = 'bogus'");
    CHECK(y[0] == -3.0f, "a refused call wrote y");
    size_t bytes = 0;
    CHECK_ERROR(nconv_workspace_size(NULL, &p, NCONV_OP_BACKWARD, NULL, &bytes), NCONV_INVALID_ARGUMENT,
                "NCONV_MAX_ISA = 'bogus'");
    const char *name = NULL;
    CHECK_ERROR(nconv_algorithm_chosen(NULL, &p, NCONV_DIR_FWD, &name), NCONV_INVALID_ARGUMENT, "NCONV_MAX_ISA");
}

/* nconv_forward_jvp's, nconv_forward_jvp_batched's and nconv_double_backward_batched's own checks:
 * each names the operand, and no output is written. */
static void test_derivative_misuse(void) {
    nconv_problem p = conv2d(1, 2, 3, 5, 5, 3);
    float x[50], w[54], y[27], t[27], b[3];
    int64_t xs[4] = {1, 2, 5, 5}, wsh[4] = {3, 2, 3, 3}, ys[4] = {1, 3, 3, 3}, bs[1] = {3};
    nconv_tensor tx, tw, ty, ttan, tb;
    for (int i = 0; i < 50; i++) x[i] = (float)i / 50;
    for (int i = 0; i < 54; i++) w[i] = (float)i / 54;
    for (int i = 0; i < 27; i++) y[i] = t[i] = -7.0f;
    nconv_tensor_init(&tx, x, 4, xs, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tw, w, 4, wsh, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&ty, y, 4, ys, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&ttan, t, 4, ys, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tb, b, 1, bs, NCONV_LAYOUT_NCX);
    CHECK_ERROR(nconv_forward_jvp(NULL, &p, NULL, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty, NULL),
                NCONV_INVALID_ARGUMENT, "ty is NULL");
    CHECK_ERROR(nconv_forward_jvp(NULL, &p, NULL, &tx, &tw, NULL, NULL, NULL, NULL, &tb, NULL, &ty, &ttan),
                NCONV_INVALID_ARGUMENT, "tb is given without bias");
    CHECK_ERROR(nconv_forward_jvp(NULL, &p, NULL, &tx, &tw, NULL, NULL, NULL, NULL, NULL, &ty, &ty, &ttan),
                NCONV_INVALID_ARGUMENT, "tz is given without z");
    nconv_tensor nodata = tw;
    nodata.data = NULL;
    CHECK_ERROR(nconv_forward_jvp(NULL, &p, NULL, &tx, &tw, NULL, NULL, NULL, &nodata, NULL, NULL, &ty, &ttan),
                NCONV_INVALID_ARGUMENT, "tw->data is NULL");
    CHECK_ERROR(nconv_forward_jvp(NULL, &p, NULL, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty, &ty),
                NCONV_INVALID_ARGUMENT, "y overlaps ty");
    CHECK_ERROR(nconv_forward_jvp(NULL, &p, NULL, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty, &tx),
                NCONV_INVALID_ARGUMENT, "ty overlaps x");
    const nconv_double_batch db0 = {2, 0, 0, 0, 0, 0, 0, 27, 0, 54};
    CHECK_ERROR(nconv_double_backward_batched(NULL, &p, NULL, &tx, &tw, &ty, &tx, NULL, NULL, &ttan, NULL, NULL),
                NCONV_INVALID_ARGUMENT, "batch is NULL");
    CHECK_ERROR(nconv_double_backward_batched(NULL, &p, &db0, &tx, &tw, &ty, &tx, NULL, NULL, NULL, &tx, NULL),
                NCONV_INVALID_ARGUMENT, "batch stride of gx = 0");
    const nconv_double_batch db1 = {0, 0, 0, 0, 0, 0, 0, 27, 50, 54};
    CHECK_ERROR(nconv_double_backward_batched(NULL, &p, &db1, &tx, &tw, &ty, &tx, NULL, NULL, &ttan, NULL, NULL),
                NCONV_INVALID_ARGUMENT, "batch size = 0");
    const nconv_jvp_batch jb0 = {2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 27};
    CHECK_ERROR(nconv_forward_jvp_batched(NULL, &p, NULL, NULL, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty,
                                          &ttan),
                NCONV_INVALID_ARGUMENT, "batch is NULL");
    CHECK_ERROR(nconv_forward_jvp_batched(NULL, &p, NULL, &jb0, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty,
                                          &ttan),
                NCONV_INVALID_ARGUMENT, "batch y stride = 0");
    const nconv_jvp_batch jb1 = {2, 0, 0, 0, 0, 0, 0, 0, 0, 27, 27};
    CHECK_ERROR(nconv_forward_jvp_batched(NULL, &p, NULL, &jb1, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty,
                                          &ty),
                NCONV_INVALID_ARGUMENT, "y overlaps ty");
    CHECK_ERROR(nconv_forward_jvp_batched(NULL, &p, NULL, &jb1, &tx, &tw, NULL, NULL, NULL, NULL, &tb, NULL, &ty,
                                          &ttan),
                NCONV_INVALID_ARGUMENT, "tb is given without bias");
    CHECK_ERROR(nconv_forward_jvp_batched(NULL, &p, NULL, &jb1, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty,
                                          NULL),
                NCONV_INVALID_ARGUMENT, "ty is NULL but required");
    const nconv_jvp_batch jb2 = {-1, 0, 0, 0, 0, 0, 0, 0, 0, 27, 27};
    CHECK_ERROR(nconv_forward_jvp_batched(NULL, &p, NULL, &jb2, &tx, &tw, NULL, NULL, &tx, NULL, NULL, NULL, &ty,
                                          &ttan),
                NCONV_INVALID_ARGUMENT, "batch size = -1");
    int untouched = 1;
    for (int i = 0; i < 27; i++) untouched = untouched && y[i] == -7.0f && t[i] == -7.0f;
    CHECK(untouched, "a refused jvp wrote an output");
    /* no tangent: ty = 0, y = conv(x, w) */
    CHECK(nconv_forward_jvp(NULL, &p, NULL, &tx, &tw, NULL, NULL, NULL, NULL, NULL, NULL, &ty, &ttan) == NCONV_OK,
          "%s", nconv_last_error());
    int zeros = 1;
    for (int i = 0; i < 27; i++) zeros = zeros && t[i] == 0.0f && y[i] != -7.0f;
    CHECK(zeros, "jvp without tangents: ty must be zeros and y written");
}

int main(void) {
    const char *isa = getenv("NCONV_MAX_ISA");
    if (isa && !strcmp(isa, "bogus")) {
        test_isa_cap_refused();
        return test_summary();
    }
    test_geometry();
    test_validation();
    test_text();
    test_api_misuse();
    test_derivative_misuse();
    return test_summary();
}
