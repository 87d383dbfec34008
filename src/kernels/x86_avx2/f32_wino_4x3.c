/*
 * Winograd F(4x4, 3x3) transforms, AVX2: eight channels per step (the
 * channels-last vector dimension), a masked step for the last n % 8.
 * Contracts in ../kernels.h. Same arithmetic as the portable kernels, with
 * fused multiply-adds where the portable ones round twice.
 */
#include "../kernels.h"
#include "avx2_util.h"

static inline void in6(const __m256 *d, int ds, __m256 *v, int vs) {
    const __m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
    const __m256 t0 = _mm256_fnmadd_ps(four, d[2 * ds], d[4 * ds]), t1 = _mm256_fnmadd_ps(four, d[1 * ds], d[3 * ds]);
    const __m256 t2 = _mm256_sub_ps(d[4 * ds], d[2 * ds]), t3 = _mm256_mul_ps(two, _mm256_sub_ps(d[3 * ds], d[1 * ds]));
    v[0] = _mm256_fmadd_ps(four, d[0], _mm256_fnmadd_ps(five, d[2 * ds], d[4 * ds]));
    v[1 * vs] = _mm256_add_ps(t0, t1);
    v[2 * vs] = _mm256_sub_ps(t0, t1);
    v[3 * vs] = _mm256_add_ps(t2, t3);
    v[4 * vs] = _mm256_sub_ps(t2, t3);
    v[5 * vs] = _mm256_fmadd_ps(four, d[1 * ds], _mm256_fnmadd_ps(five, d[3 * ds], d[5 * ds]));
}

/* Stores the 36 transformed vectors of a step and adds to the poison lanes
 * s - s for s, the sum of four of them that together read every input: NaN
 * once any input (or an overflowed value) is Inf or NaN. */
static inline void store36(const __m256 *v, float *dst, int64_t xs, int64_t c, __m256i mask, int full, int a, int b,
                           int d, int e, __m256 *poison) {
    for (int i = 0; i < 36; i++) {
        if (full) _mm256_storeu_ps(dst + i * xs + c, v[i]);
        else _mm256_maskstore_ps(dst + i * xs + c, mask, v[i]);
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(v[a], v[b]), _mm256_add_ps(v[d], v[e]));
    *poison = _mm256_add_ps(*poison, _mm256_sub_ps(s, s));
}

static inline __attribute__((always_inline)) void in_tile(__m256 *d, int64_t c, __m256i mask, int full, float *dst,
                                                          int64_t xs, __m256 *poison) {
    __m256 t[36];
    for (int j = 0; j < 6; j++) in6(d + j, 6, t + j, 6);
    for (int i = 0; i < 6; i++) in6(t + 6 * i, 1, d + 6 * i, 1);
    store36(d, dst, xs, c, mask, full, 0, 5, 30, 35, poison); /* rows and columns 0 and 5 of B^T read all six inputs */
}

static inline void in_step(const float *const *src, int64_t c, __m256i mask, int full, float *dst, int64_t xs,
                           __m256 *poison) {
    __m256 d[36];
    for (int i = 0; i < 36; i++) d[i] = full ? _mm256_loadu_ps(src[i] + c) : _mm256_maskload_ps(src[i] + c, mask);
    in_tile(d, c, mask, full, dst, xs, poison);
}

void nconv_f32_wino_in__avx2(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison) {
    __m256 p = _mm256_loadu_ps(poison);
    const __m256i all = _mm256_set1_epi32(-1);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) in_step(src, c, all, 1, dst, xs, &p);
    if (c < n) in_step(src, c, nconv__avx2_mask(n - c), 0, dst, xs, &p);
    _mm256_storeu_ps(poison, p);
}

static inline void out6(const __m256 *m, int ms, __m256 *y, int ys) {
    const __m256 s12 = _mm256_add_ps(m[1 * ms], m[2 * ms]), d12 = _mm256_sub_ps(m[1 * ms], m[2 * ms]);
    const __m256 s34 = _mm256_add_ps(m[3 * ms], m[4 * ms]), d34 = _mm256_sub_ps(m[3 * ms], m[4 * ms]);
    y[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
    y[1 * ys] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d34, d12);
    y[2 * ys] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), s34, s12);
    y[3 * ys] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d34, d12), m[5 * ms]);
}

