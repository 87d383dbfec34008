/*
 * Winograd F(4x4, 3x3) transforms, AVX-512: sixteen channels per step, a
 * masked step for the last n % 16. The AVX2 kernels' operations lane for
 * lane (so the same bits), twice as wide: the input transform was a third
 * of a 3 x 3 backward-weights at 8 lanes. Contracts in ../kernels.h.
 */
#include "../kernels.h"
#include "avx512_util.h"

static inline __m512 load16(const float *p, __mmask16 m, int full) {
    return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

static inline void store16(float *p, __m512 v, __mmask16 m, int full) {
    if (full) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, m, v);
}

static inline void in6(const __m512 *d, int ds, __m512 *v, int vs) {
    const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f), two = _mm512_set1_ps(2.0f);
    const __m512 t0 = _mm512_fnmadd_ps(four, d[2 * ds], d[4 * ds]), t1 = _mm512_fnmadd_ps(four, d[1 * ds], d[3 * ds]);
    const __m512 t2 = _mm512_sub_ps(d[4 * ds], d[2 * ds]), t3 = _mm512_mul_ps(two, _mm512_sub_ps(d[3 * ds], d[1 * ds]));
    v[0] = _mm512_fmadd_ps(four, d[0], _mm512_fnmadd_ps(five, d[2 * ds], d[4 * ds]));
    v[1 * vs] = _mm512_add_ps(t0, t1);
    v[2 * vs] = _mm512_sub_ps(t0, t1);
    v[3 * vs] = _mm512_add_ps(t2, t3);
    v[4 * vs] = _mm512_sub_ps(t2, t3);
    v[5 * vs] = _mm512_fmadd_ps(four, d[1 * ds], _mm512_fnmadd_ps(five, d[3 * ds], d[5 * ds]));
}

/* As the AVX2 kernels: stores the 36 vectors of a step, and poisons with s - s
 * for s the sum of four that together read every input. */
static inline void store36(const __m512 *v, float *dst, int64_t xs, int64_t c, __mmask16 m, int full, int a, int b,
                           int d, int e, __m512 *poison) {
    for (int i = 0; i < 36; i++) store16(dst + i * xs + c, v[i], m, full);
    const __m512 s = _mm512_add_ps(_mm512_add_ps(v[a], v[b]), _mm512_add_ps(v[d], v[e]));
    *poison = _mm512_add_ps(*poison, _mm512_sub_ps(s, s));
}

/* The caller's eight poison lanes plus both halves of p: NaN stays NaN. */
static inline void poison_out(float *poison, __m512 p) {
    const __m256 h = _mm256_add_ps(nconv__avx512_lo(p), nconv__avx512_hi(p));
    _mm256_storeu_ps(poison, _mm256_add_ps(_mm256_loadu_ps(poison), h));
}

static inline __attribute__((always_inline)) void in_tile(__m512 *d, int64_t c, __mmask16 m, int full, float *dst,
                                                          int64_t xs, __m512 *poison) {
    __m512 t[36];
    for (int j = 0; j < 6; j++) in6(d + j, 6, t + j, 6);
    for (int i = 0; i < 6; i++) in6(t + 6 * i, 1, d + 6 * i, 1);
    store36(d, dst, xs, c, m, full, 0, 5, 30, 35, poison);
}

static inline void in_step(const float *const *src, int64_t c, __mmask16 m, int full, float *dst, int64_t xs,
                           __m512 *poison) {
    __m512 d[36];
    for (int i = 0; i < 36; i++) d[i] = load16(src[i] + c, m, full);
    in_tile(d, c, m, full, dst, xs, poison);
}

void nconv_f32_wino_in__avx512(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison) {
    __m512 p = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) in_step(src, c, 0, 1, dst, xs, &p);
    if (c < n) in_step(src, c, nconv__avx512_mask(n - c), 0, dst, xs, &p);
    poison_out(poison, p);
}

static inline void out6(const __m512 *m, int ms, __m512 *y, int ys) {
    const __m512 s12 = _mm512_add_ps(m[1 * ms], m[2 * ms]), d12 = _mm512_sub_ps(m[1 * ms], m[2 * ms]);
    const __m512 s34 = _mm512_add_ps(m[3 * ms], m[4 * ms]), d34 = _mm512_sub_ps(m[3 * ms], m[4 * ms]);
    y[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), s34);
    y[1 * ys] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d34, d12);
    y[2 * ys] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), s34, s12);
    y[3 * ys] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d34, d12), m[5 * ms]);
}

