/* The variants of the vector dwtile_bw kernels (x86_avx2/, x86_avx512/), for the file that
 * includes this after its block() and reuse_sums(): each shape with and without the bias
 * gradient's sums (DB), their function types, and the entries of their tables. */
#ifndef NCONV_KERNELS_F32_DWTILE_BW_VARIANTS_H
#define NCONV_KERNELS_F32_DWTILE_BW_VARIANTS_H

typedef void sub_fn(int64_t n, const float *x0, const int64_t *toff, int64_t xs, const float *dy, int64_t ds, float *acc,
                    int64_t as, float *db);
#define SUB_DB(NV, TB, DB)                                                                                             \
    static void s_##NV##_##TB##_##DB(int64_t n, const float *x0, const int64_t *toff, int64_t xs, const float *dy,    \
                                     int64_t ds, float *acc, int64_t as, float *db) {                                \
        block(NV, TB, DB, n, x0, toff, xs, dy, ds, acc, as, db);                                                     \
    }
#define SUB(NV, TB) SUB_DB(NV, TB, 0) SUB_DB(NV, TB, 1)
#define SUB_ENTRY(NV, TB) [0][NV][TB] = s_##NV##_##TB##_0, [1][NV][TB] = s_##NV##_##TB##_1,
typedef void reuse_fn(int64_t n, const float *x, int64_t cs, const float *dy, int64_t cw, float *acc, float *db);
#define REUSE_DB(KT, SP, NV, DB)                                                                                       \
    static void r_##KT##_##SP##_##NV##_##DB(int64_t n, const float *x, int64_t cs, const float *dy, int64_t cw,      \
                                            float *acc, float *db) {                                                 \
        reuse_sums(KT, SP, NV, DB, n, x, cs, dy, cw, acc, db);                                                       \
    }
#define REUSE(KT, SP, NV) REUSE_DB(KT, SP, NV, 0) REUSE_DB(KT, SP, NV, 1)
#define REUSE_ENTRY(KT, SP, NV) [0][KT / 2 - 1][SP - 1][NV] = r_##KT##_##SP##_##NV##_0,                               \
                                [1][KT / 2 - 1][SP - 1][NV] = r_##KT##_##SP##_##NV##_1,
/* Taps per block() call: 1-6 or 1-7. */
#define TB6(X, NV) X(NV, 1) X(NV, 2) X(NV, 3) X(NV, 4) X(NV, 5) X(NV, 6)
#define TB7(X, NV) TB6(X, NV) X(NV, 7)

#endif
