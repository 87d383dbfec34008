/* Minimal test harness: CHECK records a failure with its location and goes on;
 * test_summary prints "N passed, N failed" and gives the exit status. */
#ifndef NCONV_TEST_UTIL_H
#define NCONV_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nconv.h"

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (cond) {                                                                       \
            test_passed++;                                                                \
        } else {                                                                          \
            test_failed++;                                                                \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            printf(__VA_ARGS__);                                                          \
            printf("\n");                                                                 \
        }                                                                                 \
    } while (0)

/* A call expected to fail with `status` and a message containing `needle`. */
#define CHECK_ERROR(call, status, needle)                                                          \
    do {                                                                                           \
        nconv_status st_ = (call);                                                                 \
        CHECK(st_ == (status) && strstr(nconv_last_error(), (needle)) != NULL,                     \
              "status %d (want %d), message '%s' (want '%s')", (int)st_, (int)(status),            \
              nconv_last_error(), (needle));                                                       \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

/* NCONV_TEST_LIGHT=1: the valgrind runs (see tests/CMakeLists.txt) */
static inline int test_light(void) {
    const char *e = getenv("NCONV_TEST_LIGHT");
    return e && !strcmp(e, "1");
}

/* Whether to run the cases whose operands are hundreds of megabytes (outputs large enough to be
 * written with streamed stores): not in light runs nor under ThreadSanitizer, which look for
 * other faults and take minutes over each. */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
static inline int test_big_cases(void) {
#ifdef TEST_TSAN
    return 0;
#else
    return !test_light();
#endif
}

/* Seconds on a monotonic clock, for the tests' own timings. */
static inline double test_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n, or a quarter of it (at least 1) in light runs. */
static inline int test_iterations(int n) { return test_light() ? (n + 3) / 4 : n; }

static inline uint64_t test_rng(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline double test_uniform(uint64_t *s) { return (double)(test_rng(s) >> 11) * 0x1p-52 - 1.0; }

/* Integer in [lo, hi]. */
static inline int64_t test_int(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(test_rng(s) % (uint64_t)(hi - lo + 1));
}

/* A dense f32 tensor of its own memory: random in [-1, 1) from rng, or `fill` everywhere. */
typedef struct test_buf {
    float *data;
    int64_t n;
    nconv_tensor t;
} test_buf;

static inline void test_buf_make(test_buf *b, int rank, const int64_t *shape, nconv_layout layout, uint64_t *rng,
                                 float fill) {
    b->n = 1;
    for (int i = 0; i < rank; i++) b->n *= shape[i];
    b->data = malloc(sizeof(float) * (size_t)(b->n ? b->n : 1));
    for (int64_t i = 0; i < b->n; i++) b->data[i] = rng ? (float)test_uniform(rng) : fill;
    nconv_tensor_init(&b->t, b->data, rank, shape, layout);
}

/* An allocator (nconv_allocator's user: a test_hook) that counts allocations and fails the
 * fail_at-th (1-based; 0: never). */
typedef struct test_hook {
    int64_t calls, live, fail_at;
} test_hook;

static inline void *test_hook_alloc(void *user, size_t bytes) {
    test_hook *h = user;
    if (++h->calls == h->fail_at) return NULL;
    void *p = malloc(bytes);
    if (p) h->live++;
    return p;
}

static inline void test_hook_free(void *user, void *p) {
    test_hook *h = user;
    h->live--;
    free(p);
}

/* Runs fn(arg) with NCONV_VERBOSE=1 and its stderr in text (at most cap - 1 bytes, NUL-ended):
 * the library's record of the algorithms that ran. Returns fn's result. */
static inline int test_verbose_run(int (*fn)(void *), void *arg, char *text, size_t cap) {
    char path[] = "/tmp/nconv_verboseXXXXXX";
    const int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    setenv("NCONV_VERBOSE", "1", 1);
    const int r = fn(arg);
    unsetenv("NCONV_VERBOSE");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fdopen(fd, "r");
    rewind(f);
    const size_t n = fread(text, 1, cap - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    return r;
}

#endif
