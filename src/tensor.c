/*
 * Tensor views: element conversion (f16/bf16 by bit manipulation, round to
 * nearest even), strided gathers into dense buffers and strided scatters out
 * of them with the fused epilogue, and the workspace arena.
 */
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

size_t nconv_dtype_size(nconv_dtype dt) {
    switch (dt) {
    case NCONV_F32: return 4;
    case NCONV_F64: return 8;
    case NCONV_F16:
    case NCONV_BF16: return 2;
    case NCONV_C64: return 8;
    case NCONV_C128: return 16;
    }
    return 0;
}

nconv_status nconv_tensor_init(nconv_tensor *t, void *data, int rank, const int64_t *shape, nconv_layout layout) {
    if (!t) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: tensor is NULL");
    if (rank < 1 || rank > NCONV_MAX_DIMS)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: rank = %d: must be 1..%d", rank, NCONV_MAX_DIMS);
    if (!shape) return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: shape is NULL");
    if (layout != NCONV_LAYOUT_NCX && layout != NCONV_LAYOUT_NXC)
        return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: layout = %d: not a layout", (int)layout);
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: shape[%d] = %lld: must be >= 0", i,
                                (long long)shape[i]);
    /* Order of dims from innermost to outermost. */
    int order[NCONV_MAX_DIMS], n = 0;
    if (layout == NCONV_LAYOUT_NXC && rank > 2) {
        order[n++] = 1;
        for (int i = rank - 1; i >= 2; i--) order[n++] = i;
        order[n++] = 0;
    } else {
        for (int i = rank - 1; i >= 0; i--) order[n++] = i;
    }
    memset(t, 0, sizeof *t);
    t->data = data;
    int64_t s = 1;
    for (int i = 0; i < rank; i++) {
        t->stride[order[i]] = s;
        int64_t e = shape[order[i]] > 0 ? shape[order[i]] : 1;
        if (!nconv__mul_ok(s, e, &s))
            return nconv__error(NCONV_INVALID_ARGUMENT, "nconv: tensor of rank %d overflows int64", rank);
    }
    return NCONV_OK;
}

int64_t nconv__view_numel(const nconv_view *v) {
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++) n *= v->shape[i];
    return n;
}

int nconv__view_is_dense(const nconv_view *v) {
    int64_t s = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->stride[i] != s) return 0;
        s *= v->shape[i];
    }
    return 1;
}

uint16_t nconv__f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan (keep nan quiet) */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        float a;
        memcpy(&a, &ax, 4);
        /* Scale so that one half ulp (2^-24) becomes 1, rint rounds to even. */
        return (uint16_t)(sign | (uint32_t)rintf(a * 0x1p24f));
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1); /* round to nearest even on the dropped 13 bits */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

uint16_t nconv__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double nconv__load(const void *data, nconv_dtype dt, int64_t off) {
    switch (dt) {
    case NCONV_F32: return ((const float *)data)[off];
    case NCONV_F64: return ((const double *)data)[off];
    case NCONV_F16: return nconv__f16_to_f32(((const uint16_t *)data)[off]);
    case NCONV_BF16: return nconv__bf16_to_f32(((const uint16_t *)data)[off]);
    default: return 0; /* complex tensors are only ever read through their real form (complex.c) */
    }
}

void nconv__store1(void *data, nconv_dtype dt, int64_t off, double v) {
    switch (dt) {
    case NCONV_F32: ((float *)data)[off] = (float)v; break;
    case NCONV_F64: ((double *)data)[off] = v; break;
    case NCONV_F16: ((uint16_t *)data)[off] = nconv__f32_to_f16((float)v); break;
    case NCONV_BF16: ((uint16_t *)data)[off] = nconv__f32_to_bf16((float)v); break;
    default: break;
    }
}

/* Calls fn over every element of v in C order; rows along the last dim. */
typedef void (*row_fn)(void *ctx, int64_t dense_off, int64_t off, int64_t stride, int64_t n, int64_t ch);

static void for_each_row(const nconv_view *v, row_fn fn, void *ctx) {
    int r = v->rank;
    int64_t numel = nconv__view_numel(v);
    if (numel == 0) return;
    int64_t idx[NCONV_MAX_DIMS] = {0};
    int64_t rowlen = v->shape[r - 1], dense = 0;
    for (;;) {
        int64_t off = 0;
        for (int i = 0; i < r - 1; i++) off += idx[i] * v->stride[i];
        fn(ctx, dense, off, v->stride[r - 1], rowlen, r > 1 ? idx[1] : 0);
        dense += rowlen;
        int i = r - 2;
        for (; i >= 0; i--) {
            if (++idx[i] < v->shape[i]) break;
            idx[i] = 0;
        }
        if (i < 0) break;
    }
}

typedef struct gather_ctx {
    const nconv_view *v;
    void *dst;
    int f64;
} gather_ctx;

