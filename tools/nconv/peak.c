/*
 * The FMA peak of this machine for the kernels nconv runs on it: a
 * register-only loop of independent FMAs per thread, all threads at once,
 * 16 wide when the AVX-512 kernels are in use, else 8 wide. Compiled with
 * -mavx2 -mfma (the 16-wide loop by a target attribute) and run only when
 * the CPU has them; otherwise the peak is reported as unknown (0).
 */
#include "cli.h"

#include "../../src/kernels/kernels.h"

#include <pthread.h>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

enum { ITERS = 1 << 23 };

/* Twelve independent chains in registers (12 accumulators + 2 constants of
 * the 16 ymm registers): more than FMA latency x FMA pipes on current x86
 * cores, so the loop is bound by FMA throughput alone. The chains start from
 * different values read through a volatile, and the empty asm pins them to
 * registers each iteration: identical chains were once merged by the
 * compiler into one, so the loop measured FMA latency and reported 1.5x the
 * true peak. */
enum { CHAINS = 12 };

static void *fma_loop(void *out) {
    static const volatile float seed[CHAINS] = {1.00f, 1.01f, 1.02f, 1.03f, 1.04f, 1.05f,
                                                1.06f, 1.07f, 1.08f, 1.09f, 1.10f, 1.11f};
    __m256 a0 = _mm256_set1_ps(seed[0]), a1 = _mm256_set1_ps(seed[1]), a2 = _mm256_set1_ps(seed[2]),
           a3 = _mm256_set1_ps(seed[3]), a4 = _mm256_set1_ps(seed[4]), a5 = _mm256_set1_ps(seed[5]),
           a6 = _mm256_set1_ps(seed[6]), a7 = _mm256_set1_ps(seed[7]), a8 = _mm256_set1_ps(seed[8]),
           a9 = _mm256_set1_ps(seed[9]), a10 = _mm256_set1_ps(seed[10]), a11 = _mm256_set1_ps(seed[11]);
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < ITERS; i++) {
        a0 = _mm256_fmadd_ps(a0, m, c), a1 = _mm256_fmadd_ps(a1, m, c), a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c), a4 = _mm256_fmadd_ps(a4, m, c), a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c), a7 = _mm256_fmadd_ps(a7, m, c), a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c), a10 = _mm256_fmadd_ps(a10, m, c), a11 = _mm256_fmadd_ps(a11, m, c);
        __asm__("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8),
                "+x"(a9), "+x"(a10), "+x"(a11));
    }
    const __m256 s = _mm256_add_ps(
        _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                      _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
        _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    *(float *)out = _mm256_cvtss_f32(s); /* keeps the loop alive */
    return NULL;
}

/* The same loop 16 wide (the 32 zmm registers leave room for the same chains). */
__attribute__((target("avx512f"))) static void *fma_loop_avx512(void *out) {
    static const volatile float seed[CHAINS] = {1.00f, 1.01f, 1.02f, 1.03f, 1.04f, 1.05f,
                                                1.06f, 1.07f, 1.08f, 1.09f, 1.10f, 1.11f};
    __m512 a0 = _mm512_set1_ps(seed[0]), a1 = _mm512_set1_ps(seed[1]), a2 = _mm512_set1_ps(seed[2]),
           a3 = _mm512_set1_ps(seed[3]), a4 = _mm512_set1_ps(seed[4]), a5 = _mm512_set1_ps(seed[5]),
           a6 = _mm512_set1_ps(seed[6]), a7 = _mm512_set1_ps(seed[7]), a8 = _mm512_set1_ps(seed[8]),
           a9 = _mm512_set1_ps(seed[9]), a10 = _mm512_set1_ps(seed[10]), a11 = _mm512_set1_ps(seed[11]);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < ITERS; i++) {
        a0 = _mm512_fmadd_ps(a0, m, c), a1 = _mm512_fmadd_ps(a1, m, c), a2 = _mm512_fmadd_ps(a2, m, c);
        a3 = _mm512_fmadd_ps(a3, m, c), a4 = _mm512_fmadd_ps(a4, m, c), a5 = _mm512_fmadd_ps(a5, m, c);
        a6 = _mm512_fmadd_ps(a6, m, c), a7 = _mm512_fmadd_ps(a7, m, c), a8 = _mm512_fmadd_ps(a8, m, c);
        a9 = _mm512_fmadd_ps(a9, m, c), a10 = _mm512_fmadd_ps(a10, m, c), a11 = _mm512_fmadd_ps(a11, m, c);
        __asm__("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                "+v"(a9), "+v"(a10), "+v"(a11));
    }
    const __m512 s = _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                      _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
        _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    *(float *)out = _mm512_reduce_add_ps(s);
    return NULL;
}

double fma_peak_gflops_lanes(int threads, int lanes) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
    if (lanes == 16 && !__builtin_cpu_supports("avx512f")) return 0;
    const int wide = lanes == 16;
    void *(*loop)(void *) = wide ? fma_loop_avx512 : fma_loop;
    if (threads > 64) threads = 64;
    pthread_t tid[64];
    float sink[64];
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_seconds();
        for (int t = 1; t < threads; t++) pthread_create(&tid[t], NULL, loop, &sink[t]);
        loop(&sink[0]);
        for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
        double gf = (double)threads * ITERS * CHAINS * (wide ? 16 : 8) * 2 / (now_seconds() - t0) * 1e-9;
        if (gf > best) best = gf;
    }
    return best;
}

double fma_peak_gflops(int threads) {
    return fma_peak_gflops_lanes(threads, nconv__detect_isa() >= NCONV_ISA_AVX512 ? 16 : 8);
}

#else

double fma_peak_gflops_lanes(int threads, int lanes) {
    (void)threads, (void)lanes;
    return 0;
}

double fma_peak_gflops(int threads) {
    (void)threads;
    return 0;
}

#endif
