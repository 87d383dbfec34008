// The elementwise steps of nconv's CUDA calls that surround cuDNN's convolutions: the forward
// epilogue where cuDNN fuses none (and plain copies and scalings), relu's gradient mask, and
// the bias gradient's channel sums (one block per channel, a fixed order of additions: the
// result does not depend on the schedule). Compiled to PTX at build time, as pad.cu.
#include "elements.cuh"
#include "geom.h"

// Offsets of element i (C order over dims) under three sets of strides, and its channel.
__device__ __forceinline__ void offsets(int64_t i, const nconv_ew_geom &g, int64_t *o, int64_t *a, int64_t *b,
                                        int64_t *c) {
    *o = *a = *b = 0;
    for (int d = 4; d >= 0; d--) {
        const int64_t k = i % g.dims[d];
        i /= g.dims[d];
        *o += k * g.os[d], *a += k * g.as[d], *b += k * g.bs[d];
        if (d == 1) *c = k;
    }
}

template <typename T, typename Acc>
__device__ void epilogue(T *out, const T *a, const T *bias, const T *b, const nconv_ew_geom &g) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t oo, ao, bo, c;
        offsets(i, g, &oo, &ao, &bo, &c);
        Acc v = g.has_a ? (Acc)g.alpha_a * load(a + ao) : (Acc)0;
        if (g.has_bias) v += load(bias + c * g.bias_stride);
        if (g.has_b) v += (Acc)g.alpha_b * load(b + bo);
        if (g.relu && !(v > 0) && v == v) v = 0; // relu keeps NaN, as PyTorch's
        store(out + oo, v);
    }
}

template <typename T>
__device__ void mask(T *out, const T *a, const T *b, const nconv_ew_geom &g) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t oo, ao, bo, c;
        offsets(i, g, &oo, &ao, &bo, &c);
        out[oo] = load(b + bo) <= 0 ? T(0) : a[ao]; // as threshold_backward: a NaN output passes the gradient
    }
}

enum { SUM_THREADS = 256 };

template <typename T, typename Acc>
__device__ void chsum(T *out, const T *a, const nconv_ew_geom &g) {
    __shared__ Acc part[SUM_THREADS];
    const int64_t sp = g.dims[2] * g.dims[3] * g.dims[4], per_channel = g.dims[0] * sp;
    for (int64_t c = blockIdx.x; c < g.total; c += gridDim.x) {
        Acc s = 0;
        for (int64_t i = threadIdx.x; i < per_channel; i += SUM_THREADS) {
            int64_t r = i, off = c * g.as[1];
            for (int d = 4; d >= 2; d--) off += (r % g.dims[d]) * g.as[d], r /= g.dims[d];
            s += load(a + off + r * g.as[0]);
        }
        part[threadIdx.x] = s;
        __syncthreads();
        for (int w = SUM_THREADS / 2; w > 0; w /= 2) {
            if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) store(out + c * g.bias_stride, part[0]);
        __syncthreads(); /* part is reused by the next channel */
    }
}

#define VARIANTS(name, T, Acc)                                                                                     \
    __global__ void nconv_epilogue_##name(T *out, const T *a, const T *bias, const T *b, nconv_ew_geom g) {       \
        epilogue<T, Acc>(out, a, bias, b, g);                                                                       \
    }                                                                                                               \
    __global__ void nconv_mask_##name(T *out, const T *a, const T *b, nconv_ew_geom g) { mask<T>(out, a, b, g); } \
    __global__ void __launch_bounds__(SUM_THREADS) nconv_chsum_##name(T *out, const T *a, nconv_ew_geom g) {     \
        chsum<T, Acc>(out, a, g);                                                                                   \
    }

extern "C" {
VARIANTS(f32, float, float)
VARIANTS(f64, double, double)
VARIANTS(f16, __half, float)
VARIANTS(bf16, unsigned short, float)
}