static void gather_row(void *vctx, int64_t dense, int64_t off, int64_t stride, int64_t n, int64_t ch) {
    (void)ch;
    gather_ctx *g = vctx;
    const nconv_view *v = g->v;
    if (g->f64) {
        double *d = (double *)g->dst + dense;
        if (v->dt == NCONV_F64) {
            const double *s = (const double *)v->data + off;
            for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
        } else {
            for (int64_t i = 0; i < n; i++) d[i] = nconv__load(v->data, v->dt, off + i * stride);
        }
    } else {
        float *d = (float *)g->dst + dense;
        if (v->dt == NCONV_F32) {
            const float *s = (const float *)v->data + off;
            for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
        } else {
            for (int64_t i = 0; i < n; i++) d[i] = (float)nconv__load(v->data, v->dt, off + i * stride);
        }
    }
}

void nconv__gather_f64(const nconv_view *v, double *dst) {
    gather_ctx g = {v, dst, 1};
    for_each_row(v, gather_row, &g);
}

void nconv__gather_f32(const nconv_view *v, float *dst) {
    gather_ctx g = {v, dst, 0};
    for_each_row(v, gather_row, &g);
}

typedef struct scatter_ctx {
    const nconv_view *v;
    const void *src;
    int f64;
    const nconv_epi *epi;
} scatter_ctx;

static void scatter_row(void *vctx, int64_t dense, int64_t off, int64_t stride, int64_t n, int64_t ch) {
    scatter_ctx *s = vctx;
    const nconv_view *v = s->v;
    const nconv_epi *e = s->epi;
    double bias = 0;
    int64_t zoff = 0, zstride = 0;
    if (e && e->bias) bias = nconv__load(e->bias->data, e->bias->dt, ch * e->bias->stride[0]);
    if (e && e->z) {
        /* Same logical index as the output row: recover it from dense. */
        const nconv_view *z = e->z;
        int64_t rem = dense;
        for (int i = z->rank - 1; i >= 0; i--) {
            int64_t ii = rem % z->shape[i];
            rem /= z->shape[i];
            zoff += ii * z->stride[i];
        }
        zstride = z->stride[z->rank - 1];
    }
    for (int64_t i = 0; i < n; i++) {
        double val = s->f64 ? ((const double *)s->src)[dense + i] : ((const float *)s->src)[dense + i];
        if (e) {
            val += bias;
            if (e->z) val += e->alpha * nconv__load(e->z->data, e->z->dt, zoff + i * zstride);
            if (e->relu && val < 0) val = 0.0; /* NaN stays NaN, as torch.relu */
        }
        if (v->dt == NCONV_F32 && !s->f64 && !e)
            ((float *)v->data)[off + i * stride] = ((const float *)s->src)[dense + i];
        else
            nconv__store1(v->data, v->dt, off + i * stride, val);
    }
}

void nconv__scatter(const nconv_view *v, const void *src, int src_f64, const nconv_epi *epi) {
    scatter_ctx s = {v, src, src_f64, epi};
    if (epi && !epi->bias && !epi->z && !epi->relu) s.epi = NULL;
    for_each_row(v, scatter_row, &s);
}

