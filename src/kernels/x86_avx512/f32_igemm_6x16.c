/*
 * Indirect GEMM micro-kernels, 6 rows x 16 columns, AVX-512 (contract in
 * ../kernels.h): the one-panel tile and its np, np16, rows, rows16 and planes
 * variants, on the bodies of f32_igemm_6x16.h.
 */
#include "f32_igemm_6x16.h"

void nconv_f32_igemm_6x16__avx512(int64_t mr, int64_t nc, int64_t kc, int64_t ks, const float *const *a,
                                  int64_t a_off, const float *zero, const float *w, float *const *c,
                                  const float *init, int flags) {
    one_panel(mr, nc, kc, ks, a, a_off, zero, w, c, NULL, 0, init, flags);
}

void nconv_f32_igemm_6x16_np__avx512(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                     const float *const *a, int64_t a_off, const float *zero, const float *w,
                                     int64_t ws, float *const *c, const float *init, int flags) {
    all_panels(mr, np, nc_last, kc, ks, a, a_off, zero, w, ws, c, NULL, 0, init, flags);
}

void nconv_f32_igemm_6x16_np16__avx512(int64_t mr, int64_t np, int64_t nc_last, int64_t kc, int64_t ks,
                                       const float *const *a, int64_t a_off, const float *zero, const float *w,
                                       int64_t ws, uint16_t *const *c, const float *init, int flags) {
    all_panels(mr, np, nc_last, kc, ks, a, a_off, zero, w, ws, NULL, c, 1, init, flags);
}

void nconv_f32_igemm_6x16_rows16__avx512(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                                     int64_t lda, const float *w, int64_t ws, uint16_t *c, int64_t ldc,
                                     const float *init, int flags) {
    NCONV_IGEMM_ROWS_EACH_TILE(uint16_t, all_panels(mr_, np, nc_last, kc, 1, ar_, 0, NULL, w, ws, NULL, cr_, 1, init,
                                                    flags));
}

void nconv_f32_igemm_6x16_rows__avx512(int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a, int64_t lda,
                                   const float *w, int64_t ws, float *c, int64_t ldc, const float *init, int flags) {
    NCONV_IGEMM_ROWS_EACH_TILE(float, all_panels(mr_, np, nc_last, kc, 1, ar_, 0, NULL, w, ws, cr_, NULL, 0, init,
                                                 flags));
}

/* The 16 channels of a finished tile into their planes (channel j at c + j * ldc), j < nc. */
static inline void store_planes16(float *c, int64_t ldc, int64_t nc, __m512 e0, __m512 e1, __m512 e2, __m512 e3,
                                  __m512 e4, __m512 e5) {
    nconv__avx2_store_planes(c, ldc, nc, nconv__avx512_lo(e0), nconv__avx512_lo(e1), nconv__avx512_lo(e2),
                             nconv__avx512_lo(e3), nconv__avx512_lo(e4), nconv__avx512_lo(e5));
    if (nc > 8)
        nconv__avx2_store_planes(c + 8 * ldc, ldc, nc - 8, nconv__avx512_hi(e0), nconv__avx512_hi(e1),
                                 nconv__avx512_hi(e2), nconv__avx512_hi(e3), nconv__avx512_hi(e4),
                                 nconv__avx512_hi(e5));
}

/* Two panels a pass, as igemm_np (one panel ran load-bound: NCHW conv1 at 0.74 of oneDNN). */
void nconv_f32_igemm_6x16_planes__avx512(int64_t np, int64_t nc_last, int64_t kc, int64_t ks, const float *const *a,
                                         int64_t a_off, const float *zero, const float *w, int64_t ws, float *c,
                                         int64_t ldc, const float *init, int flags) {
    const float *const *const at = a;
    const float *const w0 = w;
    int64_t q = 0;
    for (; q + 1 < np; q += 2) {
        ACC_DECL;
        __m512 f0, f1, f2, f3, f4, f5, p0, p1, p2, p3, p4, p5;
        o0 = o1 = o2 = o3 = o4 = o5 = p0 = p1 = p2 = p3 = p4 = p5 = _mm512_setzero_ps();
        e0 = e1 = e2 = e3 = e4 = e5 = _mm512_loadu_ps(init + q * 16);
        f0 = f1 = f2 = f3 = f4 = f5 = _mm512_loadu_ps(init + q * 16 + 16);
        a = at, w = w0 + q * ws;
        IGEMM_REDUCE2();
        IGEMM_FINISH();
        store_planes16(c + q * 16 * ldc, ldc, 16, e0, e1, e2, e3, e4, e5);
        e0 = f0, e1 = f1, e2 = f2, e3 = f3, e4 = f4, e5 = f5;
        o0 = p0, o1 = p1, o2 = p2, o3 = p3, o4 = p4, o5 = p5;
        IGEMM_FINISH();
        store_planes16(c + (q + 1) * 16 * ldc, ldc, q + 2 < np ? 16 : nc_last, e0, e1, e2, e3, e4, e5);
    }
    if (q < np) {
        ACC_DECL;
        o0 = o1 = o2 = o3 = o4 = o5 = _mm512_setzero_ps();
        e0 = e1 = e2 = e3 = e4 = e5 = _mm512_loadu_ps(init + q * 16);
        a = at, w = w0 + q * ws;
        IGEMM_REDUCE();
        IGEMM_FINISH();
        store_planes16(c + q * 16 * ldc, ldc, nc_last, e0, e1, e2, e3, e4, e5);
    }
}
