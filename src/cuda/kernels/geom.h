/* The geometry of nconv's own CUDA kernels (pad.cu, elementwise.cu), shared by the kernels
 * and their host side: rank-5 tensors [N, C, D, H, W] (unit dims in front of a 1-d or 2-d
 * problem), strides in elements. */
#ifndef NCONV_KERNEL_GEOM_H
#define NCONV_KERNEL_GEOM_H

#include <stdint.h>

/* The padding modes' gather (pad) and its gradient (fold). */
typedef struct nconv_pad_geom {
    int64_t n, c;          /* batch and channels */
    int64_t in[3];         /* the input's spatial size */
    int64_t out[3];        /* the padded size: pad_begin + in + pad_end */
    int64_t pb[3];         /* padding at the beginning */
    int64_t xs[5], ps[5];  /* strides (elements) of the input and of the padded tensor */
    int64_t total;         /* elements the kernel writes: of the padded tensor (pad) or the input (fold) */
    int mode;              /* nconv_padding_mode: 1 reflect, 2 replicate, 3 circular */
} nconv_pad_geom;

/* Elementwise steps over tensors of one shape `dims`:
 *   epilogue: out = act(alpha_a * a + bias[c] + alpha_b * b) (a NULL: zeros; act: relu or none)
 *   mask:     out = b <= 0 ? 0 : a (relu's gradient: a = dy, b = y; a NaN y passes dy)
 *   chsum:    out[c] = sum of a over every dim but c (out strided by bias_stride) */
typedef struct nconv_ew_geom {
    int64_t dims[5];
    int64_t os[5], as[5], bs[5]; /* strides of out, a and b */
    int64_t bias_stride;         /* elements between channels of bias (epilogue) or out (chsum) */
    double alpha_a, alpha_b;
    int has_a, has_b, has_bias, relu;
    int64_t total;               /* elements of out (epilogue, mask); channels (chsum) */
} nconv_ew_geom;

#endif