size_t nconv__ws_round(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

size_t nconv__thread_stride(size_t bytes) {
    const size_t apart = (size_t)64 << 10;
    return nconv__ws_round(bytes) > apart ? nconv__ws_round(bytes) : apart;
}

void *nconv__arena_take(nconv_arena *a, size_t bytes) {
    /* Start aligned even when the caller's workspace is not. */
    uintptr_t base = (uintptr_t)a->base + a->used;
    size_t pad = (size_t)((64 - (base & 63)) & 63);
    size_t need = nconv__ws_round(bytes);
    if (a->used + pad + need > a->size) return NULL;
    void *p = a->base + a->used + pad;
    a->used += pad + need;
    return p;
}

/* ---------------------------------------------------- NHWC f32 copies */

int nconv__view_is_planar(const nconv_view *v) {
    return v->rank == 5 && (v->shape[4] == 1 || v->stride[4] == 1) &&
           (v->shape[3] == 1 || v->stride[3] == v->shape[4]) &&
           (v->shape[2] == 1 || v->stride[2] == v->shape[3] * v->shape[4]);
}

int nconv__view_is_planar_f32(const nconv_view *v) { return v->dt == NCONV_F32 && nconv__view_is_planar(v); }

int nconv__view_is_nxc_f32(const nconv_view *v) { return v->dt == NCONV_F32 && nconv__view_is_nxc(v); }

int nconv__view_is_nxc(const nconv_view *v) {
    if (v->rank != 5) return 0;
    /* Innermost to outermost: C, W, H, D, N. */
    static const int order[5] = {1, 4, 3, 2, 0};
    int64_t s = 1;
    for (int i = 0; i < 5; i++) {
        const int d = order[i];
        if (v->shape[d] != 1 && v->stride[d] != s) return 0;
        s *= v->shape[d];
    }
    return 1;
}

/* Spatial dims of a rank-5 view flatten to one axis of unit stride. */
static int spatial_dense(const nconv_view *v) {
    int64_t s = 1;
    for (int d = 4; d >= 2; d--) {
        if (v->shape[d] != 1 && v->stride[d] != s) return 0;
        s *= v->shape[d];
    }
    return 1;
}

enum { TBLOCK = 256 }; /* spatial positions per transpose block: long contiguous runs per channel */

/* The dense f32 transposes, split over (image, block of TBLOCK positions)
 * across the call's threads: gather [C][S] -> [S][C] per image, or scatter
 * back with bias and relu applied on the rows while they are in cache. */
typedef struct transpose_ctx {
    const nconv_view *v;
    const nconv_epi *epi; /* scatter only: bias and relu (no z) */
    const float *src;
    float *dst;
    int64_t C, S, blocks;
    int scatter;
} transpose_ctx;

static void transpose_task(void *arg, int tid, int nthreads) {
    const transpose_ctx *t = arg;
    const nconv_view *v = t->v;
    const nconv_f32_transpose_fn tr = nconv__kernels()->transpose;
    int64_t u0, u1;
    nconv__split(v->shape[0] * t->blocks, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t n = u / t->blocks, s0 = (u % t->blocks) * TBLOCK, s1 = s0 + TBLOCK < t->S ? s0 + TBLOCK : t->S;
        if (!t->scatter) {
            tr(t->C, s1 - s0, (const float *)v->data + n * v->stride[0] + s0, v->stride[1], t->dst + (n * t->S + s0) * t->C,
               t->C);
            continue;
        }
        float *dst = (float *)v->data + n * v->stride[0];
        tr(s1 - s0, t->C, t->src + (n * t->S + s0) * t->C, t->C, dst + s0, v->stride[1]);
        const nconv_epi *epi = t->epi;
        if (!epi) continue;
        for (int64_t c = 0; c < t->C; c++) {
            const float bias = epi->bias ? (float)nconv__load(epi->bias->data, epi->bias->dt, c * epi->bias->stride[0]) : 0.0f;
            float *dc = dst + c * v->stride[1];
            for (int64_t q = s0; q < s1; q++) {
                const float val = dc[q] + bias;
                dc[q] = epi->relu && val < 0 ? 0.0f : val;
            }
        }
    }
}

/* Channels-last and dense within each image: an image's elements are [S][C] in order. */
static int nxc_dense(const nconv_view *v) {
    int64_t s = v->shape[1];
    if (v->shape[1] != 1 && v->stride[1] != 1) return 0;
    for (int d = 4; d >= 2; d--) {
        if (v->shape[d] != 1 && v->stride[d] != s) return 0;
        s *= v->shape[d];
    }
    return 1;
}

/* The same copies for 16-bit storage (f16, bf16), converted by the dtype's kernels on the way:
 * channels-last images convert as they are, NCHW planes go through the transposes that widen
 * or narrow in registers. Scatter applies bias and relu (no z) in f32 before narrowing, as the
 * element-wise path does: with them, NCHW planes are transposed in f32 CBLOCK channels at a
 * time, then narrowed. */
typedef struct convert_ctx {
    const nconv_exec *e;
    const nconv_view *v;
    const nconv_epi *epi;
    const float *src;
    float *dst;
    int64_t C, S, blocks;
    int scatter, nxc;
} convert_ctx;

/* Channels per f32 transpose of a plane block: the AVX-512 kernel's whole 16 x 16 tiles (a strip
 * of 8 runs through its masked partial tiles at half the rate). */
enum { CBLOCK = 16 };

static void convert_task(void *arg, int tid, int nthreads) {
    const convert_ctx *t = arg;
    const nconv_view *v = t->v;
    const nconv_epi *epi = t->epi;
    const nconv_convert16_fn cv = nconv__convert16(t->e->k, v->dt);
    const nconv_f32_transpose_fn tr = t->e->k->transpose;
    const nconv_transpose16_fn t16 = nconv__transpose16(t->e->k, v->dt);
    const int64_t C = t->C, S = t->S;
    float tmp[CBLOCK * TBLOCK], bias[TBLOCK];
    int64_t u0, u1;
    nconv__split(v->shape[0] * t->blocks, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t n = u / t->blocks, s0 = (u % t->blocks) * TBLOCK, s1 = s0 + TBLOCK < S ? s0 + TBLOCK : S;
        uint16_t *img = (uint16_t *)v->data + n * v->stride[0];
        float *dense = t->scatter ? NULL : t->dst + (n * S + s0) * C;
        const float *from = t->scatter ? t->src + (n * S + s0) * C : NULL;
        if (t->nxc && !t->scatter) {
            cv((s1 - s0) * C, img + s0 * C, dense, 1);
        } else if (t->nxc && !epi) {
            cv((s1 - s0) * C, from, img + s0 * C, 0);
        } else if (t->nxc) {
            for (int64_t c0 = 0; c0 < C; c0 += TBLOCK) {
                const int64_t cn = C - c0 < TBLOCK ? C - c0 : TBLOCK;
                for (int64_t j = 0; j < cn; j++)
                    bias[j] = epi->bias ? (float)nconv__load(epi->bias->data, epi->bias->dt, (c0 + j) * epi->bias->stride[0]) : 0.0f;
                for (int64_t q = 0; q < s1 - s0; q++) {
                    for (int64_t j = 0; j < cn; j++) {
                        const float val = from[q * C + c0 + j] + bias[j];
                        tmp[j] = epi->relu && val < 0 ? 0.0f : val; /* NaN stays NaN, as torch.relu */
                    }
                    cv(cn, tmp, img + (s0 + q) * C + c0, 0);
                }
            }
        } else if (!t->scatter) {
            t16(C, s1 - s0, img + s0, v->stride[1], dense, C, 1);
        } else if (!epi) {
            t16(s1 - s0, C, from, C, img + s0, v->stride[1], 0);
        } else {
            for (int64_t c0 = 0; c0 < C; c0 += CBLOCK) {
                const int64_t cn = C - c0 < CBLOCK ? C - c0 : CBLOCK;
                tr(s1 - s0, cn, from + c0, C, tmp, TBLOCK);
                for (int64_t j = 0; j < cn; j++) {
                    float *row = tmp + j * TBLOCK;
                    const nconv_view *bv = epi->bias;
                    const float b = bv ? (float)nconv__load(bv->data, bv->dt, (c0 + j) * bv->stride[0]) : 0.0f;
                    for (int64_t q = 0; q < s1 - s0; q++) {
                        const float val = row[q] + b;
                        row[q] = epi->relu && val < 0 ? 0.0f : val;
                    }
                    cv(s1 - s0, row, img + (c0 + j) * v->stride[1] + s0, 0);
                }
            }
        }
    }
}

static int convertible(const nconv_view *v, int *nxc) {
    if (v->dt != NCONV_F16 && v->dt != NCONV_BF16) return 0;
    *nxc = nxc_dense(v);
    return *nxc || spatial_dense(v);
}

void nconv__gather_nxc_f32(const nconv_exec *e, const nconv_view *v, float *dst) {
    const int64_t N = v->shape[0], C = v->shape[1], S = v->shape[2] * v->shape[3] * v->shape[4];
    int nxc = 0;
    if (v->dt == NCONV_F32 && spatial_dense(v)) {
        transpose_ctx t = {v, NULL, NULL, dst, C, S, nconv__div_up(S, TBLOCK), 0};
        nconv__parallel(e, transpose_task, &t);
        return;
    }
    if (convertible(v, &nxc)) {
        convert_ctx t = {e, v, NULL, NULL, dst, C, S, nconv__div_up(S, TBLOCK), 0, nxc};
        nconv__parallel(e, convert_task, &t);
        return;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < v->shape[2]; i++)
            for (int64_t j = 0; j < v->shape[3]; j++)
                for (int64_t k = 0; k < v->shape[4]; k++) {
                    const int64_t base = n * v->stride[0] + i * v->stride[2] + j * v->stride[3] + k * v->stride[4];
                    float *d = dst + ((n * v->shape[2] + i) * v->shape[3] + j) * v->shape[4] * C + k * C;
                    for (int64_t c = 0; c < C; c++) d[c] = (float)nconv__load(v->data, v->dt, base + c * v->stride[1]);
                }
}

/* The 16-bit channels-last copy of NCHW planes with an even channel count, bits unchanged: each
 * pair of channels' runs interleaved into 32-bit lanes, which the f32 transpose moves as they
 * are (a lane is a pixel's two channels, side by side in the copy), CBLOCK pairs at a time. */
typedef struct gather16_ctx {
    const nconv_exec *e;
    const nconv_view *v;
    uint16_t *dst;
    int64_t C, S, blocks;
} gather16_ctx;

static void gather16_task(void *arg, int tid, int nthreads) {
    const gather16_ctx *t = arg;
    const nconv_view *v = t->v;
    const nconv_f32_transpose_fn tr = t->e->k->transpose;
    const int64_t C = t->C, S = t->S;
    float tmp[CBLOCK * TBLOCK]; /* 32-bit lanes: the transpose moves their bits as they are */
    int64_t u0, u1;
    nconv__split(v->shape[0] * t->blocks, tid, nthreads, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t n = u / t->blocks, s0 = (u % t->blocks) * TBLOCK, len = S - s0 < TBLOCK ? S - s0 : TBLOCK;
        const uint16_t *img = (const uint16_t *)v->data + n * v->stride[0] + s0;
        uint16_t *dense = t->dst + (n * S + s0) * C;
        for (int64_t c0 = 0; c0 < C; c0 += 2 * CBLOCK) {
            const int64_t pairs = (C - c0 < 2 * CBLOCK ? C - c0 : 2 * CBLOCK) / 2;
            for (int64_t j = 0; j < pairs; j++) {
                const uint16_t *lo = img + (c0 + 2 * j) * v->stride[1], *hi = lo + v->stride[1];
                float *d = tmp + j * TBLOCK;
                for (int64_t q = 0; q < len; q++) {
                    const uint32_t both = (uint32_t)lo[q] | (uint32_t)hi[q] << 16;
                    memcpy(d + q, &both, sizeof both);
                }
            }
            tr(pairs, len, tmp, TBLOCK, (float *)(dense + c0), C / 2);
        }
    }
}

void nconv__gather_nxc_16(const nconv_exec *e, const nconv_view *v, uint16_t *dst) {
    const int64_t N = v->shape[0], C = v->shape[1], S = v->shape[2] * v->shape[3] * v->shape[4];
    if (spatial_dense(v) && C % 2 == 0) {
        gather16_ctx t = {e, v, dst, C, S, nconv__div_up(S, TBLOCK)};
        nconv__parallel(e, gather16_task, &t);
        return;
    }
    const uint16_t *src = v->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < v->shape[2]; i++)
            for (int64_t j = 0; j < v->shape[3]; j++)
                for (int64_t k = 0; k < v->shape[4]; k++) {
                    const int64_t base = n * v->stride[0] + i * v->stride[2] + j * v->stride[3] + k * v->stride[4];
                    uint16_t *d = dst + ((n * v->shape[2] + i) * v->shape[3] + j) * v->shape[4] * C + k * C;
                    for (int64_t c = 0; c < C; c++) d[c] = src[base + c * v->stride[1]];
                }
}

