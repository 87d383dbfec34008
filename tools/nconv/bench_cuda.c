/*
 * `nconv bench --device cuda`: each problem, direction and layout on a CUDA
 * context (cuDNN), timed with CUDA events over enough back-to-back calls to
 * last BATCH_MS, the median of ROUNDS such batches. bench/torch_bench.py
 * --device cuda adds PyTorch's CUDA times to the table.
 */
#include "cli.h"
#include "cuda_rt.h"

#include <stdlib.h>
#include <string.h>

static const double BATCH_MS = 20.0;
enum { ROUNDS = 5, MAX_REPS = 2000 };

typedef struct one_call {
    nconv_context *ctx;
    run_data *d;
    int dir;
} one_call;

static int call_once(void *arg) {
    one_call *c = arg;
    return run_dir(c->ctx, c->d, c->dir) != NCONV_OK;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Milliseconds per call: the median over ROUNDS batches; < 0 on failure. */
static double time_call(one_call *c) {
    if (call_once(c) || call_once(c) || cuda_rt_synchronize()) return -1; /* plans chosen, memory kept */
    const double one = cuda_rt_time(call_once, c, 1);
    if (one < 0) return -1;
    int reps = one > 0 ? (int)(BATCH_MS / one) : MAX_REPS;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        if ((t[r] = cuda_rt_time(call_once, c, reps)) < 0) return -1;
    qsort(t, ROUNDS, sizeof t[0], cmp_double);
    return t[ROUNDS / 2] / reps;
}

int bench_cuda(const problem_list *l, const suite_opts *o, const nconv_layout *layouts, int nlayouts, int csv,
               int progress) {
    static const char *const dir_names[3] = {"fwd", "bwd_d", "bwd_w"};
    char why[256];
    if (cuda_rt_load(why, sizeof why)) return cli_fail("bench --device cuda: %s", why);
    nconv_context *ctx;
    if (nconv_context_create_cuda(&ctx, 0)) return cli_fail("bench --device cuda: %s", nconv_last_error() + 7);
    if (o->algo && !strcmp(o->algo, "benchmark")) nconv_context_set_policy(ctx, NCONV_POLICY_BENCHMARK);
    if (csv)
        printf(BENCH_CSV_HEADER);
    else
        printf("%-26s %-5s %-6s %9s %9s %8s %-6s\n", "name", "dir", "layout", "ms", "GFLOP/s", "GB/s", "device");
    int failures = 0;
    for (size_t k = 0; k < l->n; k++) {
        const cli_problem *cp = &l->items[k];
        char desc[512];
        double flops;
        if (nconv_problem_to_desc(&cp->p, desc, sizeof desc) || nconv_problem_flops(&cp->p, &flops)) {
            fprintf(stderr, "nconv: %s: %s\n", cp->text, nconv_last_error());
            failures++;
            continue;
        }
        for (int dir = 0; dir < 3; dir++) {
            if (!o->dirs[dir]) continue;
            if (progress) fprintf(stderr, "[%zu/%zu] %s %s\n", k + 1, l->n, cp->name, dir_names[dir]);
            for (int li = 0; li < nlayouts; li++) {
                run_data h, dv;
                double ms = -1;
                if (run_data_init(&h, &cp->p, layouts[li], 7 + k)) {
                    fprintf(stderr, "nconv: %s %s: cannot allocate the operands\n", desc, dir_names[dir]);
                    failures++;
                    continue;
                }
                const int copied = !run_data_to_device(&h, &dv);
                one_call c = {ctx, &dv, dir};
                if (copied) ms = time_call(&c);
                if (ms < 0) {
                    fprintf(stderr, "nconv: %s %s: %s\n", desc, dir_names[dir],
                            copied && *nconv_last_error() ? nconv_last_error() : cuda_rt_error());
                    failures++;
                }
                run_data_free_device(&dv);
                run_data_free(&h);
                if (ms < 0) continue;
                const char *lname = layouts[li] == NCONV_LAYOUT_NXC ? "nhwc" : "nchw";
                const double gf = flops / (ms * 1e-3) * 1e-9, gbs = problem_bytes(&cp->p) / (ms * 1e-3) * 1e-9;
                if (csv)
                    printf("%s,%s,%s,%s,1,cudnn,%.5f,%.2f,,,,,,,%.4g,\n", cp->name, desc, dir_names[dir], lname, ms, gf,
                           gbs);
                else
                    printf("%-26s %-5s %-6s %9.4f %9.1f %8.2f %-6s\n", cp->name, dir_names[dir], lname, ms, gf, gbs,
                           "cuda:0");
                fflush(stdout);
            }
        }
    }
    nconv_context_destroy(ctx);
    return failures ? EXIT_CHECK_FAILED : 0;
}
