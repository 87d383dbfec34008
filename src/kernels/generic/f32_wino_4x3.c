/* Winograd F(4x4, 3x3) transforms, portable C (contracts in ../kernels.h). */
#include "../../internal.h"
#include "../kernels.h"

/* B^T d for one column of six: the input transform of F(4, 3). */
static void in6(const float *d, int64_t ds, float *v, int64_t vs) {
    const float t0 = d[4 * ds] - 4.0f * d[2 * ds], t1 = d[3 * ds] - 4.0f * d[1 * ds];
    const float t2 = d[4 * ds] - d[2 * ds], t3 = 2.0f * (d[3 * ds] - d[1 * ds]);
    v[0] = 4.0f * d[0] - 5.0f * d[2 * ds] + d[4 * ds];
    v[1 * vs] = t0 + t1;
    v[2 * vs] = t0 - t1;
    v[3 * vs] = t2 + t3;
    v[4 * vs] = t2 - t3;
    v[5 * vs] = 4.0f * d[1 * ds] - 5.0f * d[3 * ds] + d[5 * ds];
}

/* Channel c of a tile's 36 inputs d transformed into dst. */
static void in_tile(const float *d, float *dst, int64_t xs, int64_t c, float *poison) {
    float t[36], v[36];
    for (int j = 0; j < 6; j++) in6(d + j, 6, t + j, 6);  /* columns */
    for (int i = 0; i < 6; i++) in6(t + 6 * i, 1, v + 6 * i, 1); /* rows */
    for (int i = 0; i < 36; i++) dst[i * xs + c] = v[i];
    const float s = v[0] + v[5] + v[30] + v[35];
    poison[c % 8] += s - s;
}

void nconv_f32_wino_in__generic(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison) {
    for (int64_t c = 0; c < n; c++) {
        float d[36];
        for (int i = 0; i < 36; i++) d[i] = src[i][c];
        in_tile(d, dst, xs, c, poison);
    }
}

static float widen(uint16_t h, int bf16) { return bf16 ? nconv__bf16_to_f32(h) : nconv__f16_to_f32(h); }

void nconv_f32_wino_in16__generic(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs,
                                  float *poison) {
    for (int64_t c = 0; c < n; c++) {
        float d[36];
        for (int i = 0; i < 36; i++) d[i] = widen(src[i][c], bf16);
        in_tile(d, dst, xs, c, poison);
    }
}

/* A^T m for one column of six. */
static void out6(const float *m, int64_t ms, float *y, int64_t ys) {
    const float s12 = m[1 * ms] + m[2 * ms], d12 = m[1 * ms] - m[2 * ms];
    const float s34 = m[3 * ms] + m[4 * ms], d34 = m[3 * ms] - m[4 * ms];
    y[0] = m[0] + s12 + s34;
    y[1 * ys] = d12 + 2.0f * d34;
    y[2 * ys] = s12 + 4.0f * s34;
    y[3 * ys] = d12 + 8.0f * d34 + m[5 * ms];
}

void nconv_f32_wino_out__generic(int64_t n, const float *m, int64_t xs, const float *init, float *const *dst,
                                 int relu) {
    for (int64_t c = 0; c < n; c++) {
        float a[36], t[24], y[16];
        for (int i = 0; i < 36; i++) a[i] = m[i * xs + c];
        for (int j = 0; j < 6; j++) out6(a + j, 6, t + j, 6);  /* columns: t[4][6] */
        for (int i = 0; i < 4; i++) out6(t + 6 * i, 1, y + 4 * i, 1); /* rows */
        for (int i = 0; i < 16; i++) {
            if (!dst[i]) continue;
            const float v = y[i] + (init ? init[c] : 0.0f);
            dst[i][c] = relu && v < 0 ? 0.0f : v; /* NaN stays NaN */
        }
    }
}

/* G g for one column of three. */
static void w3(const float *g, int64_t gs, float *u, int64_t us) {
    const float a = g[0] + g[2 * gs], b = g[0] / 24.0f + g[2 * gs] / 6.0f;
    u[0] = g[0] / 4.0f;
    u[1 * us] = -(a + g[1 * gs]) / 6.0f;
    u[2 * us] = -(a - g[1 * gs]) / 6.0f;
    u[3 * us] = b + g[1 * gs] / 12.0f;
    u[4 * us] = b - g[1 * gs] / 12.0f;
    u[5 * us] = g[2 * gs];
}