void nconv__scatter_nxc_f32(const nconv_exec *e, const nconv_view *v, const float *src, const nconv_epi *epi) {
    const int64_t N = v->shape[0], C = v->shape[1], S = v->shape[2] * v->shape[3] * v->shape[4];
    if (epi && !epi->bias && !epi->z && !epi->relu) epi = NULL;
    const nconv_view *z = epi ? epi->z : NULL;
    int nxc = 0;
    if (v->dt == NCONV_F32 && !z && spatial_dense(v)) {
        transpose_ctx t = {v, epi, src, NULL, C, S, nconv__div_up(S, TBLOCK), 1};
        nconv__parallel(e, transpose_task, &t);
        return;
    }
    if (!z && convertible(v, &nxc)) {
        convert_ctx t = {e, v, epi, src, NULL, C, S, nconv__div_up(S, TBLOCK), 1, nxc};
        nconv__parallel(e, convert_task, &t);
        return;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t s0 = 0; s0 < S; s0 += TBLOCK) {
            const int64_t s1 = s0 + TBLOCK < S ? s0 + TBLOCK : S;
            for (int64_t c = 0; c < C; c++) {
                const float bias = epi && epi->bias ? (float)nconv__load(epi->bias->data, epi->bias->dt, c * epi->bias->stride[0]) : 0.0f;
                for (int64_t s = s0; s < s1; s++) {
                    /* Spatial index s -> (i, j, k) for strided views. */
                    const int64_t k = s % v->shape[4], j = (s / v->shape[4]) % v->shape[3], i = s / (v->shape[3] * v->shape[4]);
                    const int64_t off = n * v->stride[0] + c * v->stride[1] + i * v->stride[2] + j * v->stride[3] + k * v->stride[4];
                    float val = src[(n * S + s) * C + c];
                    if (epi) {
                        val += bias;
                        if (z) {
                            const int64_t zo = n * z->stride[0] + c * z->stride[1] + i * z->stride[2] + j * z->stride[3] + k * z->stride[4];
                            val += (float)(epi->alpha * nconv__load(z->data, z->dt, zo));
                        }
                        if (epi->relu && val < 0) val = 0.0f; /* NaN stays NaN, as torch.relu */
                    }
                    if (v->dt == NCONV_F32) ((float *)v->data)[off] = val;
                    else nconv__store1(v->data, v->dt, off, val);
                }
            }
        }
}