static inline void out_step(const float *m, int64_t xs, int64_t c, __m256i mask, int full, const float *init,
                            float *const *dst, int relu) {
    __m256 a[36], t[24], y[16];
    for (int i = 0; i < 36; i++) a[i] = full ? _mm256_loadu_ps(m + i * xs + c) : _mm256_maskload_ps(m + i * xs + c, mask);
    for (int j = 0; j < 6; j++) out6(a + j, 6, t + j, 6);
    for (int i = 0; i < 4; i++) out6(t + 6 * i, 1, y + 4 * i, 1);
    const __m256 b = !init ? _mm256_setzero_ps() : full ? _mm256_loadu_ps(init + c) : _mm256_maskload_ps(init + c, mask);
    for (int i = 0; i < 16; i++) {
        if (!dst[i]) continue;
        __m256 v = _mm256_add_ps(y[i], b);
        /* max(v, 0) with v second: a NaN in v is passed through, as the portable kernel does. */
        if (relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);
        if (full) _mm256_storeu_ps(dst[i] + c, v);
        else _mm256_maskstore_ps(dst[i] + c, mask, v);
    }
}

void nconv_f32_wino_out__avx2(int64_t n, const float *m, int64_t xs, const float *init, float *const *dst, int relu) {
    const __m256i all = _mm256_set1_epi32(-1);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) out_step(m, xs, c, all, 1, init, dst, relu);
    if (c < n) out_step(m, xs, c, nconv__avx2_mask(n - c), 0, init, dst, relu);
}

static inline void w3(const __m256 *g, int gs, __m256 *u, int us) {
    const __m256 a = _mm256_add_ps(g[0], g[2 * gs]);
    const __m256 b = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 24.0f), g[0], _mm256_mul_ps(_mm256_set1_ps(1.0f / 6.0f), g[2 * gs]));
    const __m256 g1 = _mm256_mul_ps(_mm256_set1_ps(1.0f / 12.0f), g[1 * gs]), sixth = _mm256_set1_ps(-1.0f / 6.0f);
    u[0] = _mm256_mul_ps(_mm256_set1_ps(0.25f), g[0]);
    u[1 * us] = _mm256_mul_ps(sixth, _mm256_add_ps(a, g[1 * gs]));
    u[2 * us] = _mm256_mul_ps(sixth, _mm256_sub_ps(a, g[1 * gs]));
    u[3 * us] = _mm256_add_ps(b, g1);
    u[4 * us] = _mm256_sub_ps(b, g1);
    u[5 * us] = g[2 * gs];
}

void nconv_f32_wino_w__avx2(const float *g, float *dst, int64_t xs) {
    __m256 u[2][36];
    for (int h = 0; h < 2; h++) {
        __m256 d[9], t[18];
        for (int i = 0; i < 9; i++) d[i] = _mm256_loadu_ps(g + i * 16 + 8 * h);
        for (int j = 0; j < 3; j++) w3(d + j, 3, t + j, 3);
        for (int i = 0; i < 6; i++) w3(t + 3 * i, 1, u[h] + 6 * i, 1);
    }
    /* Both halves of a line one after the other: the 36 lines are written whole, not halves
     * of 36 lines and then their other halves. */
    for (int i = 0; i < 36; i++) _mm256_storeu_ps(dst + i * xs, u[0][i]), _mm256_storeu_ps(dst + i * xs + 8, u[1][i]);
}

static inline void dy4(const __m256 *y, int ys, __m256 *z, int zs) {
    const __m256 e = _mm256_add_ps(y[0], y[2 * ys]), o = _mm256_add_ps(y[1 * ys], y[3 * ys]);
    const __m256 e4 = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), y[2 * ys], y[0]);
    const __m256 o4 = _mm256_fmadd_ps(_mm256_set1_ps(8.0f), y[3 * ys], _mm256_add_ps(y[1 * ys], y[1 * ys]));
    z[0] = y[0];
    z[1 * zs] = _mm256_add_ps(e, o);
    z[2 * zs] = _mm256_sub_ps(e, o);
    z[3 * zs] = _mm256_add_ps(e4, o4);
    z[4 * zs] = _mm256_sub_ps(e4, o4);
    z[5 * zs] = y[3 * ys];
}

static inline __attribute__((always_inline)) void dy_tile(const __m256 *y, int64_t c, __m256i mask, int full, float *dst,
                                                          int64_t xs, __m256 *poison) {
    __m256 t[24], z[36];
    for (int j = 0; j < 4; j++) dy4(y + j, 4, t + j, 4);
    for (int i = 0; i < 6; i++) dy4(t + 4 * i, 1, z + 6 * i, 1);
    store36(z, dst, xs, c, mask, full, 7, 10, 25, 28, poison); /* rows and columns 1 and 4 of A read all four */
}

static inline void dy_step(const float *const *src, int64_t c, __m256i mask, int full, float *dst, int64_t xs,
                           __m256 *poison) {
    __m256 y[16];
    for (int i = 0; i < 16; i++)
        y[i] = !src[i] ? _mm256_setzero_ps() : full ? _mm256_loadu_ps(src[i] + c) : _mm256_maskload_ps(src[i] + c, mask);
    dy_tile(y, c, mask, full, dst, xs, poison);
}

