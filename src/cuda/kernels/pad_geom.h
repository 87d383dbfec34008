/* The geometry of the padding kernels (pad.cu), shared by the kernels and their host side:
 * rank-5 tensors [N, C, D, H, W] (unit dims in front of a 1-d or 2-d problem). */
#ifndef NCONV_PAD_GEOM_H
#define NCONV_PAD_GEOM_H

#include <stdint.h>

typedef struct nconv_pad_geom {
    int64_t n, c;          /* batch and channels */
    int64_t in[3];         /* the input's spatial size */
    int64_t out[3];        /* the padded size: pad_begin + in + pad_end */
    int64_t pb[3];         /* padding at the beginning */
    int64_t xs[5], ps[5];  /* strides (elements) of the input and of the padded tensor */
    int64_t total;         /* elements the kernel writes: of the padded tensor (pad) or the input (fold) */
    int mode;              /* nconv_padding_mode: 1 reflect, 2 replicate, 3 circular */
} nconv_pad_geom;

#endif