/* ---------------------------------------------- elementwise on views */

/* Offsets of element (n, c, i, j, k) in two rank-5 views of one shape. */
#define VIEW_OFF(v, n, c, i, j, k) \
    ((n) * (v)->stride[0] + (c) * (v)->stride[1] + (i) * (v)->stride[2] + (j) * (v)->stride[3] + (k) * (v)->stride[4])

void nconv__relu_grad(const nconv_view *dst, const nconv_view *dy, const nconv_view *y) {
    const int64_t *s = dst->shape;
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t c = 0; c < s[1]; c++)
            for (int64_t i = 0; i < s[2]; i++)
                for (int64_t j = 0; j < s[3]; j++)
                    for (int64_t k = 0; k < s[4]; k++) {
                        const double g = nconv__load(dy->data, dy->dt, VIEW_OFF(dy, n, c, i, j, k));
                        const double out = nconv__load(y->data, y->dt, VIEW_OFF(y, n, c, i, j, k));
                        /* as torch's threshold_backward: a NaN output passes the gradient */
                        nconv__store1(dst->data, dst->dt, VIEW_OFF(dst, n, c, i, j, k), out <= 0 ? 0.0 : g);
                    }
}

/* dst = alpha * src, or dst += alpha * src with add */
static void scaled(const nconv_view *dst, const nconv_view *src, double alpha, int add) {
    const int64_t *s = dst->shape;
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t c = 0; c < s[1]; c++)
            for (int64_t i = 0; i < s[2]; i++)
                for (int64_t j = 0; j < s[3]; j++)
                    for (int64_t k = 0; k < s[4]; k++) {
                        const int64_t off = VIEW_OFF(dst, n, c, i, j, k);
                        const double v = alpha * nconv__load(src->data, src->dt, VIEW_OFF(src, n, c, i, j, k));
                        nconv__store1(dst->data, dst->dt, off, add ? nconv__load(dst->data, dst->dt, off) + v : v);
                    }
}

