/*
 * Micro-kernel benchmark: each 6 x 16 kernel of every ISA this CPU runs (and
 * the 7 x 16 indirect-B kernel where a table has one), on
 * cache-resident operands, against the measured FMA peak (nconv bench's
 * register-only loop, tools/nconv/peak.c, as wide as the ISA's vectors: 16
 * lanes for AVX-512, 8 otherwise). Usage: kernel_bench [kc]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../src/kernels/kernels.h"

#include "cli.h" /* fma_peak_gflops_lanes: tools/nconv/peak.c */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const int64_t kc = argc > 1 ? atoll(argv[1]) : 256;
    float *a = aligned_alloc(64, sizeof(float) * (size_t)(kc * 7 + 64)); /* packed A of up to 7 rows */
    float *w = aligned_alloc(64, sizeof(float) * (size_t)(kc * NCONV_NR + 64));
    float c[NCONV_MR][NCONV_NR], init[NCONV_NR] = {0}, init2[2 * NCONV_NR] = {0};
    for (int64_t i = 0; i < kc * 7; i++) a[i] = 1e-3f * (float)(i % 7);
    for (int64_t i = 0; i < kc * NCONV_NR; i++) w[i] = 1e-3f * (float)(i % 5);
    const float *rows[NCONV_MR];
    /* gemm_ib reads B rows through pointers: consecutive rows of w. */
    const float **brows = malloc(sizeof(float *) * (size_t)kc);
    for (int64_t k = 0; k < kc; k++) brows[k] = w + k * NCONV_NR;
    float *crow[NCONV_MR];
    for (int r = 0; r < NCONV_MR; r++) rows[r] = a + r * kc, crow[r] = c[r];
    /* This VM's clock drifts by tens of percent within seconds: each figure is
     * the best of several rounds, the peak included, so the ratio compares
     * the best each loop reached. */
    /* The all-panels variants run two column panels (6 x 32; the second panel's B 16 floats on):
     * the AVX-512 kernels take them together, sharing each broadcast of A. */
    enum { ROUNDS = 4, KERNELS = 7 };
    const char *const names[KERNELS] = {"f32_gemm_6x16",    "f32_igemm_6x16",    "f32_gemm_ib_6x16",
                                        "f32_gemm_6x16 x2", "f32_igemm_6x16 x2", "f32_gemm_ib_6x16 x2",
                                        "f32_gemm_ib_7x16 x2"};
    float c2[7][2 * NCONV_NR], *crow2[NCONV_MR];
    for (int r = 0; r < NCONV_MR; r++) crow2[r] = c2[r];
    for (int isa = NCONV_ISA_BEST; isa >= NCONV_ISA_GENERIC; isa--) {
        const nconv_kernels *k = nconv__kernels_for((nconv_isa)isa);
        if (!k) continue;
        if (isa > (int)nconv__detect_isa()) {
            printf("%-8s skipped: the CPU lacks the ISA (or NCONV_MAX_ISA caps it)\n", k->name);
            continue;
        }
        const int lanes = isa == NCONV_ISA_AVX512 ? 16 : 8;
        double gf[KERNELS] = {0}, peak = 0;
        for (int round = 0; round < ROUNDS; round++) {
            const double p = fma_peak_gflops_lanes(1, lanes);
            if (p > peak) peak = p;
            for (int which = 0; which < KERNELS; which++) {
                if (which == 6 && !k->gemm_ib7_np) continue;
                const int64_t np = which < 3 ? 1 : 2, mr = which == 6 ? 7 : NCONV_MR;
                const int64_t reps = (int64_t)(1e9 / (2.0 * mr * NCONV_NR * np * (double)kc)) / (isa ? 1 : 20);
                double best = 1e30;
                for (int trial = 0; trial < 5; trial++) {
                    double t0 = now();
                    for (int64_t i = 0; i < reps; i++) {
                        if (which == 0) k->gemm(NCONV_MR, NCONV_NR, kc, a, w, c[0], NCONV_NR, NULL, NCONV_GEMM_ACCUMULATE);
                        else if (which == 1) k->igemm(NCONV_MR, NCONV_NR, kc, 1, rows, 0, NULL, w, crow, init, 0);
                        else if (which == 2) k->gemm_ib(NCONV_MR, NCONV_NR, kc, a, brows, 0, c[0], NCONV_NR, 1);
                        else if (which == 3)
                            k->gemm_np(NCONV_MR, 2, NCONV_NR, kc, a, NCONV_MR, w, 16, c2[0], 2 * NCONV_NR, NULL,
                                       NCONV_GEMM_ACCUMULATE);
                        else if (which == 4) k->igemm_np(NCONV_MR, 2, NCONV_NR, kc, 1, rows, 0, NULL, w, 16, crow2, init2, 0);
                        else if (which == 5) k->gemm_ib_np(NCONV_MR, 2, NCONV_NR, kc, a, NCONV_MR, brows, 0, 16, c2[0], 2 * NCONV_NR, 1);
                        else k->gemm_ib7_np(7, 2, NCONV_NR, kc, a, 7, brows, 0, 16, c2[0], 2 * NCONV_NR, 1);
                    }
                    double t = now() - t0;
                    if (t < best) best = t;
                }
                const double g = 2.0 * (double)mr * NCONV_NR * (double)np * (double)kc * (double)reps / best * 1e-9;
                if (g > gf[which]) gf[which] = g;
            }
        }
        for (int which = 0; which < KERNELS; which++)
            if (gf[which] > 0) printf("%-8s %-22s %8.1f GFLOP/s  %5.1f%% of peak\n", k->name, names[which], gf[which],
                   peak > 0 ? 100 * gf[which] / peak : 0);
        printf("%-8s FMA peak (%d lanes, 1 thread, best of %d rounds): %.1f GFLOP/s; kc = %lld\n", k->name, lanes,
               ROUNDS, peak, (long long)kc);
    }
    printf("(c[0][0] = %g)\n", (double)c[0][0]);
    free(a);
    free(w);
    free(brows);
    return 0;
}
