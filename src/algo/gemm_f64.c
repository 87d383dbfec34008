/*
 * The f64 GEMM of algorithm "gemm": packed and blocked as in BLIS, around
 * the f64_gemm micro-kernel of the kernel table. B's block (KC x NC) is
 * packed into panels of the tile's width, A's block (MC x KC) into panels of
 * six rows; both are zero-padded to whole tiles, and tiles that stick out
 * of C go through a scratch tile. Every element of C is summed over k in
 * order, one KC block after another, whatever N is and however the caller
 * splits it: results do not depend on the split.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { KC = 256, MC = 16 * NCONV_F64_MR, NC = 1024 };

size_t nconv__f64_gemm_pack_bytes(void) { return sizeof(double) * (size_t)(MC * KC + KC * NC); }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* B[pc .. pc + kc) x [jc .. jc + nc) into panels of nr columns, panel j0 / nr at dst + j0 * kc. */
static void pack_b(int64_t kc, int64_t nc, int nr, const double *B, int64_t ldb, double *dst) {
    for (int64_t j0 = 0; j0 < nc; j0 += nr, dst += kc * nr) {
        const int64_t jn = min64(nr, nc - j0);
        for (int64_t k = 0; k < kc; k++) {
            const double *src = B + k * ldb + j0;
            double *d = dst + k * nr;
            memcpy(d, src, sizeof(double) * (size_t)jn);
            for (int64_t j = jn; j < nr; j++) d[j] = 0.0;
        }
    }
}

/* A[ic .. ic + mc) x [pc .. pc + kc) into panels of six rows, panel i0 / 6 at dst + i0 * kc. */
static void pack_a(int64_t mc, int64_t kc, const double *A, int64_t rsa, int64_t csa, double *dst) {
    for (int64_t i0 = 0; i0 < mc; i0 += NCONV_F64_MR, dst += kc * NCONV_F64_MR) {
        const int64_t in = min64(NCONV_F64_MR, mc - i0);
        for (int64_t k = 0; k < kc; k++) {
            double *d = dst + k * NCONV_F64_MR;
            for (int64_t r = 0; r < in; r++) d[r] = A[(i0 + r) * rsa + k * csa];
            for (int64_t r = in; r < NCONV_F64_MR; r++) d[r] = 0.0;
        }
    }
}

void nconv__f64_gemm(const nconv_kernels *kt, int64_t M, int64_t N, int64_t K, const double *A, int64_t rsa,
                     int64_t csa, const double *B, int64_t ldb, double *C, int64_t ldc, int accumulate, double *pack) {
    const int nr = kt->f64_nr;
    double *pa = pack, *pb = pack + MC * KC;
    if (K == 0 && !accumulate)
        for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(double) * (size_t)N);
    for (int64_t jc = 0; jc < N; jc += NC) {
        const int64_t nc = min64(NC, N - jc);
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = min64(KC, K - pc);
            const int acc = accumulate || pc > 0;
            pack_b(kc, nc, nr, B + pc * ldb + jc, ldb, pb);
            for (int64_t ic = 0; ic < M; ic += MC) {
                const int64_t mc = min64(MC, M - ic);
                pack_a(mc, kc, A + ic * rsa + pc * csa, rsa, csa, pa);
                for (int64_t j0 = 0; j0 < nc; j0 += nr)
                    for (int64_t i0 = 0; i0 < mc; i0 += NCONV_F64_MR) {
                        const double *a = pa + i0 * kc, *b = pb + j0 * kc;
                        double *c = C + (ic + i0) * ldc + jc + j0;
                        const int64_t mr = min64(NCONV_F64_MR, mc - i0), jn = min64(nr, nc - j0);
                        if (mr == NCONV_F64_MR && jn == nr) {
                            kt->f64_gemm(kc, a, b, c, ldc, acc);
                            continue;
                        }
                        double tile[NCONV_F64_MR * 16] = {0};
                        for (int64_t r = 0; r < mr && acc; r++) memcpy(tile + r * nr, c + r * ldc, sizeof(double) * (size_t)jn);
                        kt->f64_gemm(kc, a, b, tile, nr, acc);
                        for (int64_t r = 0; r < mr; r++) memcpy(c + r * ldc, tile + r * nr, sizeof(double) * (size_t)jn);
                    }
            }
        }
    }
}