void nconv_f32_wino_dy__avx2(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison) {
    __m256 p = _mm256_loadu_ps(poison);
    const __m256i all = _mm256_set1_epi32(-1);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) dy_step(src, c, all, 1, dst, xs, &p);
    if (c < n) dy_step(src, c, nconv__avx2_mask(n - c), 0, dst, xs, &p);
    _mm256_storeu_ps(poison, p);
}

/* The input (dy 0: 36 pixels) or dy (dy 1: 16 pixels, NULL ones zeros) transform of 16-bit
 * pixels: each vector widened as it is loaded, then the f32 transform's operations. */
static inline __attribute__((always_inline)) void step16(const uint16_t *const *src, int64_t c, int64_t nr, int full,
                                                         int bf16, int dy, float *dst, int64_t xs, __m256 *poison) {
    __m256 d[36];
    for (int i = 0; i < (dy ? 16 : 36); i++)
        d[i] = dy && !src[i] ? _mm256_setzero_ps() : nconv__avx2_load16(src[i] + c, nr, bf16);
    const __m256i mask = full ? _mm256_set1_epi32(-1) : nconv__avx2_mask(nr);
    if (dy) dy_tile(d, c, mask, full, dst, xs, poison);
    else in_tile(d, c, mask, full, dst, xs, poison);
}

static inline __attribute__((always_inline)) void run16(int64_t n, const uint16_t *const *src, int bf16, int dy,
                                                        float *dst, int64_t xs, float *poison) {
    __m256 p = _mm256_loadu_ps(poison);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) step16(src, c, 8, 1, bf16, dy, dst, xs, &p);
    if (c < n) step16(src, c, n - c, 0, bf16, dy, dst, xs, &p);
    _mm256_storeu_ps(poison, p);
}

void nconv_f32_wino_in16__avx2(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs, float *poison) {
    if (bf16) run16(n, src, 1, 0, dst, xs, poison);
    else run16(n, src, 0, 0, dst, xs, poison);
}

void nconv_f32_wino_dy16__avx2(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs, float *poison) {
    if (bf16) run16(n, src, 1, 1, dst, xs, poison);
    else run16(n, src, 0, 1, dst, xs, poison);
}

static inline void wg6(const __m256 *s, int ss, __m256 *g, int gs) {
    const __m256 a = _mm256_add_ps(s[1 * ss], s[2 * ss]), b = _mm256_sub_ps(s[2 * ss], s[1 * ss]);
    const __m256 c = _mm256_add_ps(s[3 * ss], s[4 * ss]), d = _mm256_sub_ps(s[3 * ss], s[4 * ss]);
    const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f);
    g[0] = _mm256_fmadd_ps(_mm256_set1_ps(0.25f), s[0],
                           _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 24.0f), c, _mm256_mul_ps(_mm256_set1_ps(-1.0f / 6.0f), a)));
    g[1 * gs] = _mm256_fmadd_ps(sixth, b, _mm256_mul_ps(_mm256_set1_ps(1.0f / 12.0f), d));
    g[2 * gs] = _mm256_fmadd_ps(sixth, _mm256_sub_ps(c, a), s[5 * ss]);
}

static inline __m256 wgrad_load(const float *s, int64_t i, __m256i mask, int full) {
    return full ? _mm256_loadu_ps(s + i) : _mm256_maskload_ps(s + i, mask);
}

static inline void wgrad_step(const float *s, const float *s2, int64_t xs, int64_t c, __m256i mask, int full,
                              float *dst, int64_t ds) {
    __m256 a[36], t[18], w[9];
    for (int i = 0; i < 36; i++) {
        a[i] = wgrad_load(s, i * xs + c, mask, full);
        if (s2) a[i] = _mm256_add_ps(a[i], wgrad_load(s2, i * xs + c, mask, full));
    }
    for (int j = 0; j < 6; j++) wg6(a + j, 6, t + j, 6);
    for (int i = 0; i < 3; i++) wg6(t + 6 * i, 1, w + 3 * i, 1);
    for (int i = 0; i < 9; i++) {
        if (full) _mm256_storeu_ps(dst + i * ds + c, w[i]);
        else _mm256_maskstore_ps(dst + i * ds + c, mask, w[i]);
    }
}

void nconv_f32_wino_wgrad__avx2(int64_t n, const float *s, const float *s2, int64_t xs, float *dst, int64_t ds) {
    const __m256i all = _mm256_set1_epi32(-1);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) wgrad_step(s, s2, xs, c, all, 1, dst, ds);
    if (c < n) wgrad_step(s, s2, xs, c, nconv__avx2_mask(n - c), 0, dst, ds);
}
