/*
 * Threading: nconv__parallel runs fn(arg, tid, nthreads) on `threads`
 * threads, the caller's being tid 0, and returns when all are done. Each
 * task splits its own range (nconv__split), or claims its items from
 * per-thread shares with stealing (nconv__share_claim) when each item is
 * computed whole: on a shared machine one delayed thread would otherwise
 * hold up the region. Algorithms make results independent of who computes
 * what. The threads are the context's pool of workers (see internal.h), or,
 * with no pool free, threads started for the call.
 */
#include "internal.h"

#include <time.h>
#include <unistd.h>

/* Waiting spins for a while before it sleeps: a parallel region lasts from
 * tens of microseconds, and a futex wake-up costs about as much on a
 * virtual machine (a call runs several regions: packing, the GEMM, layout
 * changes). The spin is short, so idle workers leave the cores soon after
 * a call (OpenMP runtimes spin longer by default). */
enum { SPIN_NS = 200000 }; /* 200 us (BENCHMARKS.md, the measurements behind choices) */

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until *v != old (or quit); 1 if that happened within the spin time. */
static int spin_while_equal(atomic_uint *v, unsigned old, atomic_int *quit) {
    const int64_t t0 = now_ns();
    for (int64_t i = 1;; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != old || atomic_load_explicit(quit, memory_order_relaxed)) return 1;
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > SPIN_NS) return 0;
    }
}

static void *pool_worker(void *p) {
    struct nconv_pool_slot *s = p;
    nconv_pool *pool = s->pool;
    unsigned seen = s->gen0; /* not pool->gen: a job may have been posted before this thread ran */
    for (;;) {
        if (!spin_while_equal(&pool->gen, seen, &pool->quit)) {
            pthread_mutex_lock(&pool->m);
            while (atomic_load(&pool->gen) == seen && !atomic_load(&pool->quit)) pthread_cond_wait(&pool->wake, &pool->m);
            pthread_mutex_unlock(&pool->m);
        }
        if (atomic_load(&pool->quit)) break;
        /* The job's fields were written before gen was released. */
        seen = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (s->tid < pool->nthreads) pool->fn(pool->arg, s->tid, pool->nthreads);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->m);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->m);
        }
    }
    return NULL;
}

int nconv__pool_init(nconv_pool *p) {
    p->workers = 0;
    atomic_init(&p->pending, 0);
    atomic_init(&p->quit, 0);
    atomic_init(&p->gen, 0u);
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
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->m);
    for (int i = 0; i < p->workers; i++) pthread_join(p->tid[i], NULL);
    p->workers = 0;
    atomic_store(&p->quit, 0);
}

void nconv__pool_resize(nconv_pool *p, int workers) {
    pool_stop(p);
    p->pid = (long)getpid();
    if (workers > NCONV_MAX_THREADS - 1) workers = NCONV_MAX_THREADS - 1;
    for (int i = 0; i < workers; i++) {
        p->slot[i] = (struct nconv_pool_slot){p, i + 1, atomic_load(&p->gen)};
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
        /* Workers are idle here (the last job's pending reached 0): the fields are ours. */
        pool->fn = fn, pool->arg = arg, pool->nthreads = threads;
        atomic_store_explicit(&pool->pending, pool->workers, memory_order_relaxed);
        atomic_fetch_add_explicit(&pool->gen, 1u, memory_order_release);
        /* Spinning workers see gen; sleeping ones need the broadcast (no system call without them). */
        pthread_mutex_lock(&pool->m);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->m);
        fn(arg, 0, threads);
        const int64_t t0 = now_ns();
        for (int64_t i = 1; atomic_load_explicit(&pool->pending, memory_order_acquire) != 0; i++) {
            cpu_relax();
            if (i % 64 == 0 && now_ns() - t0 > SPIN_NS) {
                pthread_mutex_lock(&pool->m);
                while (atomic_load(&pool->pending)) pthread_cond_wait(&pool->done, &pool->m);
                pthread_mutex_unlock(&pool->m);
                break;
            }
        }
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

int nconv__parallel_width(const nconv_exec *e) {
    return e->threads < NCONV_MAX_THREADS ? e->threads : NCONV_MAX_THREADS;
}

void nconv__split(int64_t n, int tid, int nthreads, int64_t *begin, int64_t *end) {
    const int64_t q = n / nthreads, r = n % nthreads;
    *begin = tid * q + (tid < r ? tid : r);
    *end = *begin + q + (tid < r ? 1 : 0);
}

void nconv__add_chunks(int tid, int nthreads, float *acc, int64_t n, int64_t chunks, double *lanes,
                       const double *lanes_more, int64_t nl) {
    int64_t a, b;
    nconv__split(n, tid, nthreads, &a, &b);
    for (int64_t ch = 1; ch < chunks; ch++)
        for (int64_t i = a; i < b; i++) acc[i] += acc[ch * n + i];
    if (!lanes) return;
    nconv__split(nl, tid, nthreads, &a, &b);
    for (int64_t ch = 1; ch < chunks; ch++)
        for (int64_t i = a; i < b; i++) lanes[i] += lanes_more[(ch - 1) * nl + i];
}

void nconv__share_split(nconv_share *shares, int64_t n, int nthreads) {
    for (int t = 0; t < nthreads; t++) {
        int64_t begin, end;
        nconv__split(n, t, nthreads, &begin, &end);
        atomic_init(&shares[t].next, begin);
        shares[t].end = end;
    }
}

int64_t nconv__share_claim(nconv_share *shares, int tid, int nthreads) {
    for (int k = 0; k < nthreads; k++) {
        nconv_share *s = &shares[(tid + k) % nthreads];
        if (atomic_load_explicit(&s->next, memory_order_relaxed) >= s->end) continue;
        const int64_t i = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed);
        if (i < s->end) return i;
    }
    return -1;
}