void nconv_f32_wino_w__generic(const float *g, float *dst, int64_t xs) {
    for (int64_t c = 0; c < 16; c++) {
        float t[18], u[36];
        for (int j = 0; j < 3; j++) w3(g + j * 16 + c, 48, t + j, 3);  /* columns: t[6][3] */
        for (int i = 0; i < 6; i++) w3(t + 3 * i, 1, u + 6 * i, 1);     /* rows */
        for (int i = 0; i < 36; i++) dst[i * xs + c] = u[i];
    }
}

/* A y for one column of four (dy side of backward-weights). */
static void dy4(const float *y, int64_t ys, float *z, int64_t zs) {
    const float e = y[0] + y[2 * ys], o = y[1 * ys] + y[3 * ys];
    const float e4 = y[0] + 4.0f * y[2 * ys], o4 = 2.0f * y[1 * ys] + 8.0f * y[3 * ys];
    z[0] = y[0];
    z[1 * zs] = e + o;
    z[2 * zs] = e - o;
    z[3 * zs] = e4 + o4;
    z[4 * zs] = e4 - o4;
    z[5 * zs] = y[3 * ys];
}

/* Channel c of a tile's 16 dy pixels y transformed into dst. */
static void dy_tile(const float *y, float *dst, int64_t xs, int64_t c, float *poison) {
    float t[24], z[36];
    for (int j = 0; j < 4; j++) dy4(y + j, 4, t + j, 4);  /* columns: t[6][4] */
    for (int i = 0; i < 6; i++) dy4(t + 4 * i, 1, z + 6 * i, 1); /* rows */
    for (int i = 0; i < 36; i++) dst[i * xs + c] = z[i];
    const float s = z[7] + z[10] + z[25] + z[28]; /* rows and columns 1 and 4 read all four */
    poison[c % 8] += s - s;
}

void nconv_f32_wino_dy__generic(int64_t n, const float *const *src, float *dst, int64_t xs, float *poison) {
    for (int64_t c = 0; c < n; c++) {
        float y[16];
        for (int i = 0; i < 16; i++) y[i] = src[i] ? src[i][c] : 0.0f;
        dy_tile(y, dst, xs, c, poison);
    }
}

void nconv_f32_wino_dy16__generic(int64_t n, const uint16_t *const *src, int bf16, float *dst, int64_t xs,
                                  float *poison) {
    for (int64_t c = 0; c < n; c++) {
        float y[16];
        for (int i = 0; i < 16; i++) y[i] = src[i] ? widen(src[i][c], bf16) : 0.0f;
        dy_tile(y, dst, xs, c, poison);
    }
}

/* G^T s for one column of six. */
static void wg6(const float *s, int64_t ss, float *g, int64_t gs) {
    const float a = s[1 * ss] + s[2 * ss], b = s[2 * ss] - s[1 * ss];
    const float c = s[3 * ss] + s[4 * ss], d = s[3 * ss] - s[4 * ss];
    g[0] = s[0] / 4.0f - a / 6.0f + c / 24.0f;
    g[1 * gs] = b / 6.0f + d / 12.0f;
    g[2 * gs] = (c - a) / 6.0f + s[5 * ss];
}

void nconv_f32_wino_wgrad__generic(int64_t n, const float *s, const float *s2, int64_t xs, float *dst, int64_t ds) {
    for (int64_t c = 0; c < n; c++) {
        float a[36], t[18], w[9];
        for (int i = 0; i < 36; i++) a[i] = s2 ? s[i * xs + c] + s2[i * xs + c] : s[i * xs + c];
        for (int j = 0; j < 6; j++) wg6(a + j, 6, t + j, 6);  /* columns: t[3][6] */
        for (int i = 0; i < 3; i++) wg6(t + 6 * i, 1, w + 3 * i, 1); /* rows */
        for (int i = 0; i < 9; i++) dst[i * ds + c] = w[i];
    }
}
