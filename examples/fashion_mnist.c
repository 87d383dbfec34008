/*
 * A small CNN trained on Fashion-MNIST with nconv, in plain C: every convolution, its
 * fused bias + ReLU and all their gradients are nconv calls; pooling, the loss and
 * SGD with momentum are the loops below.
 *
 *   x [N, 1, 28, 28] -> conv 3x3, 16, + bias, relu -> max pool 2 -> [N, 16, 14, 14]
 *                    -> conv 3x3, 32, + bias, relu -> max pool 2 -> [N, 32, 7, 7]
 *                    -> conv 7x7, 10, + bias (the fully connected layer) -> [N, 10, 1, 1]
 *                    -> softmax cross-entropy
 *
 * Reads the gzipped IDX files of Debian's dataset-fashion-mnist with zlib.
 *
 * Usage: fashion_mnist [--data DIR] [--epochs E] [--steps S] [--batch B] [--lr LR]
 *                      [--threads T] [--seed S] [--test-images N] [--min-accuracy PERCENT]
 *   --steps S stops after S steps (a short run); --test-images evaluates on the first N test
 *   images only; --min-accuracy makes the exit status 1 when the test accuracy ends below
 *   PERCENT. Exit 2 on invalid options, 77 when the data is missing.
 * Build: cc fashion_mnist.c $(pkg-config --cflags --libs nconv) -lz -lm -o fashion_mnist
 */
#include <nconv.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#define CLASSES 10
#define SIDE 28

/* ------------------------------------------------------------------ data */

typedef struct dataset {
    int64_t n;
    float *images; /* [n, 1, 28, 28], normalised */
    uint8_t *labels;
} dataset;

static uint32_t be32(const unsigned char *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Reads one gzipped IDX file: magic (0x801 labels, 0x803 images), sizes, bytes. */
static unsigned char *read_idx(const char *path, uint32_t magic, int64_t *count) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    unsigned char head[16];
    int dims = magic == 0x803 ? 3 : 1;
    unsigned char *data = NULL;
    if (gzread(f, head, (unsigned)(4 + 4 * dims)) == 4 + 4 * dims && be32(head) == magic) {
        int64_t n = be32(head + 4), bytes = n;
        if (dims == 3) bytes *= (int64_t)be32(head + 8) * be32(head + 12);
        if (dims == 3 && (be32(head + 8) != SIDE || be32(head + 12) != SIDE)) bytes = -1;
        data = bytes > 0 ? malloc((size_t)bytes) : NULL;
        if (data && gzread(f, data, (unsigned)bytes) != bytes) free(data), data = NULL;
        *count = n;
    }
    gzclose(f);
    return data;
}

static int load(const char *dir, const char *prefix, dataset *d) {
    char ip[1024], lp[1024];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    int64_t ni = 0, nl = 0;
    unsigned char *pix = read_idx(ip, 0x803, &ni);
    d->labels = read_idx(lp, 0x801, &nl);
    if (!pix || !d->labels || ni != nl) {
        fprintf(stderr, "fashion_mnist: cannot read %s and %s\n", ip, lp);
        free(pix);
        return 0;
    }
    d->n = ni;
    d->images = malloc(sizeof(float) * (size_t)(ni * SIDE * SIDE));
    if (!d->images) return free(pix), 0;
    /* The training set's mean and standard deviation of a pixel. */
    for (int64_t i = 0; i < ni * SIDE * SIDE; i++) d->images[i] = ((float)pix[i] / 255.0f - 0.2860f) / 0.3530f;
    free(pix);
    return 1;
}

/* ------------------------------------------------------------------ layers */

