/*
 * A CUDA context's state: its device, stream, cuDNN handle, settings, the cache of execution
 * plans and the device memory it keeps between calls.
 */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>

nconv_status nconv__cuda_fail(const nconv_cuda_lib *lib, cudaError_t e, const char *what) {
    return nconv__error(e == cudaErrorMemoryAllocation ? NCONV_OUT_OF_MEMORY : NCONV_UNSUPPORTED,
                        "nconv: %s failed: %s (%s)", what, lib->GetErrorString(e), lib->GetErrorName(e));
}

nconv_status nconv__cuda_open(int device, nconv_cuda **out) {
    const nconv_cuda_lib *lib = nconv__cuda_lib();
    if (!lib) return NCONV_UNSUPPORTED;
    int count = 0;
    cudaError_t e = lib->GetDeviceCount(&count);
    if (e != cudaSuccess) {
        lib->GetLastError(); /* a failed device query is sticky in the runtime's last error */
        return nconv__cuda_fail(lib, e, "cudaGetDeviceCount");
    }
    if (device < 0 || device >= count)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: device = %d: this machine has %d CUDA device%s", device,
                            count, count == 1 ? "" : "s");
    if ((e = lib->SetDevice(device)) != cudaSuccess) return nconv__cuda_fail(lib, e, "cudaSetDevice");
    nconv_cuda *c = calloc(1, sizeof *c);
    if (!c) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate a CUDA context");
    c->lib = lib, c->device = device;
    cudnnStatus_t s = lib->cudnnCreate(&c->handle);
    if (s != CUDNN_STATUS_SUCCESS) {
        free(c);
        return nconv__cudnn_fail(lib, s, "cudnnCreate");
    }
    if (pthread_mutex_init(&c->lock, NULL)) {
        lib->cudnnDestroy(c->handle);
        free(c);
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot create the CUDA context's mutex");
    }
    *out = c;
    return NCONV_OK;
}

void *nconv__cuda_dev_alloc(nconv_context *ctx, nconv_cuda *c, size_t bytes) {
    if (nconv__ctx_has_allocator(ctx)) return nconv__alloc(ctx, bytes);
    void *p = NULL;
    if (c->lib->SetDevice(c->device) != cudaSuccess || c->lib->Malloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        c->lib->GetLastError();
        return NULL;
    }
    return p;
}

void nconv__cuda_dev_free(nconv_context *ctx, nconv_cuda *c, void *p) {
    if (!p) return;
    if (nconv__ctx_has_allocator(ctx)) nconv__free(ctx, p);
    else c->lib->Free(p);
}

void nconv__cuda_release(nconv_context *ctx, nconv_cuda *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        if (c->cache[i].plan) c->lib->BackendDestroyDescriptor(c->cache[i].plan);
        nconv__cudnn_graph_destroy(c->lib, &c->cache[i].graph);
    }
    c->n = 0;
    nconv__cuda_dev_free(ctx, c, c->ws);
    c->ws = NULL, c->ws_size = 0;
}

void nconv__cuda_close(nconv_context *ctx, nconv_cuda *c) {
    if (!c) return;
    nconv__cuda_release(ctx, c);
    for (int i = 0; i < 2; i++)
        if (c->modules[i]) nconv__cuda_driver()->ModuleUnload(c->modules[i]);
    free(c->cache);
    c->lib->cudnnDestroy(c->handle);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int nconv__cuda_device(const nconv_cuda *c) { return c->device; }

nconv_status nconv__cuda_set_stream(nconv_cuda *c, void *stream) {
    const cudnnStatus_t s = c->lib->cudnnSetStream(c->handle, (cudaStream_t)stream);
    if (s != CUDNN_STATUS_SUCCESS) return nconv__cudnn_fail(c->lib, s, "cudnnSetStream");
    c->stream = (cudaStream_t)stream;
    return NCONV_OK;
}

void nconv__cuda_set_tf32(nconv_cuda *c, int allow) { c->allow_tf32 = allow != 0; }

void *nconv__cuda_temp(nconv_context *ctx, size_t bytes) {
    if (nconv__check_memory(ctx, bytes, "a CUDA temporary")) return NULL;
    void *p = nconv__cuda_dev_alloc(ctx, nconv__ctx_cuda(ctx), bytes);
    if (!p) nconv__error(NCONV_OUT_OF_MEMORY, "nconv: cannot allocate %zu bytes of device memory", bytes);
    return p;
}

void nconv__cuda_temp_free(nconv_context *ctx, void *p) { nconv__cuda_dev_free(ctx, nconv__ctx_cuda(ctx), p); }