void nconv__scale_copy(const nconv_view *dst, const nconv_view *src, double alpha) { scaled(dst, src, alpha, 0); }
void nconv__add_scaled(const nconv_view *dst, const nconv_view *src, double alpha) { scaled(dst, src, alpha, 1); }

void nconv__add_f32(const nconv_view *dst, const nconv_view *src) {
    const int64_t *s = dst->shape;
    float *d = dst->data;
    const float *a = src->data;
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t c = 0; c < s[1]; c++)
            for (int64_t i = 0; i < s[2]; i++)
                for (int64_t j = 0; j < s[3]; j++)
                    for (int64_t k = 0; k < s[4]; k++) d[VIEW_OFF(dst, n, c, i, j, k)] += a[VIEW_OFF(src, n, c, i, j, k)];
}

int nconv__f32_all_finite(const float *p, int64_t n) {
    uint32_t bad = 0; /* or of exponents of all ones: integer lanes, which the compiler vectorizes */
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

int nconv__view_all_finite(const nconv_view *v) {
    const int64_t *s = v->shape;
    if (v->dt == NCONV_F32 && nconv__view_is_dense(v)) return nconv__f32_all_finite(v->data, nconv__view_numel(v));
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t c = 0; c < s[1]; c++)
            for (int64_t i = 0; i < s[2]; i++)
                for (int64_t j = 0; j < s[3]; j++)
                    for (int64_t k = 0; k < s[4]; k++)
                        if (!isfinite(nconv__load(v->data, v->dt, VIEW_OFF(v, n, c, i, j, k)))) return 0;
    return 1;
}

void nconv__fill(const nconv_view *dst, const nconv_view *bias) {
    const int64_t *s = dst->shape;
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t c = 0; c < s[1]; c++) {
            const double v = bias ? nconv__load(bias->data, bias->dt, c * bias->stride[0]) : 0.0;
            for (int64_t i = 0; i < s[2]; i++)
                for (int64_t j = 0; j < s[3]; j++)
                    for (int64_t k = 0; k < s[4]; k++) nconv__store1(dst->data, dst->dt, VIEW_OFF(dst, n, c, i, j, k), v);
        }
}

typedef struct sums_ctx {
    const nconv_view *src;
    double *lane; /* lane[l * C + c] */
} sums_ctx;

/* a[l] += x[i] for i = l mod 4, i < n, in order: lane l's sum as every layout takes it (the lanes
 * are independent, so they add side by side as one vector). */
static inline void sum_lanes(const float *x, int64_t n, double a[4]) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) a[l] += x[i + l];
    for (; i < n; i++) a[i % 4] += x[i];
}