static uint64_t rng_state;
static double uniform(void) { /* xorshift64*, in [0, 1) */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

typedef struct conv_layer {
    nconv_problem p;
    nconv_epilogue epi;
    float *w, *b, *dw, *db, *vw, *vb; /* weights, bias, their gradients and momenta */
    int64_t nw;
} conv_layer;

static int fail(const char *what) {
    fprintf(stderr, "fashion_mnist: %s failed: %s\n", what, nconv_last_error());
    return 0;
}

static int conv_init(conv_layer *l, int64_t cin, int64_t cout, int64_t side, int64_t k, int64_t pad, int relu) {
    nconv_problem_init(&l->p, 2);
    l->p.in_channels = cin, l->p.out_channels = cout;
    l->p.in_size[0] = l->p.in_size[1] = side;
    l->p.kernel[0] = l->p.kernel[1] = k;
    l->p.pad_begin[0] = l->p.pad_begin[1] = l->p.pad_end[0] = l->p.pad_end[1] = pad;
    l->epi.activation = relu ? NCONV_ACT_RELU : NCONV_ACT_IDENTITY;
    l->epi.alpha = 1.0;
    l->nw = cout * cin * k * k;
    float **bufs[] = {&l->w, &l->dw, &l->vw, &l->b, &l->db, &l->vb};
    for (int i = 0; i < 6; i++)
        if (!(*bufs[i] = calloc((size_t)(i < 3 ? l->nw : cout), sizeof(float)))) return 0;
    /* PyTorch's default initialisation: uniform in +-1/sqrt(fan_in). */
    const double bound = 1.0 / sqrt((double)(cin * k * k));
    for (int64_t i = 0; i < l->nw; i++) l->w[i] = (float)((2.0 * uniform() - 1.0) * bound);
    for (int64_t i = 0; i < cout; i++) l->b[i] = (float)((2.0 * uniform() - 1.0) * bound);
    return 1;
}

static void dense(nconv_tensor *t, void *data, const int64_t *shape, int rank) {
    nconv_tensor_init(t, data, rank, shape, NCONV_LAYOUT_NCX);
}

static int conv_forward(nconv_context *ctx, conv_layer *l, int64_t n, const float *x, float *y) {
    l->p.batch = n;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], bs[1] = {l->p.out_channels};
    nconv_problem_shapes(&l->p, xs, ws, ys);
    nconv_tensor tx, tw, tb, ty;
    dense(&tx, (void *)x, xs, 4), dense(&tw, l->w, ws, 4), dense(&tb, l->b, bs, 1), dense(&ty, y, ys, 4);
    return nconv_forward(ctx, &l->p, &l->epi, &tx, &tw, &tb, NULL, &ty, NULL, 0) == NCONV_OK || fail("forward");
}

/* Gradients of the weights and bias, and of the input when dx is not NULL. */
static int conv_backward(nconv_context *ctx, conv_layer *l, int64_t n, const float *x, const float *y,
                         const float *dy, float *dx) {
    l->p.batch = n;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], bs[1] = {l->p.out_channels};
    nconv_problem_shapes(&l->p, xs, ws, ys);
    nconv_tensor tx, tw, ty, tdy, tdx, tdw, tdb;
    dense(&tx, (void *)x, xs, 4), dense(&tw, l->w, ws, 4), dense(&ty, (void *)y, ys, 4);
    dense(&tdy, (void *)dy, ys, 4), dense(&tdx, dx, xs, 4), dense(&tdw, l->dw, ws, 4), dense(&tdb, l->db, bs, 1);
    return nconv_backward(ctx, &l->p, &l->epi, &tx, &tw, &ty, &tdy, dx ? &tdx : NULL, &tdw, &tdb, NULL, NULL,
                          0) == NCONV_OK ||
           fail("backward");
}

static void sgd(conv_layer *l, float lr, float momentum) {
    for (int64_t i = 0; i < l->nw; i++) l->vw[i] = momentum * l->vw[i] + l->dw[i], l->w[i] -= lr * l->vw[i];
    for (int64_t i = 0; i < l->p.out_channels; i++)
        l->vb[i] = momentum * l->vb[i] + l->db[i], l->b[i] -= lr * l->vb[i];
}

/* 2 x 2 max pooling, stride 2, of [n*c, side, side]; arg keeps each maximum's index for the backward. */
static void pool_forward(int64_t planes, int64_t side, const float *x, float *y, int32_t *arg) {
    const int64_t half = side / 2;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < half; j++) {
                int64_t best = (2 * i) * side + 2 * j;
                for (int64_t di = 0; di < 2; di++)
                    for (int64_t dj = 0; dj < 2; dj++) {
                        const int64_t k = (2 * i + di) * side + 2 * j + dj;
                        if (x[p * side * side + k] > x[p * side * side + best]) best = k;
                    }
                y[(p * half + i) * half + j] = x[p * side * side + best];
                arg[(p * half + i) * half + j] = (int32_t)best;
            }
}

static void pool_backward(int64_t planes, int64_t side, const float *dy, const int32_t *arg, float *dx) {
    const int64_t half = side / 2;
    memset(dx, 0, sizeof(float) * (size_t)(planes * side * side));
    for (int64_t p = 0; p < planes; p++)
        for (int64_t o = 0; o < half * half; o++) dx[p * side * side + arg[p * half * half + o]] += dy[p * half * half + o];
}