static inline void out_step(const float *m, int64_t xs, int64_t c, __mmask16 mask, int full, const float *init,
                            float *const *dst, int relu) {
    __m512 a[36], t[24], y[16];
    for (int i = 0; i < 36; i++) a[i] = load16(m + i * xs + c, mask, full);
    for (int j = 0; j < 6; j++) out6(a + j, 6, t + j, 6);
    for (int i = 0; i < 4; i++) out6(t + 6 * i, 1, y + 4 * i, 1);
    const __m512 b = init ? load16(init + c, mask, full) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i++) {
        if (!dst[i]) continue;
        __m512 v = _mm512_add_ps(y[i], b);
        /* v second: a NaN in v is passed through, as the other kernels do */
        if (relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
        store16(dst[i] + c, v, mask, full);
    }
}

void nconv_f32_wino_out__avx512(int64_t n, const float *m, int64_t xs, const float *init, float *const *dst, int relu) {
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) out_step(m, xs, c, 0, 1, init, dst, relu);
    if (c < n) out_step(m, xs, c, nconv__avx512_mask(n - c), 0, init, dst, relu);
}

static inline void dy4(const __m512 *y, int ys, __m512 *z, int zs) {
    const __m512 e = _mm512_add_ps(y[0], y[2 * ys]), o = _mm512_add_ps(y[1 * ys], y[3 * ys]);
    const __m512 e4 = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), y[2 * ys], y[0]);
    const __m512 o4 = _mm512_fmadd_ps(_mm512_set1_ps(8.0f), y[3 * ys], _mm512_add_ps(y[1 * ys], y[1 * ys]));
    z[0] = y[0];
    z[1 * zs] = _mm512_add_ps(e, o);
    z[2 * zs] = _mm512_sub_ps(e, o);
    z[3 * zs] = _mm512_add_ps(e4, o4);
    z[4 * zs] = _mm512_sub_ps(e4, o4);
    z[5 * zs] = y[3 * ys];
}

static inline __attribute__((always_inline)) void dy_tile(const __m512 *y, int64_t c, __mmask16 m, int full, float *dst,
                                                          int64_t xs, __m512 *poison) {
    __m512 t[24], z[36];
    for (int j = 0; j < 4; j++) dy4(y + j, 4, t + j, 4);
    for (int i = 0; i < 6; i++) dy4(t + 4 * i, 1, z + 6 * i, 1);
    store36(z, dst, xs, c, m, full, 7, 10, 25, 28, poison);
}

static inline void dy_step(const float *const *src, int64_t c, __mmask16 m, int full, float *dst, int64_t xs,
                           __m512 *poison) {
    __m512 y[16];
    for (int i = 0; i < 16; i++) y[i] = src[i] ? load16(src[i] + c, m, full) : _mm512_setzero_ps();
    dy_tile(y, c, m, full, dst, xs, poison);
}

void nconv_f32_wino_dy__avx512(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison) {
    __m512 p = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) dy_step(src, c, 0, 1, dst, xs, &p);
    if (c < n) dy_step(src, c, nconv__avx512_mask(n - c), 0, dst, xs, &p);
    poison_out(poison, p);
}

/* The input (dy 0: 36 pixels) or dy (dy 1: 16 pixels, NULL ones zeros) transform of 16-bit
 * pixels: each vector widened as it is loaded, then the f32 transform's operations. */
static inline __attribute__((always_inline)) void step16(const uint16_t *const *src, int64_t c, int64_t nr, int full,
                                                         int bf16, int dy, float *dst, int64_t xs, __m512 *poison) {
    __m512 d[36];
    for (int i = 0; i < (dy ? 16 : 36); i++)
        d[i] = dy && !src[i] ? _mm512_setzero_ps() : nconv__avx512_load16(src[i] + c, nr, bf16);
    const __mmask16 m = full ? 0 : nconv__avx512_mask(nr);
    if (dy) dy_tile(d, c, m, full, dst, xs, poison);
    else in_tile(d, c, m, full, dst, xs, poison);
}

static inline __attribute__((always_inline)) void run16(int64_t n, const uint16_t *const *src, int bf16, int dy,
                                                        float *dst, int64_t xs, float *poison) {
    __m512 p = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) step16(src, c, 16, 1, bf16, dy, dst, xs, &p);
    if (c < n) step16(src, c, n - c, 0, bf16, dy, dst, xs, &p);
    poison_out(poison, p);
}

void nconv_f32_wino_in16__avx512(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs,
                                 float *poison) {
    if (bf16) run16(n, src, 1, 0, dst, xs, poison);
    else run16(n, src, 0, 0, dst, xs, poison);
}

void nconv_f32_wino_dy16__avx512(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs,
                                 float *poison) {
    if (bf16) run16(n, src, 1, 1, dst, xs, poison);
    else run16(n, src, 0, 1, dst, xs, poison);
}
