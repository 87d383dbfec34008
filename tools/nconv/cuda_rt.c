/* The CUDA runtime through dlopen: the few calls the tool and the GPU tests need, with
 * the runtime's types reduced to what their ABI is (an int status, opaque handles). */
#include "cuda_rt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

enum { MEMCPY_H2D = 1, MEMCPY_D2H = 2 }; /* cudaMemcpyKind */

static struct {
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*Memcpy)(void *, const void *, size_t, int);
    int (*Memset)(void *, int, size_t);
    int (*DeviceSynchronize)(void);
    int (*EventCreate)(void **);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*EventElapsedTime)(float *, void *, void *);
    int (*EventDestroy)(void *);
    const char *(*GetErrorName)(int);
} rt;
static int last_error;

int cuda_rt_load(char *why, size_t cap) {
    if (rt.Malloc) return 0;
    const char *env = getenv("NCONV_CUDART_LIBRARY");
    const char *path = env && *env ? env : "libcudart.so.13";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, cap, "cannot load %s", path);
        return -1;
    }
    static const char *const names[] = {"cudaMalloc",      "cudaFree",           "cudaMemcpy",
                                        "cudaMemset",      "cudaDeviceSynchronize", "cudaEventCreate",
                                        "cudaEventRecord", "cudaEventSynchronize", "cudaEventElapsedTime",
                                        "cudaEventDestroy", "cudaGetErrorName"};
    void **slots[] = {(void **)(void *)&rt.Malloc,           (void **)(void *)&rt.Free,
                      (void **)(void *)&rt.Memcpy,           (void **)(void *)&rt.Memset,
                      (void **)(void *)&rt.DeviceSynchronize, (void **)(void *)&rt.EventCreate,
                      (void **)(void *)&rt.EventRecord,      (void **)(void *)&rt.EventSynchronize,
                      (void **)(void *)&rt.EventElapsedTime, (void **)(void *)&rt.EventDestroy,
                      (void **)(void *)&rt.GetErrorName};
    void *found[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(found[i] = dlsym(h, names[i]))) {
            snprintf(why, cap, "%s has no symbol %s", path, names[i]);
            dlclose(h);
            return -1;
        }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) *slots[i] = found[i];
    return 0;
}

static int ok(int e) {
    if (e) last_error = e;
    return e ? -1 : 0;
}

void *cuda_rt_malloc(size_t bytes) {
    void *p = NULL;
    return ok(rt.Malloc(&p, bytes ? bytes : 1)) ? NULL : p;
}

void cuda_rt_free(void *p) {
    if (p) rt.Free(p);
}

int cuda_rt_to_device(void *dst, const void *src, size_t bytes) { return ok(rt.Memcpy(dst, src, bytes, MEMCPY_H2D)); }
int cuda_rt_to_host(void *dst, const void *src, size_t bytes) { return ok(rt.Memcpy(dst, src, bytes, MEMCPY_D2H)); }
int cuda_rt_memset(void *dst, int value, size_t bytes) { return ok(rt.Memset(dst, value, bytes)); }
int cuda_rt_synchronize(void) { return ok(rt.DeviceSynchronize()); }

double cuda_rt_time(int (*fn)(void *), void *arg, int reps) {
    void *t0 = NULL, *t1 = NULL;
    float ms = -1;
    int good = !ok(rt.EventCreate(&t0)) && !ok(rt.EventCreate(&t1)) && !ok(rt.EventRecord(t0, NULL));
    for (int r = 0; good && r < reps; r++) good = !fn(arg);
    good = good && !ok(rt.EventRecord(t1, NULL)) && !ok(rt.EventSynchronize(t1)) &&
           !ok(rt.EventElapsedTime(&ms, t0, t1));
    if (t0) rt.EventDestroy(t0);
    if (t1) rt.EventDestroy(t1);
    return good ? ms : -1;
}

const char *cuda_rt_error(void) { return rt.GetErrorName && last_error ? rt.GetErrorName(last_error) : "none"; }