/* Mean softmax cross-entropy of logits [n, 10]; dlogits its gradient; *correct counts the right argmaxes. */
static double softmax_xent(int64_t n, const float *logits, const uint8_t *labels, float *dlogits, int64_t *correct) {
    double loss = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *z = logits + i * CLASSES;
        int best = 0;
        float m = z[0];
        for (int c = 1; c < CLASSES; c++)
            if (z[c] > m) m = z[c], best = c;
        *correct += best == labels[i];
        double sum = 0;
        for (int c = 0; c < CLASSES; c++) sum += exp((double)(z[c] - m));
        loss += log(sum) - (double)(z[labels[i]] - m);
        if (dlogits)
            for (int c = 0; c < CLASSES; c++)
                dlogits[i * CLASSES + c] = (float)((exp((double)(z[c] - m)) / sum - (c == labels[i])) / (double)n);
    }
    return loss / (double)n;
}

/* ------------------------------------------------------------------ model */

typedef struct model {
    conv_layer c1, c2, fc;
    int64_t cap; /* batch capacity of the buffers */
    float *x, *a1, *p1, *a2, *p2, *logits;       /* activations */
    float *dlogits, *dp2, *da2, *dp1, *da1;      /* their gradients */
    int32_t *arg1, *arg2;
} model;

static int model_init(model *m, int64_t cap) {
    if (!conv_init(&m->c1, 1, 16, 28, 3, 1, 1) || !conv_init(&m->c2, 16, 32, 14, 3, 1, 1) ||
        !conv_init(&m->fc, 32, CLASSES, 7, 7, 0, 0))
        return 0;
    m->cap = cap;
    const int64_t sizes[] = {28 * 28, 16 * 28 * 28, 16 * 14 * 14, 32 * 14 * 14, 32 * 7 * 7, CLASSES,
                             CLASSES, 32 * 7 * 7, 32 * 14 * 14, 16 * 14 * 14, 16 * 28 * 28};
    float **bufs[] = {&m->x, &m->a1, &m->p1, &m->a2, &m->p2, &m->logits, &m->dlogits, &m->dp2, &m->da2, &m->dp1, &m->da1};
    for (int i = 0; i < 11; i++)
        if (!(*bufs[i] = malloc(sizeof(float) * (size_t)(sizes[i] * cap)))) return 0;
    m->arg1 = malloc(sizeof(int32_t) * (size_t)(16 * 14 * 14 * cap));
    m->arg2 = malloc(sizeof(int32_t) * (size_t)(32 * 7 * 7 * cap));
    return m->arg1 && m->arg2;
}

static int model_forward(nconv_context *ctx, model *m, int64_t n) {
    return conv_forward(ctx, &m->c1, n, m->x, m->a1) && (pool_forward(n * 16, 28, m->a1, m->p1, m->arg1), 1) &&
           conv_forward(ctx, &m->c2, n, m->p1, m->a2) && (pool_forward(n * 32, 14, m->a2, m->p2, m->arg2), 1) &&
           conv_forward(ctx, &m->fc, n, m->p2, m->logits);
}

static int model_backward(nconv_context *ctx, model *m, int64_t n) {
    return conv_backward(ctx, &m->fc, n, m->p2, m->logits, m->dlogits, m->dp2) &&
           (pool_backward(n * 32, 14, m->dp2, m->arg2, m->da2), 1) &&
           conv_backward(ctx, &m->c2, n, m->p1, m->a2, m->da2, m->dp1) &&
           (pool_backward(n * 16, 28, m->dp1, m->arg1, m->da1), 1) &&
           conv_backward(ctx, &m->c1, n, m->x, m->a1, m->da1, NULL);
}

static void model_free(model *m) {
    conv_layer *layers[] = {&m->c1, &m->c2, &m->fc};
    for (int i = 0; i < 3; i++) {
        float *bufs[] = {layers[i]->w, layers[i]->dw, layers[i]->vw, layers[i]->b, layers[i]->db, layers[i]->vb};
        for (int j = 0; j < 6; j++) free(bufs[j]);
    }
    float *bufs[] = {m->x, m->a1, m->p1, m->a2, m->p2, m->logits, m->dlogits, m->dp2, m->da2, m->dp1, m->da1};
    for (int i = 0; i < 11; i++) free(bufs[i]);
    free(m->arg1), free(m->arg2);
}

static void gather(model *m, const dataset *d, const int64_t *order, int64_t first, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        memcpy(m->x + i * SIDE * SIDE, d->images + order[first + i] * SIDE * SIDE, sizeof(float) * SIDE * SIDE);
}

