/*
 * Backward-weights of small groups, AVX2 + FMA (contract in ../kernels.h).
 * Per pixel one dy vector serves every tap: output channel o of each group
 * is spread over its group's lanes once (an in-lane permute for q = 2, 4, a
 * broadcast load for q = 8), then nt FMAs with the tap vectors of x. The
 * nt x no accumulators (at most 12) stay in registers for the whole run.
 */
#include "../kernels.h"
#include "avx2_util.h"

/* Lanes of group-channel o of each group: q = 4, lanes (l / 4) * 4 + o; q = 2, (l / 2) * 2 + o. */
static inline __m256 spread(__m256 d, int q, int o) {
    if (q == 4) {
        switch (o) {
        case 0: return _mm256_permute_ps(d, 0x00);
        case 1: return _mm256_permute_ps(d, 0x55);
        case 2: return _mm256_permute_ps(d, 0xAA);
        default: return _mm256_permute_ps(d, 0xFF);
        }
    }
    return o == 0 ? _mm256_permute_ps(d, 0xA0) : _mm256_permute_ps(d, 0xF5);
}

/* Accumulators as named variables: as an array, GCC kept some on the stack
 * (a store per FMA). */
#define LOAD_O(o) a0##o = _mm256_loadu_ps(acc + o * 8), a1##o = nt > 1 ? _mm256_loadu_ps(acc + ats + o * 8) : a0##o, \
                  a2##o = nt > 2 ? _mm256_loadu_ps(acc + 2 * ats + o * 8) : a0##o
#define STORE_O(o)                                                  \
    do {                                                            \
        _mm256_storeu_ps(acc + o * 8, a0##o);                       \
        if (nt > 1) _mm256_storeu_ps(acc + ats + o * 8, a1##o);     \
        if (nt > 2) _mm256_storeu_ps(acc + 2 * ats + o * 8, a2##o); \
    } while (0)
#define FMA_O(o)                                                                     \
    do {                                                                             \
        const __m256 s = q == 8 ? _mm256_broadcast_ss(dy + o0 + o) : spread(d, q, o); \
        a0##o = _mm256_fmadd_ps(s, v0, a0##o);                                       \
        if (nt > 1) a1##o = _mm256_fmadd_ps(s, v1, a1##o);                           \
        if (nt > 2) a2##o = _mm256_fmadd_ps(s, v2, a2##o);                           \
    } while (0)

static inline __attribute__((always_inline)) void run(const int q, const int no, const int nt, int64_t n, int64_t o0,
                                                      const float *dy, int64_t dys, const float *const *x,
                                                      int64_t xs, float *acc, int64_t ats) {
    const __m256 z = _mm256_setzero_ps();
    __m256 a00 = z, a10 = z, a20 = z, a01 = z, a11 = z, a21 = z, a02 = z, a12 = z, a22 = z, a03 = z, a13 = z, a23 = z;
    LOAD_O(0);
    if (no > 1) LOAD_O(1);
    if (no > 2) LOAD_O(2);
    if (no > 3) LOAD_O(3);
    const float *x0 = x[0], *x1 = nt > 1 ? x[1] : x[0], *x2 = nt > 2 ? x[2] : x[0];
    for (int64_t i = 0; i < n; i++, dy += dys, x0 += xs, x1 += xs, x2 += xs) {
        const __m256 v0 = _mm256_loadu_ps(x0);
        const __m256 v1 = nt > 1 ? _mm256_loadu_ps(x1) : v0, v2 = nt > 2 ? _mm256_loadu_ps(x2) : v0;
        const __m256 d = q < 8 ? _mm256_loadu_ps(dy) : z;
        FMA_O(0);
        if (no > 1) FMA_O(1);
        if (no > 2) FMA_O(2);
        if (no > 3) FMA_O(3);
    }
    STORE_O(0);
    if (no > 1) STORE_O(1);
    if (no > 2) STORE_O(2);
    if (no > 3) STORE_O(3);
}

#define NT_CASES(Q, NO)                                                   \
    switch (nt) {                                                         \
    case 1: run(Q, NO, 1, n, o0, dy, dys, x, xs, acc, ats); return;       \
    case 2: run(Q, NO, 2, n, o0, dy, dys, x, xs, acc, ats); return;       \
    default: run(Q, NO, 3, n, o0, dy, dys, x, xs, acc, ats); return;      \
    }

void nconv_f32_gbw__avx2(int64_t n, int64_t q, int64_t o0, int64_t no, int64_t nt, const float *dy, int64_t dys,
                         const float *const *x, int64_t xs, float *acc, int64_t ats) {
    if (q == 2) NT_CASES(2, 2)
    if (q == 4) NT_CASES(4, 4)
    switch (no) { /* q == 8: o0 picks the half */
    case 1: NT_CASES(8, 1)
    case 2: NT_CASES(8, 2)
    case 3: NT_CASES(8, 3)
    default: NT_CASES(8, 4)
    }
}
