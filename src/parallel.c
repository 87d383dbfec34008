/*
 * Threading: nconv__parallel runs fn(arg, tid, nthreads) on `threads`
 * threads, the caller's being tid 0, and returns when all are done. Each
 * task splits its own range (nconv__split); the partition depends only on
 * the range and the thread count, and algorithms make results independent
 * of it. The threads are the context's pool of workers (see internal.h),
 * or, with no pool free, threads started for the call.
 */
#include "internal.h"

#include <unistd.h>

static void *pool_worker(void *p) {
    struct nconv_pool_slot *s = p;
    nconv_pool *pool = s->pool;
    pthread_mutex_lock(&pool->m);
    unsigned seen = s->gen0; /* not pool->gen: a job may have been posted before this thread ran */
    for (;;) {
        while (pool->gen == seen && !pool->quit) pthread_cond_wait(&pool->wake, &pool->m);
        if (pool->quit) break;
        seen = pool->gen;
        const nconv_task_fn fn = pool->fn;
        void *arg = pool->arg;
        const int n = pool->nthreads;
        pthread_mutex_unlock(&pool->m);
        if (s->tid < n) fn(arg, s->tid, n);
        pthread_mutex_lock(&pool->m);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->m);
    return NULL;
}

int nconv__pool_init(nconv_pool *p) {
    p->workers = p->pending = p->quit = 0;
    p->gen = 0;
    p->pid = (long)getpid();
    if (pthread_mutex_init(&p->busy, NULL)) return -1;
    if (pthread_mutex_init(&p->m, NULL)) goto fail_m;
    if (pthread_cond_init(&p->wake, NULL)) goto fail_wake;
    if (pthread_cond_init(&p->done, NULL)) goto fail_done;
    return 0;
fail_done:
    pthread_cond_destroy(&p->wake);
fail_wake:
    pthread_mutex_destroy(&p->m);
fail_m:
    pthread_mutex_destroy(&p->busy);
    return -1;
}

static void pool_stop(nconv_pool *p) {
    if (p->pid != (long)getpid()) p->workers = 0; /* a fork() child: the threads are the parent's */
    pthread_mutex_lock(&p->m);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->m);
    for (int i = 0; i < p->workers; i++) pthread_join(p->tid[i], NULL);
    p->workers = 0;
    p->quit = 0;
}

void nconv__pool_resize(nconv_pool *p, int workers) {
    pool_stop(p);
    p->pid = (long)getpid();
    if (workers > NCONV_MAX_THREADS - 1) workers = NCONV_MAX_THREADS - 1;
    for (int i = 0; i < workers; i++) {
        p->slot[i] = (struct nconv_pool_slot){p, i + 1, p->gen};
        if (pthread_create(&p->tid[i], NULL, pool_worker, &p->slot[i])) break;
        p->workers = i + 1;
    }
}

void nconv__pool_destroy(nconv_pool *p) {
    pool_stop(p);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->m);
    pthread_mutex_destroy(&p->busy);
}

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

void nconv__parallel_on(nconv_pool *pool, int threads, nconv_task_fn fn, void *arg) {
    if (threads > NCONV_MAX_THREADS) threads = NCONV_MAX_THREADS;
    if (threads <= 1) {
        fn(arg, 0, 1);
        return;
    }
    if (pool && pool->workers >= threads - 1 && pool->pid == (long)getpid() && pthread_mutex_trylock(&pool->busy) == 0) {
        pthread_mutex_lock(&pool->m);
        pool->fn = fn, pool->arg = arg, pool->nthreads = threads;
        pool->pending = pool->workers;
        pool->gen++;
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->m);
        fn(arg, 0, threads);
        pthread_mutex_lock(&pool->m);
        while (pool->pending) pthread_cond_wait(&pool->done, &pool->m);
        pthread_mutex_unlock(&pool->m);
        pthread_mutex_unlock(&pool->busy);
        return;
    }
    pthread_t tid[NCONV_MAX_THREADS];
    worker w[NCONV_MAX_THREADS];
    int started[NCONV_MAX_THREADS] = {0};
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

void nconv__parallel(const nconv_exec *e, nconv_task_fn fn, void *arg) {
    nconv__parallel_on(e->pool, e->threads, fn, arg);
}

void nconv__split(int64_t n, int tid, int nthreads, int64_t *begin, int64_t *end) {
    const int64_t q = n / nthreads, r = n % nthreads;
    *begin = tid * q + (tid < r ? tid : r);
    *end = *begin + q + (tid < r ? 1 : 0);
}
