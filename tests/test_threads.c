/*
 * Thread safety: 8 threads share one context (plan cache, kept workspace)
 * and call forward and backward at once on identical and on different
 * problems, under the heuristic and the benchmark policy, each with its own
 * library threads too. Results must equal those of a single-threaded run
 * (bitwise under the heuristic; the benchmark policy may pick another
 * algorithm, so within tolerance). The NCONV_TSAN=ON build runs it under
 * ThreadSanitizer, which must report nothing.
 */
#include "test_util.h"
#include "internal.h"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { CALLERS = 8, PROBLEMS = 4, ROUNDS = 6 };

typedef struct job {
    nconv_problem p;
    float *x, *w, *dy;
    float *y, *dx, *dw; /* results of the single-threaded run */
    int64_t nx, nw, ny;
} job;

static job jobs[PROBLEMS];

static void job_make(job *j, int k) {
    nconv_problem *p = &j->p;
    nconv_problem_init(p, 2);
    p->batch = 2;
    p->in_channels = 8 + 8 * (k % 2);
    p->out_channels = 16;
    p->groups = k == 3 ? 8 : 1;
    p->in_size[0] = p->in_size[1] = 10 + k;
    p->kernel[0] = p->kernel[1] = k == 2 ? 1 : 3;
    p->pad_begin[0] = p->pad_begin[1] = p->pad_end[0] = p->pad_end[1] = k == 2 ? 0 : 1;
    p->stride[0] = p->stride[1] = 1 + k % 2;
    int64_t xs[5], ws[5], ys[5];
    nconv_problem_shapes(p, xs, ws, ys);
    j->nx = xs[0] * xs[1] * xs[2] * xs[3];
    j->nw = ws[0] * ws[1] * ws[2] * ws[3];
    j->ny = ys[0] * ys[1] * ys[2] * ys[3];
    uint64_t rng = 100 + (uint64_t)k;
    j->x = malloc(sizeof(float) * (size_t)j->nx);
    j->w = malloc(sizeof(float) * (size_t)j->nw);
    j->dy = malloc(sizeof(float) * (size_t)j->ny);
    for (int64_t i = 0; i < j->nx; i++) j->x[i] = (float)test_uniform(&rng);
    for (int64_t i = 0; i < j->nw; i++) j->w[i] = (float)test_uniform(&rng);
    for (int64_t i = 0; i < j->ny; i++) j->dy[i] = (float)test_uniform(&rng);
}

/* Forward then backward of job j into fresh y, dx, dw (caller frees). */
static nconv_status run(nconv_context *ctx, const job *j, float **y, float **dx, float **dw) {
    int64_t xs[5], ws[5], ys[5];
    nconv_problem_shapes(&j->p, xs, ws, ys);
    nconv_tensor tx, tw, ty, tdy, tdx, tdw;
    *y = malloc(sizeof(float) * (size_t)j->ny);
    *dx = malloc(sizeof(float) * (size_t)j->nx);
    *dw = malloc(sizeof(float) * (size_t)j->nw);
    nconv_tensor_init(&tx, j->x, 4, xs, NCONV_LAYOUT_NXC);
    nconv_tensor_init(&tw, j->w, 4, ws, NCONV_LAYOUT_NCX);
    nconv_tensor_init(&ty, *y, 4, ys, NCONV_LAYOUT_NXC);
    nconv_tensor_init(&tdy, j->dy, 4, ys, NCONV_LAYOUT_NXC);
    nconv_tensor_init(&tdx, *dx, 4, xs, NCONV_LAYOUT_NXC);
    nconv_tensor_init(&tdw, *dw, 4, ws, NCONV_LAYOUT_NCX);
    nconv_status st = nconv_forward(ctx, &j->p, NULL, &tx, &tw, NULL, NULL, &ty, NULL, 0);
    if (!st) st = nconv_backward(ctx, &j->p, NULL, &tx, &tw, NULL, &tdy, &tdx, &tdw, NULL, NULL, NULL, 0);
    return st;
}

static int close_to(const float *a, const float *b, int64_t n, int bitwise) {
    if (bitwise) return !memcmp(a, b, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-4f * (1 + fabsf(b[i])))) return 0;
    return 1;
}

typedef struct caller {
    nconv_context *ctx;
    int id, same, bitwise;
    int failures;
    char msg[256];
} caller;

static void *caller_main(void *arg) {
    caller *c = arg;
    for (int r = 0; r < ROUNDS; r++) {
        const job *j = &jobs[c->same ? 0 : (c->id + r) % PROBLEMS];
        float *y, *dx, *dw;
        nconv_status st = run(c->ctx, j, &y, &dx, &dw);
        if (st || !close_to(y, j->y, j->ny, c->bitwise) || !close_to(dx, j->dx, j->nx, c->bitwise) ||
            !close_to(dw, j->dw, j->nw, c->bitwise)) {
            if (!c->failures++)
                snprintf(c->msg, sizeof c->msg, "caller %d round %d: status %d %s", c->id, r, (int)st,
                         st ? nconv_last_error() : "results differ from the single-threaded run");
        }
        free(y), free(dx), free(dw);
    }
    return NULL;
}

