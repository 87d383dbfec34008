/*
 * Threading: nconv__parallel runs fn(arg, tid, nthreads) on `threads`
 * threads, the caller's being tid 0, and returns when all are done. Each
 * task splits its own range (nconv__split); the partition depends only on
 * the range and the thread count, and algorithms make results independent
 * of it. Threads are created per call: no pool, no global state.
 */
#include "internal.h"

#include <pthread.h>

typedef struct worker {
    nconv_task_fn fn;
    void *arg;
    int tid, n;
} worker;

static void *run_worker(void *p) {
    worker *w = p;
    w->fn(w->arg, w->tid, w->n);
    return NULL;
}

void nconv__parallel(int threads, nconv_task_fn fn, void *arg) {
    enum { MAX_THREADS = 256 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_t tid[MAX_THREADS];
    worker w[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 1; t < threads; t++) {
        w[t] = (worker){fn, arg, t, threads};
        started[t] = pthread_create(&tid[t], NULL, run_worker, &w[t]) == 0;
    }
    fn(arg, 0, threads);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else fn(arg, t, threads); /* could not start a thread: do its share here */
    }
}

void nconv__split(int64_t n, int tid, int nthreads, int64_t *begin, int64_t *end) {
    const int64_t q = n / nthreads, r = n % nthreads;
    *begin = tid * q + (tid < r ? tid : r);
    *end = *begin + q + (tid < r ? 1 : 0);
}
