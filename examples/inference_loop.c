/*
 * An inference loop over one prepacked layer: a plan is made once for a
 * channels-last 3x3 convolution with bias and ReLU, given its weights once
 * (packed then), and executed on a stream of batches of varying size
 * (reshaped, weights kept). Each result is checked against the one-shot
 * nconv_forward on the same operands.
 *
 *   x  [N, C=32, 14, 14] (NHWC)   w  [O=64, 32, 3, 3] (OHWI)   b [64]
 *   y  [N, 64, 14, 14] = relu(conv(x, w, padding 1) + b)
 *
 * Build: cc inference_loop.c $(pkg-config --cflags --libs nconv) -o inference_loop
 */
#include <nconv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C = 32, O = 64, HW = 14, K = 3, MAX_N = 8 };

/* Every call returns a status; on failure the thread's message names the parameter. */
#define TRY(call)                                                              \
    do {                                                                       \
        if ((call) != NCONV_OK) {                                              \
            fprintf(stderr, "%s: %s\n", #call, nconv_last_error());            \
            return 1;                                                          \
        }                                                                      \
    } while (0)

int main(void) {
    nconv_problem p;
    nconv_problem_init(&p, 2);
    p.batch = 1, p.in_channels = C, p.out_channels = O;
    p.in_size[0] = p.in_size[1] = HW;
    p.kernel[0] = p.kernel[1] = K;
    p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = 1;

    static float x[MAX_N * C * HW * HW], w[O * C * K * K], b[O], y[MAX_N * O * HW * HW], ref[MAX_N * O * HW * HW];
    for (int i = 0; i < O * C * K * K; i++) w[i] = (float)((i * 11) % 7 - 3) / 10.0f;
    for (int i = 0; i < O; i++) b[i] = 0.01f * (float)(i % 5);

    nconv_context *ctx;
    TRY(nconv_context_create(&ctx));

    /* The plan: forward, relu epilogue, channels-last activations. */
    nconv_plan_desc d;
    nconv_plan_desc_init(&d, NCONV_OP_FORWARD);
    d.epi.activation = NCONV_ACT_RELU;
    d.layout = NCONV_LAYOUT_NXC;
    nconv_plan *plan;
    TRY(nconv_plan_create(ctx, &p, &d, &plan));
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], bs[1] = {O};
    nconv_problem_shapes(&p, xs, ws, ys);
    nconv_tensor tw, tb;
    nconv_tensor_init(&tw, w, 4, ws, NCONV_LAYOUT_NXC);
    nconv_tensor_init(&tb, b, 1, bs, NCONV_LAYOUT_NCX);
    TRY(nconv_plan_set_weights(plan, &tw, &tb));
    const char *algo = "";
    nconv_plan_algorithm(plan, NCONV_DIR_FWD, &algo);

    /* Requests arrive in batches of 1 to MAX_N images. */
    const int batches[] = {1, 4, 8, 2, 8, 3};
    int failures = 0;
    for (size_t r = 0; r < sizeof batches / sizeof batches[0]; r++) {
        const int n = batches[r];
        TRY(nconv_plan_reshape(plan, n));
        p.batch = n;
        nconv_problem_shapes(&p, xs, ws, ys);
        for (int i = 0; i < n * C * HW * HW; i++) x[i] = (float)(((int)r * 131 + i * 37) % 17 - 8) / 8.0f;
        nconv_tensor tx, ty, tref;
        nconv_tensor_init(&tx, x, 4, xs, NCONV_LAYOUT_NXC);
        nconv_tensor_init(&ty, y, 4, ys, NCONV_LAYOUT_NXC);
        nconv_tensor_init(&tref, ref, 4, ys, NCONV_LAYOUT_NXC);

        const nconv_variant_pack v = {.x = &tx, .y = &ty}; /* the plan's weights and bias */
        TRY(nconv_plan_execute(plan, &v));

        const nconv_epilogue relu = {NCONV_ACT_RELU, 1.0};
        nconv_context *same;
        nconv_context_create(&same);
        nconv_context_set_algorithm(same, algo); /* the plan keeps its algorithm through reshapes */
        TRY(nconv_forward(same, &p, &relu, &tx, &tw, &tb, NULL, &tref, NULL, 0));
        nconv_context_destroy(same);
        const int same_bits = !memcmp(y, ref, sizeof(float) * (size_t)(n * O * HW * HW));
        failures += !same_bits;
        printf("batch %d: y[0] = %.4f, %s the one-shot call\n", n, y[0], same_bits ? "equal to" : "DIFFERENT FROM");
    }
    printf("algorithm: %s\n", algo);
    nconv_plan_destroy(plan);
    nconv_context_destroy(ctx);
    return failures ? 1 : 0;
}