/* A context whose worker pool ran in the parent, used in a fork() child:
 * the workers are not there, and a call must not wait for them. The child
 * compares with the single-threaded results and exits 0 on a match; an
 * alarm ends it (status != 0) if the call hangs. */
#if defined(__SANITIZE_THREAD__)
#define NCONV_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NCONV_TEST_TSAN 1
#endif
#endif

static void test_fork(void) {
#ifdef NCONV_TEST_TSAN
    /* ThreadSanitizer does not support starting threads after a multi-threaded fork. */
    printf("skip fork test under ThreadSanitizer\n");
    return;
#endif
    nconv_context *ctx;
    nconv_context_create(&ctx);
    nconv_context_set_threads(ctx, 3);
    float *y, *dx, *dw;
    CHECK(run(ctx, &jobs[0], &y, &dx, &dw) == NCONV_OK, "before fork: %s", nconv_last_error());
    free(y), free(dx), free(dw);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        int ok = run(ctx, &jobs[0], &y, &dx, &dw) == NCONV_OK;
        ok = ok && close_to(y, jobs[0].y, jobs[0].ny, 1) && close_to(dx, jobs[0].dx, jobs[0].nx, 1) &&
             close_to(dw, jobs[0].dw, jobs[0].nw, 1);
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or waitpid failed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a call in a fork() child failed or hung (status %d)", status);
    nconv_context_destroy(ctx);
}

/* Work sharing with stealing: each item is claimed exactly once; a thread
 * that starts late finds its share taken by the others. Thread 0 waits
 * (at most 20 s) until the others have run out of items. */
enum { SHARE_THREADS = 4, SHARE_ITEMS = 1000 };
typedef struct share_test {
    nconv_share shares[SHARE_THREADS];
    atomic_int claimed[SHARE_ITEMS], finished;
    int64_t late_claims; /* items thread 0 claimed after the others finished */
    int waited;          /* whether thread 0 saw them finish */
} share_test;

static void share_task(void *arg, int tid, int nthreads) {
    share_test *t = arg;
    if (tid == 0) {
        const struct timespec ms = {0, 1000000};
        for (int i = 0; i < 20000 && atomic_load(&t->finished) < nthreads - 1; i++) nanosleep(&ms, NULL);
        t->waited = atomic_load(&t->finished) == nthreads - 1;
    }
    int64_t n = 0;
    for (int64_t i; (i = nconv__share_claim(t->shares, tid, nthreads)) >= 0; n++) atomic_fetch_add(&t->claimed[i], 1);
    if (tid == 0) t->late_claims = n;
    else atomic_fetch_add(&t->finished, 1);
}

static void test_shares(void) {
    share_test *t = calloc(1, sizeof *t);
    nconv__share_split(t->shares, SHARE_ITEMS, SHARE_THREADS);
    CHECK(t->shares[0].end == SHARE_ITEMS / SHARE_THREADS && t->shares[SHARE_THREADS - 1].end == SHARE_ITEMS,
          "share_split: shares end at %lld, %lld", (long long)t->shares[0].end,
          (long long)t->shares[SHARE_THREADS - 1].end);
    nconv__parallel_on(NULL, SHARE_THREADS, share_task, t);
    int64_t bad = 0;
    for (int i = 0; i < SHARE_ITEMS; i++) bad += atomic_load(&t->claimed[i]) != 1;
    CHECK(bad == 0, "%lld of %d items not claimed exactly once", (long long)bad, SHARE_ITEMS);
    /* Without the others running (no threads started), thread 0 ran first and claimed everything. */
    CHECK(!t->waited || t->late_claims == 0, "thread 0 started late and still claimed %lld items",
          (long long)t->late_claims);
    free(t);
}

int main(void) {
    test_shares();
    nconv_context *solo;
    nconv_context_create(&solo);
    for (int k = 0; k < PROBLEMS; k++) {
        job_make(&jobs[k], k);
        CHECK(run(solo, &jobs[k], &jobs[k].y, &jobs[k].dx, &jobs[k].dw) == NCONV_OK, "single-threaded: %s",
              nconv_last_error());
    }
    nconv_context_destroy(solo);
    const nconv_algo_policy policies[] = {NCONV_POLICY_HEURISTIC, NCONV_POLICY_BENCHMARK};
    for (int pi = 0; pi < 2; pi++)
        for (int same = 0; same < 2; same++) {
            nconv_context *ctx;
            nconv_context_create(&ctx);
            nconv_context_set_policy(ctx, policies[pi]);
            nconv_context_set_threads(ctx, 2);
            pthread_t t[CALLERS];
            caller c[CALLERS];
            for (int i = 0; i < CALLERS; i++) {
                c[i] = (caller){ctx, i, same, pi == 0, 0, ""};
                pthread_create(&t[i], NULL, caller_main, &c[i]);
            }
            for (int i = 0; i < CALLERS; i++) {
                pthread_join(t[i], NULL);
                CHECK(c[i].failures == 0, "policy %d, %s problems: %s", pi, same ? "identical" : "different",
                      c[i].msg);
            }
            nconv_context_destroy(ctx);
        }
    test_fork();
    for (int k = 0; k < PROBLEMS; k++) {
        free(jobs[k].x), free(jobs[k].w), free(jobs[k].dy);
        free(jobs[k].y), free(jobs[k].dx), free(jobs[k].dw);
    }
    return test_summary();
}
