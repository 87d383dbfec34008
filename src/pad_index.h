/* The padding modes' index maps, shared by the CPU paths and the CUDA padding kernels
 * (src/cuda/kernels/pad.cu), so that both pad alike. Plain C, also compiled as CUDA. */
#ifndef NCONV_PAD_INDEX_H
#define NCONV_PAD_INDEX_H

#include <stdint.h>

#ifdef __CUDACC__
#define NCONV_PAD_FN __host__ __device__ __forceinline__
#else
#define NCONV_PAD_FN static inline
#endif

/* Maps a padded coordinate j (relative to the input's start) of an input axis of size n
 * to the element it reads under mode (an nconv_padding_mode), or -1 for a zero tap. */
NCONV_PAD_FN int64_t nconv__map_index(int64_t j, int64_t n, int mode) {
    if (j >= 0 && j < n) return j;
    switch (mode) {
    case 1: return j < 0 ? -j : 2 * (n - 1) - j;  /* reflect */
    case 2: return j < 0 ? 0 : n - 1;             /* replicate */
    case 3: return ((j % n) + n) % n;             /* circular */
    default: return -1;                           /* zeros */
    }
}

/* The gradient of padding gathers back: the padded position after p (p = -1: the first),
 * in increasing order, along an axis of input size n, padding pb at its beginning and
 * padded size out, that reads input coordinate x; -1 after the last. The interior holds
 * only x's own position; the pads are scanned. */
NCONV_PAD_FN int64_t nconv__pad_next_source(int64_t p, int64_t x, int64_t pb, int64_t n, int64_t out, int mode) {
    for (int64_t q = p + 1; q < out; q++) {
        if (q >= pb && q < pb + n) {
            if (q <= x + pb) return x + pb < out ? x + pb : -1;
            q = pb + n - 1;
            continue;
        }
        if (nconv__map_index(q - pb, n, mode) == x) return q;
    }
    return -1;
}

#endif
