// Loads and stores of nconv's element types for its CUDA kernels: f16 and bf16 compute in f32
// (bf16 stores round to nearest even and keep NaN quiet), f32 and f64 as they are.
#ifndef NCONV_KERNEL_ELEMENTS_CUH
#define NCONV_KERNEL_ELEMENTS_CUH

#include <cuda_fp16.h>

__device__ __forceinline__ float load(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float load(const unsigned short *p) { return __uint_as_float((unsigned)*p << 16); }
__device__ __forceinline__ float load(const float *p) { return *p; }
__device__ __forceinline__ double load(const double *p) { return *p; }
__device__ __forceinline__ void store(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(unsigned short *p, float v) { // bf16, round to nearest even
    const unsigned u = __float_as_uint(v);
    *p = (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(double *p, double v) { *p = v; }

#endif
