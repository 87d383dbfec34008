// The padding modes cuDNN's convolution lacks (reflect, replicate, circular), as a
// step before it: nconv_pad_* writes the padded input (a gather: each padded element
// reads the element its mode maps it to), nconv_fold_* the gradient of that gather
// (each input element sums, in a fixed order, the padded elements mapped to it: no
// atomics, so the result does not depend on the schedule). Compiled to PTX at build
// time and loaded through the driver API, so the library links no CUDA.
#include "elements.cuh"
#include "geom.h"
#include "pad_index.h"

template <typename T>
__device__ void pad(const T *x, T *xp, const nconv_pad_geom &g) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, xo = 0, po = 0;
        for (int a = 2; a >= 0; a--) {
            const int64_t p = r % g.out[a];
            r /= g.out[a];
            xo += nconv__map_index(p - g.pb[a], g.in[a], g.mode) * g.xs[2 + a];
            po += p * g.ps[2 + a];
        }
        const int64_t c = r % g.c, n = r / g.c;
        xp[po + c * g.ps[1] + n * g.ps[0]] = x[xo + c * g.xs[1] + n * g.xs[0]];
    }
}

__device__ __forceinline__ int64_t next(int64_t p, int64_t x, int a, const nconv_pad_geom &g) {
    return nconv__pad_next_source(p, x, g.pb[a], g.in[a], g.out[a], g.mode);
}

template <typename T, typename Acc>
__device__ void fold(const T *dxp, T *dx, const nconv_pad_geom &g) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, xc[3];
        for (int a = 2; a >= 0; a--) xc[a] = r % g.in[a], r /= g.in[a];
        const int64_t c = r % g.c, n = r / g.c;
        const T *src = dxp + n * g.ps[0] + c * g.ps[1];
        Acc sum = 0;
#define SOURCES(v, a) \
    for (int64_t v = next(-1, xc[a], a, g); v >= 0; v = next(v, xc[a], a, g))
        SOURCES(d, 0) SOURCES(h, 1) SOURCES(w, 2)
                    sum += load(src + d * g.ps[2] + h * g.ps[3] + w * g.ps[4]);
        store(dx + n * g.xs[0] + c * g.xs[1] + xc[0] * g.xs[2] + xc[1] * g.xs[3] + xc[2] * g.xs[4], sum);
    }
}

extern "C" {
__global__ void nconv_pad_b2(const unsigned short *x, unsigned short *xp, nconv_pad_geom g) { pad(x, xp, g); }
__global__ void nconv_pad_b4(const unsigned *x, unsigned *xp, nconv_pad_geom g) { pad(x, xp, g); }
__global__ void nconv_pad_b8(const unsigned long long *x, unsigned long long *xp, nconv_pad_geom g) { pad(x, xp, g); }
__global__ void nconv_fold_f32(const float *dxp, float *dx, nconv_pad_geom g) { fold<float, float>(dxp, dx, g); }
__global__ void nconv_fold_f64(const double *dxp, double *dx, nconv_pad_geom g) { fold<double, double>(dxp, dx, g); }
__global__ void nconv_fold_f16(const __half *dxp, __half *dx, nconv_pad_geom g) { fold<__half, float>(dxp, dx, g); }
__global__ void nconv_fold_bf16(const unsigned short *dxp, unsigned short *dx, nconv_pad_geom g) {
    fold<unsigned short, float>(dxp, dx, g);
}
}
