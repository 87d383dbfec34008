/*
 * A 2D convolution layer with a fused bias + ReLU epilogue: forward, then the
 * backward pass for a loss L = sum(y * dy), then one SGD step.
 *
 *   x  [N=2, C=3, H=8, W=8]     w  [O=4, C=3, 3, 3]     b [4]
 *   y  [2, 4, 8, 8] = relu(conv(x, w, stride 1, padding 1) + b)
 *
 * Build: cc conv_layer.c $(pkg-config --cflags --libs nconv) -o conv_layer
 */
#include <nconv.h>

#include <stdio.h>

#define N 2
#define C 3
#define O 4
#define H 8
#define W 8
#define K 3

static float x[N][C][H][W], w[O][C][K][K], b[O], y[N][O][H][W];
static float dy[N][O][H][W], dx[N][C][H][W], dw[O][C][K][K], db[O];

static int fail(const char *what) {
    fprintf(stderr, "%s failed: %s\n", what, nconv_last_error());
    return 1;
}

int main(void) {
    /* Problem: everything not set keeps nconv_problem_init's default. */
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = N, p.in_channels = C, p.out_channels = O;
    p.in_size[0] = H, p.in_size[1] = W;
    p.kernel[0] = p.kernel[1] = K;
    p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = 1;

    for (int i = 0; i < N * C * H * W; i++) (&x[0][0][0][0])[i] = (float)((i * 37) % 17 - 8) / 8.0f;
    for (int i = 0; i < O * C * K * K; i++) (&w[0][0][0][0])[i] = (float)((i * 11) % 7 - 3) / 10.0f;
    for (int i = 0; i < O; i++) b[i] = 0.1f * (float)i;
    for (int i = 0; i < N * O * H * W; i++) (&dy[0][0][0][0])[i] = 1.0f;

    /* Dense NCHW tensors: strides from the logical shapes. */
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], bs[1] = {O};
    if (nconv_problem_shapes(&p, xs, ws, ys)) return fail("shapes");
    nconv_tensor tx, tw, tb, ty, tdy, tdx, tdw, tdb;
    nconv_tensor_init(&tx, x, 4, xs, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tw, w, 4, ws, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tb, b, 1, bs, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&ty, y, 4, ys, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdy, dy, 4, ys, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdx, dx, 4, xs, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdw, dw, 4, ws, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&tdb, db, 1, bs, NCONV_LAYOUT_NCX);

    nconv_context *ctx;
    if (nconv_context_create(&ctx)) return fail("context");
    const nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};

    if (nconv_forward(ctx, &p, &relu, &tx, &tw, &tb, NULL, &ty, NULL, 0)) return fail("forward");
    /* Backward through the same epilogue: y supplies the ReLU mask. */
    if (nconv_backward(ctx, &p, &relu, &tx, &tw, &ty, &tdy, &tdx, &tdw, &tdb, NULL, NULL, 0)) return fail("backward");

    const float lr = 0.01f;
    for (int i = 0; i < O * C * K * K; i++) (&w[0][0][0][0])[i] -= lr * (&dw[0][0][0][0])[i];
    for (int i = 0; i < O; i++) b[i] -= lr * db[i];

    printf("y[0][3][4][0..3] = %.4f %.4f %.4f %.4f\n", y[0][3][4][0], y[0][3][4][1], y[0][3][4][2], y[0][3][4][3]);
    printf("db = %.1f %.1f %.1f %.1f (active outputs per channel)\n", db[0], db[1], db[2], db[3]);
    printf("dx[0][0][0][0] = %.4f, dw[0][0][1][1] = %.4f\n", dx[0][0][0][0], dw[0][0][1][1]);
    nconv_context_destroy(ctx);
    return 0;
}
