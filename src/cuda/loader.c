/*
 * The CUDA runtime, cuDNN and the CUDA driver, loaded at run time: a library
 * built with the backend links none of them, so it runs where they are absent,
 * and its CUDA calls then fail with NCONV_UNSUPPORTED and the loader's reason.
 */
#include "cuda_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nconv_cuda_lib lib;
static nconv_cuda_driver drv;
static char why_driver[512];
static int have_driver;
static pthread_once_t once_driver = PTHREAD_ONCE_INIT;
static char why_cudnn[512], why_cudart[512];
static int have_cudnn, have_cudart;
static pthread_once_t once_cudnn = PTHREAD_ONCE_INIT, once_cudart = PTHREAD_ONCE_INIT;

static const char *library_name(const char *env, const char *name) {
    const char *e = getenv(env);
    return e && *e ? e : name;
}

/* Resolves each symbol of names into the pointers of slots; 0 and the reason in why when
 * the library or a symbol is missing. */
static int resolve(const char *env, const char *file, const char *const *names, void **slots, int n, char *why,
                   size_t cap) {
    const char *path = library_name(env, file);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, cap, "cannot load %s (%s; %s names another file)", path, e ? e : "not found", env);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        slots[i] = dlsym(h, names[i]);
        if (!slots[i]) {
            snprintf(why, cap, "%s has no symbol %s", path, names[i]);
            dlclose(h);
            return 0;
        }
    }
    return 1; /* kept loaded for the life of the process */
}

/* Pointers to function pointers are stored through void *: POSIX's dlsym contract. */
#define SLOT(f) ((void **)(void *)&lib.f)

static void load_cudnn(void) {
    static const char *const names[] = {
        "cudnnGetVersion",          "cudnnGetErrorString",       "cudnnGetLastErrorString",
        "cudnnCreate",              "cudnnDestroy",              "cudnnSetStream",
        "cudnnBackendCreateDescriptor", "cudnnBackendDestroyDescriptor", "cudnnBackendFinalize",
        "cudnnBackendSetAttribute", "cudnnBackendGetAttribute",  "cudnnBackendExecute"};
    void **slots[] = {SLOT(cudnnGetVersion),        SLOT(cudnnGetErrorString),     SLOT(cudnnGetLastErrorString),
                      SLOT(cudnnCreate),            SLOT(cudnnDestroy),            SLOT(cudnnSetStream),
                      SLOT(BackendCreateDescriptor), SLOT(BackendDestroyDescriptor), SLOT(BackendFinalize),
                      SLOT(BackendSetAttribute),    SLOT(BackendGetAttribute),     SLOT(BackendExecute)};
    enum { N = sizeof names / sizeof names[0] };
    void *found[N];
    have_cudnn = resolve("NCONV_CUDNN_LIBRARY", "libcudnn.so.9", names, found, N, why_cudnn, sizeof why_cudnn);
    if (!have_cudnn) return;
    for (int i = 0; i < N; i++) *slots[i] = found[i];
    if (lib.cudnnGetVersion() / 10000 != 9) {
        snprintf(why_cudnn, sizeof why_cudnn, "%s is cuDNN %zu, not 9.x",
                 library_name("NCONV_CUDNN_LIBRARY", "libcudnn.so.9"), lib.cudnnGetVersion());
        have_cudnn = 0;
    }
}

static void load_cudart(void) {
    pthread_once(&once_cudnn, load_cudnn);
    static const char *const names[] = {
        "cudaGetDeviceCount", "cudaSetDevice",    "cudaGetDevice",        "cudaMalloc",
        "cudaFree",           "cudaMemsetAsync",  "cudaMemset2DAsync",    "cudaStreamSynchronize",
        "cudaPointerGetAttributes", "cudaGetLastError", "cudaGetErrorString", "cudaGetErrorName",
        "cudaEventCreate",    "cudaEventRecord",  "cudaEventSynchronize", "cudaEventElapsedTime",
        "cudaEventDestroy"};
    void **slots[] = {SLOT(GetDeviceCount), SLOT(SetDevice),     SLOT(GetDevice),         SLOT(Malloc),
                      SLOT(Free),           SLOT(MemsetAsync),   SLOT(Memset2DAsync),     SLOT(StreamSynchronize),
                      SLOT(PointerGetAttributes), SLOT(GetLastError), SLOT(GetErrorString), SLOT(GetErrorName),
                      SLOT(EventCreate),    SLOT(EventRecord),   SLOT(EventSynchronize),  SLOT(EventElapsedTime),
                      SLOT(EventDestroy)};
    enum { N = sizeof names / sizeof names[0] };
    void *found[N];
    have_cudart = resolve("NCONV_CUDART_LIBRARY", "libcudart.so.13", names, found, N, why_cudart, sizeof why_cudart);
    if (have_cudart)
        for (int i = 0; i < N; i++) *slots[i] = found[i];
}

const nconv_cuda_lib *nconv__cudnn_lib(void) {
    pthread_once(&once_cudnn, load_cudnn);
    if (have_cudnn) return &lib;
    nconv__error(NCONV_UNSUPPORTED, "nconv: the cuDNN backend is unavailable: %s", why_cudnn);
    return NULL;
}

const nconv_cuda_lib *nconv__cuda_lib(void) {
    pthread_once(&once_cudart, load_cudart);
    if (!have_cudnn) return nconv__cudnn_lib();
    if (have_cudart) return &lib;
    nconv__error(NCONV_UNSUPPORTED, "nconv: the CUDA runtime is unavailable: %s", why_cudart);
    return NULL;
}

nconv_status nconv__cudnn_fail(const nconv_cuda_lib *l, cudnnStatus_t s, const char *what) {
    char detail[256] = "";
    l->cudnnGetLastErrorString(detail, sizeof detail);
    /* cuDNN's last-error text may run over several lines: the first says what failed. */
    detail[strcspn(detail, "\n")] = '\0';
    return nconv__error(s == CUDNN_STATUS_NOT_SUPPORTED || (s / 1000) * 1000 == CUDNN_STATUS_NOT_SUPPORTED
                            ? NCONV_UNSUPPORTED
                            : NCONV_INTERNAL_ERROR,
                        "nconv: cuDNN %zu: %s: %s%s%s", l->cudnnGetVersion(), what, l->cudnnGetErrorString(s),
                        *detail ? ": " : "", detail);
}

static void load_driver(void) {
    static const char *const names[] = {"cuModuleLoadData", "cuModuleGetFunction", "cuModuleUnload", "cuLaunchKernel",
                                        "cuGetErrorName"};
    void **slots[] = {(void **)(void *)&drv.ModuleLoadData, (void **)(void *)&drv.ModuleGetFunction,
                      (void **)(void *)&drv.ModuleUnload, (void **)(void *)&drv.LaunchKernel,
                      (void **)(void *)&drv.GetErrorName};
    enum { N = sizeof names / sizeof names[0] };
    void *found[N];
    have_driver = resolve("NCONV_CUDA_DRIVER_LIBRARY", "libcuda.so.1", names, found, N, why_driver, sizeof why_driver);
    if (have_driver)
        for (int i = 0; i < N; i++) *slots[i] = found[i];
}

const nconv_cuda_driver *nconv__cuda_driver(void) {
    pthread_once(&once_driver, load_driver);
    if (have_driver) return &drv;
    nconv__error(NCONV_UNSUPPORTED, "nconv: the CUDA driver is unavailable: %s", why_driver);
    return NULL;
}
