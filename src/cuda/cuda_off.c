/* A build without the cuDNN backend (NCONV_CUDNN off, or no cuDNN headers found): CUDA
 * contexts cannot be made, so no other CUDA entry point is reached. */
#include "../internal.h"

nconv_status nconv__cuda_open(int device, nconv_cuda **out) {
    (void)device, (void)out;
    return nconv__error(NCONV_UNSUPPORTED, "nconv: this build has no CUDA backend (configured with NCONV_CUDNN off, "
                                           "or without the CUDA toolkit's cuDNN headers)");
}

void nconv__cuda_close(nconv_context *ctx, nconv_cuda *c) { (void)ctx, (void)c; }
void nconv__cuda_release(nconv_context *ctx, nconv_cuda *c) { (void)ctx, (void)c; }
int nconv__cuda_device(const nconv_cuda *c) { (void)c; return -1; }
nconv_status nconv__cuda_set_stream(nconv_cuda *c, void *stream) {
    (void)c, (void)stream;
    return NCONV_INTERNAL_ERROR;
}
void nconv__cuda_set_tf32(nconv_cuda *c, int allow) { (void)c, (void)allow; }

nconv_status nconv__cuda_forward(nconv_context *ctx, const nconv_oplan *o, const nconv_fwd_ops *v, void *workspace,
                                 size_t workspace_size) {
    (void)ctx, (void)o, (void)v, (void)workspace, (void)workspace_size;
    return NCONV_INTERNAL_ERROR;
}

nconv_status nconv__cuda_backward(nconv_context *ctx, const nconv_oplan *o, const nconv_bwd_ops *v, void *workspace,
                                  size_t workspace_size) {
    (void)ctx, (void)o, (void)v, (void)workspace, (void)workspace_size;
    return NCONV_INTERNAL_ERROR;
}

void *nconv__cuda_temp(nconv_context *ctx, size_t bytes) {
    (void)ctx, (void)bytes;
    return NULL;
}
void nconv__cuda_temp_free(nconv_context *ctx, void *p) { (void)ctx, (void)p; }
nconv_status nconv__cuda_pointwise(nconv_context *ctx, const nconv_problem *p, const int64_t *shape,
                                   const nconv_tensor *a, const nconv_tensor *mask, const nconv_tensor *bias,
                                   const nconv_tensor *z, double alpha, const nconv_tensor *out) {
    (void)ctx, (void)p, (void)shape, (void)a, (void)mask, (void)bias, (void)z, (void)alpha, (void)out;
    return NCONV_INTERNAL_ERROR;
}
nconv_status nconv__cuda_double_backward(nconv_context *ctx, const nconv_problem *p, const nconv_tensor *x,
                                         const nconv_tensor *w, const nconv_tensor *dy, const nconv_tensor *ggx,
                                         const nconv_tensor *ggw, const nconv_tensor *ggb, const nconv_tensor *ggy,
                                         const nconv_tensor *gx, const nconv_tensor *gw) {
    (void)ctx, (void)p, (void)x, (void)w, (void)dy, (void)ggx, (void)ggw, (void)ggb, (void)ggy, (void)gx, (void)gw;
    return NCONV_INTERNAL_ERROR;
}
nconv_status nconv__cuda_forward_jvp(nconv_context *ctx, const nconv_problem *p, const nconv_epilogue *epi,
                                     const nconv_tensor *x, const nconv_tensor *w, const nconv_tensor *bias,
                                     const nconv_tensor *z, const nconv_tensor *tx, const nconv_tensor *tw,
                                     const nconv_tensor *tb, const nconv_tensor *tz, const nconv_tensor *y,
                                     const nconv_tensor *ty) {
    (void)ctx, (void)p, (void)epi, (void)x, (void)w, (void)bias, (void)z, (void)tx, (void)tw, (void)tb, (void)tz,
        (void)y, (void)ty;
    return NCONV_INTERNAL_ERROR;
}
