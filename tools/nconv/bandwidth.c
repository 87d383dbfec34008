/*
 * The memory bandwidth of this machine, as STREAM's triad measures it:
 * c = a + s * b over arrays far larger than the last-level cache, every
 * thread on its own slice, all threads at once, best of a few passes. Bytes
 * counted are those the loop names (two read, one written), as STREAM counts
 * them; the write's read for ownership is not. Memory-bound layers
 * (depthwise, 1x1 at small channel counts) are judged against this figure.
 */
#include "cli.h"

#include <pthread.h>
#include <stdlib.h>

enum { FLOATS = 16 << 20, PASSES = 4, MAX_THREADS = 64 }; /* 64 MiB per array */

typedef struct slice {
    float *a, *b, *c;
    int64_t n;
    int pass; /* 0: first touch (pages placed near the thread that uses them) */
} slice;

static void *triad(void *arg) {
    const slice *s = arg;
    float *restrict a = s->a, *restrict b = s->b, *restrict c = s->c;
    if (s->pass == 0) {
        for (int64_t i = 0; i < s->n; i++) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.0f;
        return NULL;
    }
    const float k = 0.5f + (float)s->pass;
    for (int64_t i = 0; i < s->n; i++) c[i] = a[i] + k * b[i];
    return NULL;
}

double memory_bandwidth_gbs(int threads) {
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    float *buf = malloc(sizeof(float) * 3 * (size_t)FLOATS);
    if (!buf) return 0;
    slice s[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    double best = 0;
    for (int pass = 0; pass <= PASSES && best >= 0; pass++) {
        const double t0 = now_seconds();
        int started = 1;
        for (int t = 0; t < threads; t++) {
            const int64_t lo = (int64_t)FLOATS * t / threads, hi = (int64_t)FLOATS * (t + 1) / threads;
            s[t] = (slice){buf + lo, buf + FLOATS + lo, buf + 2 * (int64_t)FLOATS + lo, hi - lo, pass};
        }
        while (started < threads && !pthread_create(&tid[started], NULL, triad, &s[started])) started++;
        triad(&s[0]);
        for (int t = 1; t < started; t++) pthread_join(tid[t], NULL);
        const double gbs = 3.0 * sizeof(float) * FLOATS / (now_seconds() - t0) * 1e-9;
        if (started < threads) best = -1; /* a thread could not start: unknown */
        else if (pass > 0 && gbs > best) best = gbs;
    }
    free(buf);
    return best > 0 ? best : 0;
}
