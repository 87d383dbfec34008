/*
 * Micro-kernel benchmark: every kernel of the GEMM family (the rows come from
 * NCONV_GEMM_KERNELS in kernels.h) of every ISA this CPU runs, on
 * cache-resident operands, against the measured FMA peak (nconv bench's
 * register-only loop, tools/nconv/peak.c, as wide as the ISA's vectors: 16
 * lanes for AVX-512, 8 otherwise). The all-panels (np, rows) kernels run on
 * two column panels (6 x 32, or 7 x 32), the form the framework calls wherever
 * a tile meets two panels. Usage: kernel_bench [kc]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/kernels/kernels.h"

#include "cli.h" /* fma_peak_gflops_lanes: tools/nconv/peak.c */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Cache-resident operands of one kernel call: A (packed, up to 7 rows, or row pointers), B (packed
 * panels, or row pointers), C of two panels, its row pointers, and the reduction length. */
typedef struct operands {
    int64_t kc;
    const float *a, *w, *const *rows, *const *brows;
    float *c, *const *crow, *init;
    uint16_t *const *crow16;       /* C rows in 16 bits (np16) */
    const uint16_t *const *rows16; /* A rows read as bf16 */
} operands;

/* One call of each kernel type, as the framework makes it: mr rows, two panels for np. */
static void call_f32_igemm(nconv_f32_igemm_fn f, const operands *o, int64_t mr) {
    f(mr, NCONV_NR, o->kc, 1, o->rows, 0, NULL, o->w, o->crow, o->init, 0);
}
static void call_f32_igemm_np(nconv_f32_igemm_np_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, 1, o->rows, 0, NULL, o->w, 16, o->crow, o->init, 0);
}
/* rows: one tile of mr rows, A's rows kc apart, C's two panels wide. */
static void call_f32_igemm_rows(nconv_f32_igemm_rows_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, o->a, o->kc, o->w, 16, o->c, 2 * NCONV_NR, o->init, 0);
}
static void call_f32_igemm_rows16(nconv_f32_igemm_rows16_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, o->a, o->kc, o->w, 16, o->crow16[0], 2 * NCONV_NR, o->init, NCONV_IGEMM_BF16);
}
static void call_f32_igemm_np16(nconv_f32_igemm_np16_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, 1, o->rows, 0, NULL, o->w, 16, o->crow16, o->init, NCONV_IGEMM_BF16);
}
/* bf16 operands: A's rows and w read as bf16 (their f32 bits reinterpreted, kc even). */
static void call_bf16_igemm_np(nconv_bf16_igemm_np_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, 1, o->rows16, 0, NULL, (const uint16_t *)o->w, 16, NULL, o->crow16, o->init, 0);
}
static void call_f32_gemm_np16(nconv_f32_gemm_np16_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, o->a, mr, o->w, 16, o->crow16[0], 2 * NCONV_NR, NULL, NCONV_GEMM_BF16);
}
static void call_f32_igemm_planes(nconv_f32_igemm_planes_fn f, const operands *o, int64_t mr) {
    (void)mr;
    f(2, NCONV_NR, o->kc, 1, o->rows, 0, NULL, o->w, 16, o->c, 8, o->init, 0); /* channel j at c + 8 * j */
}
static void call_f32_gemm_ib(nconv_f32_gemm_ib_fn f, const operands *o, int64_t mr) {
    f(mr, NCONV_NR, o->kc, o->a, o->brows, 0, o->c, 2 * NCONV_NR, 1);
}
static void call_f32_gemm_ib_np(nconv_f32_gemm_ib_np_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, o->a, mr, o->brows, 0, 16, o->c, 2 * NCONV_NR, NULL, NCONV_GEMM_ACCUMULATE);
}
static void call_f32_gemm(nconv_f32_gemm_fn f, const operands *o, int64_t mr) {
    f(mr, NCONV_NR, o->kc, o->a, o->w, o->c, 2 * NCONV_NR, NULL, NCONV_GEMM_ACCUMULATE);
}
static void call_f32_gemm_np(nconv_f32_gemm_np_fn f, const operands *o, int64_t mr) {
    f(mr, 2, NCONV_NR, o->kc, o->a, mr, o->w, 16, o->c, 2 * NCONV_NR, NULL, NCONV_GEMM_ACCUMULATE);
}

/* The panels a call of slot `slot` computes (np, rows and planes kernels: two). */
static int64_t panels_of(const char *slot) {
    return strstr(slot, "_np") || strstr(slot, "planes") || strstr(slot, "rows") ? 2 : 1;
}

