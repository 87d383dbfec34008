/* Depthwise on a run of output pixels, AVX2 + FMA (contract in ../kernels.h):
 * channels are the vector dimension, 8 per register (a tail of fewer takes
 * the loop over taps, with masked loads); a block of up to 8 pixels keeps
 * one accumulator each. With 3, 5 or 7 taps per row, pixels 1 or 2 columns
 * apart and taps 1 column apart (forward, or -1: backward-data), the row's
 * weights stay in registers and each input
 * vector is loaded once for every (pixel, tap) pair that reads it. Columns
 * outside the row read zeros (blocks at the row's ends test each column).
 * The shapes are few and the block sizes powers of two: each is a copy of
 * straight-line code. */
#include "../kernels.h"
#include "avx2_util.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __m256 load(const float *p, __m256i m, int full) { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m); }

/* One column of a row: zeros outside [0, width) unless the block is inside. */
INLINE __m256 column(const float *row, int64_t col, int64_t C, int64_t width, int inside, __m256i m, int full) {
    return inside || (col >= 0 && col < width) ? load(row + col * C, m, full) : _mm256_setzero_ps();
}

/* Pixels i < UR of the block whose pixel 0 reads column col0 + t * SD at tap t. */
INLINE void block_fixed(const int UR, const int KT, const int SP, const int SD, int64_t kr, const float *const *rows,
                        int64_t c, int64_t col0, int64_t width, int inside, int64_t C, __m256i m, const float *w,
                        __m256 *acc) {
    const int qlo = SD > 0 ? 0 : 1 - KT, qhi = (UR - 1) * SP + (SD > 0 ? KT - 1 : 0);
    for (int64_t r = 0; r < kr; r++) {
        __m256 wv[7];
#pragma GCC unroll 7
        for (int t = 0; t < KT; t++) wv[t] = _mm256_loadu_ps(w + (r * KT + t) * C);
#pragma GCC unroll 24
        for (int q = qlo; q <= qhi; q++) {
            const __m256 x = column(rows[r] + c, col0 + q, C, width, inside, m, 1);
#pragma GCC unroll 8
            for (int i = 0; i < UR; i++) {
                const int t = (q - i * SP) * SD;
                if (t >= 0 && t < KT) acc[i] = _mm256_fmadd_ps(x, wv[t], acc[i]);
            }
        }
    }
}

INLINE void block_any(const int UR, int64_t kr, int64_t kt, const float *const *rows, int64_t c, int64_t col0,
                      const nconv_dw_run *g, int inside, int64_t C, __m256i m, int full, const float *w, __m256 *acc) {
    for (int64_t r = 0; r < kr; r++)
        for (int64_t t = 0; t < kt; t++) {
            const __m256 wv = load(w + (r * kt + t) * C, m, full);
#pragma GCC unroll 8
            for (int i = 0; i < UR; i++)
                acc[i] = _mm256_fmadd_ps(
                    column(rows[r] + c, col0 + i * g->step + t * g->tap, C, g->width, inside, m, full), wv, acc[i]);
        }
}

INLINE void store(const int UR, float *out, int64_t os, __m256i m, int full, const __m256 *acc, int relu) {
    const __m256 zero = _mm256_setzero_ps();
    for (int i = 0; i < UR; i++) {
        const __m256 v = relu ? _mm256_max_ps(zero, acc[i]) : acc[i];
        if (full)
            _mm256_storeu_ps(out + i * os, v);
        else
            _mm256_maskstore_ps(out + i * os, m, v);
    }
}

INLINE void block(const int UR, const int KT, const int SP, const int SD, int64_t kr, int64_t kt,
                  const float *const *rows, int64_t c, int64_t col0, const nconv_dw_run *g, int64_t C, __m256i m,
                  int full, const float *w, __m256 vi, float *out, int relu) {
    __m256 acc[8];
    for (int i = 0; i < UR; i++) acc[i] = vi;
    const int inside = nconv__dw_inside(col0, UR, kt, g);
    if (!KT || !full)
        block_any(UR, kr, kt, rows, c, col0, g, inside, C, m, full, w, acc);
    else
        block_fixed(UR, KT, SP, SD, kr, rows, c, col0, g->width, inside, C, m, w, acc);
    store(UR, out, C * g->out_step, m, full, acc, relu);
}

/* The run for one shape (KT 0: any): blocks of 8 pixels, then of 4, 2, 1,
 * each over every channel, so that the rows are read in address order. */
INLINE void run(const int KT, const int SP, const int SD, int64_t channels, int64_t C, int64_t n, int64_t kr,
                int64_t kt, const float *const *rows, const nconv_dw_run *g, const float *w, const float *init,
                float *out, int relu) {
    for (int64_t p = 0; p < n; p += 8) {
        const int64_t col0 = g->first + p * g->step;
        for (int64_t c = 0; c < channels; c += 8) {
            const int full = channels - c >= 8;
            const __m256i m = nconv__avx2_mask(channels - c);
            const __m256 vi = init ? load(init + c, m, full) : _mm256_setzero_ps();
            float *o = out + p * g->out_step * C + c;
            if (n - p >= 8) {
                block(8, KT, SP, SD, kr, kt, rows, c, col0, g, C, m, full, w + c, vi, o, relu);
                continue;
            }
            /* the last pixels: blocks of 4, 2, 1 */
            for (int64_t q = p, u = 4; u >= 1; u /= 2) {
                if (n - q < u) continue;
                const int64_t cq = g->first + q * g->step;
                float *oq = out + q * g->out_step * C + c;
                if (u == 4)
                    block(4, KT, SP, SD, kr, kt, rows, c, cq, g, C, m, full, w + c, vi, oq, relu);
                else if (u == 2)
                    block(2, KT, SP, SD, kr, kt, rows, c, cq, g, C, m, full, w + c, vi, oq, relu);
                else
                    block(1, KT, SP, SD, kr, kt, rows, c, cq, g, C, m, full, w + c, vi, oq, relu);
                q += u;
            }
        }
    }
}

#define SHAPE_NAME(KT, SP, D) run_##KT##_##SP##D
#define SHAPE_FN(KT, SP, SD, D)                                                                                        \
    static void SHAPE_NAME(KT, SP, D)(int64_t channels, int64_t C, int64_t n, int64_t kr, const float *const *rows,    \
                                      const nconv_dw_run *g, const float *w, const float *init, float *out,            \
                                      int relu) {                                                                      \
        run(KT, SP, SD, channels, C, n, kr, KT, rows, g, w, init, out, relu);                                          \
    }
NCONV_DWRUN_SHAPES(SHAPE_FN)

void nconv_f32_dwrun__avx2(int64_t channels, int64_t C, int64_t n, int64_t kr, int64_t kt, const float *const *rows,
                           const nconv_dw_run *g, const float *w, const float *init, float *out, int relu) {
#define SHAPE_CASE(KT, SP, SD, D)                                                                                      \
    if (kt == KT && g->step == SP && g->tap == SD) {                                                                   \
        SHAPE_NAME(KT, SP, D)(channels, C, n, kr, rows, g, w, init, out, relu);                                        \
        return;                                                                                                        \
    }
    NCONV_DWRUN_SHAPES(SHAPE_CASE)
#undef SHAPE_CASE
    run(0, 0, 0, channels, C, n, kr, kt, rows, g, w, init, out, relu);
}