/* Threads own channel ranges: every channel is summed in the same order for any thread count. */
static void sums_task(void *arg, int tid, int nthreads) {
    const sums_ctx *sc = arg;
    const nconv_view *src = sc->src;
    const int64_t *s = src->shape, C = s[1];
    const int64_t S = s[2] * s[3] * s[4];
    double *lane = sc->lane;
    int64_t c0, c1;
    nconv__split(C, tid, nthreads, &c0, &c1);
    for (int64_t l = 0; l < 4; l++)
        for (int64_t c = c0; c < c1; c++) lane[l * C + c] = 0;
    if (nconv__view_is_nxc_f32(src)) {
        const nconv_f32_chsum_fn chsum = nconv__kernels()->chsum;
        for (int64_t n = 0; n < s[0]; n++) chsum(S, c1 - c0, (const float *)src->data + n * S * C + c0, C, lane + c0, C);
    } else if (src->dt == NCONV_F32 && spatial_dense(src)) {
        for (int64_t c = c0; c < c1; c++) {
            double a[4] = {0, 0, 0, 0};
            for (int64_t n = 0; n < s[0]; n++) {
                sum_lanes((const float *)src->data + n * src->stride[0] + c * src->stride[1], S, a);
            }
            for (int l = 0; l < 4; l++) lane[l * C + c] = a[l];
        }
    } else if (nconv__is_16bit(src->dt) && (nconv__view_is_nxc(src) || spatial_dense(src))) {
        /* 16-bit: blocks widened (rows of the channel range, or runs of a plane), then summed as
         * f32 is, in the same order: blocks of whole lanes (WIDE16 rows, a multiple of 4) */
        enum { WIDE16 = 4096 };
        float tmp[WIDE16];
        const nconv_kernels *k = nconv__kernels();
        const nconv_convert16_fn cv = nconv__convert16(k, src->dt);
        const uint16_t *d = src->data;
        if (nconv__view_is_nxc(src)) {
            for (int64_t cb = c0; cb < c1; cb += 256) { /* channels in blocks, rows in blocks of 4 * 4 at least */
                const int64_t cn = c1 - cb < 256 ? c1 - cb : 256, rows = WIDE16 / cn - WIDE16 / cn % 4;
                for (int64_t n = 0; n < s[0]; n++)
                    for (int64_t p0 = 0; p0 < S; p0 += rows) {
                        const int64_t r = S - p0 < rows ? S - p0 : rows;
                        for (int64_t q = 0; q < r; q++) cv(cn, d + (n * S + p0 + q) * C + cb, tmp + q * cn, 1);
                        k->chsum(r, cn, tmp, cn, lane + cb, C);
                    }
            }
        } else {
            for (int64_t c = c0; c < c1; c++) {
                double a[4] = {0, 0, 0, 0};
                for (int64_t n = 0; n < s[0]; n++)
                    for (int64_t p0 = 0; p0 < S; p0 += WIDE16) {
                        const int64_t r = S - p0 < WIDE16 ? S - p0 : WIDE16;
                        cv(r, d + n * src->stride[0] + c * src->stride[1] + p0, tmp, 1);
                        sum_lanes(tmp, r, a); /* p0 is a multiple of 4 */
                    }
                for (int l = 0; l < 4; l++) lane[l * C + c] = a[l];
            }
        }
    } else {
        for (int64_t c = c0; c < c1; c++)
            for (int64_t n = 0; n < s[0]; n++)
                for (int64_t i = 0, p = 0; i < s[2]; i++)
                    for (int64_t j = 0; j < s[3]; j++)
                        for (int64_t k = 0; k < s[4]; k++, p++)
                            lane[(p % 4) * C + c] += nconv__load(src->data, src->dt, VIEW_OFF(src, n, c, i, j, k));
    }
}

void nconv__channel_sums(nconv_pool *pool, int threads, const nconv_view *src, double *sums) {
    const int64_t C = src->shape[1];
    /* Per channel, four partial sums by spatial index mod 4, each over n then
     * spatial, combined as (l0 + l1) + (l2 + l3): the same bits in every
     * layout, and the NCHW path is not one long dependency chain. */
    sums_ctx sc = {src, sums + C};
    nconv__parallel_on(pool, threads, sums_task, &sc);
    nconv__channel_sums_of_lanes(sc.lane, C, sums);
}

void nconv__channel_sums_of_lanes(const double *lane, int64_t C, double *sums) {
    for (int64_t c = 0; c < C; c++) sums[c] = (lane[c] + lane[C + c]) + (lane[2 * C + c] + lane[3 * C + c]);
}

void nconv__view_dense_like(nconv_view *v, void *data, nconv_dtype dt, const nconv_view *like) {
    *v = *like;
    v->data = data;
    v->dt = dt;
    /* Channels innermost when `like` has them innermost, else C order. */
    const int cl = like->rank == 5 && like->stride[1] == 1 && like->shape[1] > 1;
    const int order[5] = {1, 4, 3, 2, 0}, corder[5] = {4, 3, 2, 1, 0};
    int64_t st = 1;
    for (int i = 0; i < v->rank; i++) {
        const int d = v->rank == 5 ? (cl ? order[i] : corder[i]) : v->rank - 1 - i;
        v->stride[d] = st;
        st *= v->shape[d];
    }
}

/* ------------------------------- operands of the channels-last algorithms */