/* The best GFLOP/s of 5 timed trials of reps calls. */
#define TIME_KERNEL(slot, type, function, avx2, avx512)                                                        \
    if (k->slot) {                                                                                             \
        const int64_t mr = strstr(#function, "7x16") ? 7 : NCONV_MR, np = panels_of(#slot);                    \
        const int64_t reps = (int64_t)(1e9 / (2.0 * mr * NCONV_NR * np * (double)o->kc)) / (k->isa ? 1 : 20); \
        double best = 1e30;                                                                                    \
        for (int trial = 0; trial < 5; trial++) {                                                              \
            const double t0 = now();                                                                           \
            for (int64_t i = 0; i < reps; i++) call_##type(k->slot, o, mr);                                    \
            const double t = now() - t0;                                                                       \
            if (t < best) best = t;                                                                            \
        }                                                                                                      \
        const double g = 2.0 * (double)(mr * NCONV_NR * np) * (double)o->kc * (double)reps / best * 1e-9;      \
        if (g > gf[n]) gf[n] = g;                                                                              \
        names[n++] = #function;                                                                                \
    }

/* One round over the GEMM family's kernels of table k: their GFLOP/s into gf, names into names. */
static int round_of(const nconv_kernels *k, const operands *o, double *gf, const char **names) {
    int n = 0;
    NCONV_GEMM_KERNELS(TIME_KERNEL)
    return n;
}

int main(int argc, char **argv) {
    const int64_t kc = argc > 1 ? atoll(argv[1]) : 256;
    float *a = aligned_alloc(64, sizeof(float) * (size_t)(kc * 7 + 64)); /* packed A of up to 7 rows */
    float *w = aligned_alloc(64, sizeof(float) * (size_t)(kc * 2 * NCONV_NR + 64));
    static float c[7 * NCONV_MR][2 * NCONV_NR], init[2 * NCONV_NR];
    for (int64_t i = 0; i < kc * 7; i++) a[i] = 1e-3f * (float)(i % 7);
    for (int64_t i = 0; i < kc * 2 * NCONV_NR; i++) w[i] = 1e-3f * (float)(i % 5);
    const float *rows[NCONV_MR];
    /* gemm_ib reads B rows through pointers: consecutive rows of w. */
    const float **brows = malloc(sizeof(float *) * (size_t)kc);
    for (int64_t k = 0; k < kc; k++) brows[k] = w + k * NCONV_NR;
    float *crow[NCONV_MR];
    static uint16_t c16[NCONV_MR][2 * NCONV_NR];
    uint16_t *crow16[NCONV_MR];
    const uint16_t *rows16[NCONV_MR];
    for (int r = 0; r < NCONV_MR; r++)
        rows[r] = a + r * kc, crow[r] = c[r], crow16[r] = c16[r], rows16[r] = (const uint16_t *)rows[r];
    const operands o = {kc, a, w, rows, brows, c[0], crow, init, crow16, rows16};
    /* This VM's clock drifts by tens of percent within seconds: each figure is
     * the best of several rounds, the peak included, so the ratio compares
     * the best each loop reached. */
    enum { ROUNDS = 4, MAX_KERNELS = 16 };
    for (int isa = NCONV_ISA_BEST; isa >= NCONV_ISA_GENERIC; isa--) {
        const nconv_kernels *k = nconv__kernels_for((nconv_isa)isa);
        if (!k) continue;
        if (isa > (int)nconv__detect_isa()) {
            printf("%-8s skipped: the CPU lacks the ISA (or NCONV_MAX_ISA caps it)\n", k->name);
            continue;
        }
        const int lanes = isa >= NCONV_ISA_AVX512 ? 16 : 8;
        double gf[MAX_KERNELS] = {0}, peak = 0;
        const char *names[MAX_KERNELS];
        int n = 0;
        for (int round = 0; round < ROUNDS; round++) {
            const double p = fma_peak_gflops_lanes(1, lanes);
            if (p > peak) peak = p;
            n = round_of(k, &o, gf, names);
        }
        for (int i = 0; i < n; i++)
            printf("%-8s %-22s %8.1f GFLOP/s  %5.1f%% of peak\n", k->name, names[i], gf[i],
                   peak > 0 ? 100 * gf[i] / peak : 0);
        printf("%-8s FMA peak (%d lanes, 1 thread, best of %d rounds): %.1f GFLOP/s; kc = %lld\n", k->name, lanes,
               ROUNDS, peak, (long long)kc);
    }
    printf("(c[0][0] = %g)\n", (double)c[0][0]);
    free(a);
    free(w);
    free(brows);
    return 0;
}