/* Test accuracy in percent (-1 on failure). */
static double evaluate(nconv_context *ctx, model *m, const dataset *test, double *loss) {
    int64_t correct = 0;
    double sum = 0;
    uint8_t labels[1024];
    int64_t *order = malloc(sizeof(int64_t) * (size_t)test->n);
    if (!order) return -1;
    for (int64_t i = 0; i < test->n; i++) order[i] = i;
    for (int64_t first = 0; first < test->n; first += m->cap) {
        const int64_t n = test->n - first < m->cap ? test->n - first : m->cap;
        gather(m, test, order, first, n);
        if (!model_forward(ctx, m, n)) return free(order), -1;
        for (int64_t i = 0; i < n; i++) labels[i] = test->labels[first + i];
        sum += softmax_xent(n, m->logits, labels, NULL, &correct) * (double)n;
    }
    free(order);
    *loss = sum / (double)test->n;
    return 100.0 * (double)correct / (double)test->n;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const char *dir = "/usr/share/datasets/fashion-mnist";
    int epochs = 3, threads = 1;
    long steps = 0, batch = 64;
    double lr = 0.02, min_accuracy = -1;
    unsigned long seed = 1;
    long test_images = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return fprintf(stderr, "fashion_mnist: %s needs a value\n", a), 2;
        if (!strcmp(a, "--data")) dir = v;
        else if (!strcmp(a, "--epochs")) epochs = atoi(v);
        else if (!strcmp(a, "--steps")) steps = atol(v);
        else if (!strcmp(a, "--batch")) batch = atol(v);
        else if (!strcmp(a, "--lr")) lr = atof(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--seed")) seed = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--min-accuracy")) min_accuracy = atof(v);
        else if (!strcmp(a, "--test-images")) test_images = atol(v);
        else return fprintf(stderr, "fashion_mnist: unknown option %s\n", a), 2;
        i++;
    }
    if (epochs < 1 || steps < 0 || batch < 1 || batch > 1024 || !(lr > 0) || threads < 1 || test_images < 0)
        return fprintf(stderr, "fashion_mnist: --epochs, --batch (1-1024), --lr and --threads must be positive\n"), 2;
    dataset train, test;
    if (!load(dir, "train", &train) || !load(dir, "t10k", &test)) return 77;
    if (test_images && test_images < test.n) test.n = test_images;
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    nconv_context *ctx;
    model m;
    if (nconv_context_create(&ctx) || nconv_context_set_threads(ctx, threads)) return fail("context"), 1;
    if (!model_init(&m, batch)) return fprintf(stderr, "fashion_mnist: out of memory\n"), 1;
    int64_t *order = malloc(sizeof(int64_t) * (size_t)train.n);
    if (!order) return 1;
    for (int64_t i = 0; i < train.n; i++) order[i] = i;
    printf("Fashion-MNIST: %lld training and %lld test images, batch %ld, SGD lr %g momentum 0.9, %d thread%s\n",
           (long long)train.n, (long long)test.n, batch, lr, threads, threads > 1 ? "s" : "");
    long step = 0;
    double accuracy = 0;
    for (int e = 1; e <= epochs && (!steps || step < steps); e++) {
        for (int64_t i = train.n - 1; i > 0; i--) { /* shuffle */
            const int64_t j = (int64_t)(uniform() * (double)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        const double t0 = now();
        double loss_sum = 0;
        int64_t correct = 0, seen = 0;
        uint8_t labels[1024];
        for (int64_t first = 0; first + batch <= train.n && (!steps || step < steps); first += batch, step++) {
            gather(&m, &train, order, first, batch);
            for (int64_t i = 0; i < batch; i++) labels[i] = train.labels[order[first + i]];
            if (!model_forward(ctx, &m, batch)) return 1;
            loss_sum += softmax_xent(batch, m.logits, labels, m.dlogits, &correct) * (double)batch;
            seen += batch;
            if (!model_backward(ctx, &m, batch)) return 1;
            sgd(&m.c1, (float)lr, 0.9f), sgd(&m.c2, (float)lr, 0.9f), sgd(&m.fc, (float)lr, 0.9f);
        }
        const double train_s = now() - t0;
        double test_loss;
        accuracy = evaluate(ctx, &m, &test, &test_loss);
        if (accuracy < 0) return 1;
        printf("epoch %d/%d: %ld steps, train loss %.4f, train accuracy %.2f%%, test loss %.4f, test accuracy "
               "%.2f%%, %.1f s\n",
               e, epochs, step, loss_sum / (double)seen, 100.0 * (double)correct / (double)seen, test_loss, accuracy,
               train_s);
        fflush(stdout);
    }
    int ok = accuracy >= min_accuracy;
    if (!ok) printf("test accuracy %.2f%% is below --min-accuracy %.2f%%\n", accuracy, min_accuracy);
    nconv_context_destroy(ctx);
    model_free(&m);
    free(order), free(train.images), free(train.labels), free(test.images), free(test.labels);
    return ok ? 0 : 1;
}