const float *nconv__nxc_input(const nconv_exec *e, const nconv_view *v, float *buf) {
    if (nconv__view_is_nxc_f32(v)) return (const float *)v->data;
    nconv__gather_nxc_f32(e, v, buf);
    return buf;
}

float *nconv__nxc_output(const nconv_view *v, const nconv_epi *epi, float *buf, int *fuse) {
    *fuse = nconv__view_is_nxc_f32(v) && (!epi || !epi->z);
    return *fuse ? (float *)v->data : buf;
}

unsigned nconv__exec_copies(const nconv_exec *e) {
    const int z = e->epi && e->epi->z;
    const int cx = !nconv__view_is_nxc_f32(e->x) || (e->dir == NCONV_DIR_BWD_D && z);
    const int cy = !nconv__view_is_nxc_f32(e->y) || (e->dir == NCONV_DIR_FWD && z);
    return (cx ? NCONV_COPY_X : 0u) | (cy ? NCONV_COPY_Y : 0u);
}

int64_t nconv__dw_w_offset(const nconv_core *c, const nconv_view *w, int64_t ch, int64_t t) {
    const int64_t k0 = t / (c->k[1] * c->k[2]), k1 = (t / c->k[2]) % c->k[1], k2 = t % c->k[2];
    return ch * w->stride[0] + k0 * w->stride[2] + k1 * w->stride[3] + k2 * w->stride[4];
}

/* The taps in nested loops, not through nconv__dw_w_offset: its divisions per tap, over every
 * channel, cost a tenth of a small depthwise layer's run. */
int nconv__dw_gather_w(const nconv_core *c, const nconv_view *w, int64_t ch, int reverse, float *wt) {
    const int64_t KS = nconv__core_kernel_spatial(c);
    int finite = 1;
    /* (a dim of one tap may have any stride: 2D weights leave D's unset) */
    if (w->dt == NCONV_F32 && (c->k[2] == 1 || w->stride[4] == 1) && (c->k[1] == 1 || w->stride[3] == c->k[2]) &&
        (c->k[0] == 1 || w->stride[2] == c->k[1] * c->k[2])) {
        /* a channel's taps one after another (dense weights): no per-tap offsets or dtype dispatch */
        const float *src = (const float *)w->data + ch * w->stride[0];
        for (int64_t t = 0; t < KS; t++) {
            const float v = src[t];
            wt[reverse ? KS - 1 - t : t] = v;
            finite &= v - v == 0.0f; /* inf - inf and NaN - NaN are NaN */
        }
        return finite;
    }
    for (int64_t k0 = 0, t = 0; k0 < c->k[0]; k0++)
        for (int64_t k1 = 0; k1 < c->k[1]; k1++)
            for (int64_t k2 = 0; k2 < c->k[2]; k2++, t++) {
                const int64_t off = ch * w->stride[0] + k0 * w->stride[2] + k1 * w->stride[3] + k2 * w->stride[4];
                const float v = nconv__load_f32(w->data, w->dt, off);
                wt[reverse ? KS - 1 - t : t] = v;
                finite &= isfinite(v) != 0;
            }
    return finite;
}

void nconv__dw_store_w(const nconv_core *c, const nconv_view *w, int64_t ch, const float *acc) {
    for (int64_t k0 = 0, t = 0; k0 < c->k[0]; k0++)
        for (int64_t k1 = 0; k1 < c->k[1]; k1++)
            for (int64_t k2 = 0; k2 < c->k[2]; k2++, t++) {
                const int64_t off = ch * w->stride[0] + k0 * w->stride[2] + k1 * w->stride[3] + k2 * w->stride[4];
                if (w->dt == NCONV_F32) ((float *)w->data)[off] = acc[t];
                else nconv__store1(w->data, w->dt, off, acc[t]);
            }
}

void nconv__epi_init(const nconv_epi *epi, float *init, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        init[i] = epi && epi->bias ? (float)nconv__load(epi->bias->data, epi->bias->dt, i * epi->bias->stride[0]) : 0.0f;
}

void nconv__make_view(int ndims, nconv_dtype dt, const nconv_tensor *t, int64_t offset, int64_t a, int64_t b,
                      const int64_t *sp, nconv_view *v) {
    memset(v, 0, sizeof *v);
    v->data = (char *)t->data + (ptrdiff_t)(offset * (int64_t)nconv_dtype_size(dt));
    v->dt = dt;
    v->rank = 5;
    v->shape[0] = a, v->shape[1] = b;
    v->stride[0] = t->stride[0], v->stride[1] = t->stride[1];
    const int off = 3 - ndims;
    v->shape[2] = v->shape[3] = v->shape[4] = 1;
    for (int i = 0; i < ndims; i++) v->shape[2 + off + i] = sp[i], v->stride[2 + off + i] = t->stride[2 + i];
}
