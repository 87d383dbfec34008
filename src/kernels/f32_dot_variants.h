/* The entry of the vector dot kernels (x86_avx2/, x86_avx512/), for the file that includes this
 * after its always-inline tile(nimg, len, dy, dyc, dyn, x, xc, xn, part, db, no, nc, with_db):
 * a function of its own for each part tile (no rows, nc columns, db or not; db only with up to
 * 3 columns), so that a part tile costs its own loads and FMAs only, and the entry `name`
 * (contract in kernels.h) that picks it. */
#ifndef NCONV_KERNELS_F32_DOT_VARIANTS_H
#define NCONV_KERNELS_F32_DOT_VARIANTS_H

typedef void dot_variant_fn(int64_t nimg, int64_t len, const float *dy, int64_t dyc, int64_t dyn, const float *x,
                            int64_t xc, int64_t xn, float *part, float *db);
#define DOT_VARIANT(no, nc, db_)                                                                                       \
    static void tile_##no##_##nc##_##db_(int64_t nimg, int64_t len, const float *dy, int64_t dyc, int64_t dyn,         \
                                         const float *x, int64_t xc, int64_t xn, float *part, float *db) {             \
        tile(nimg, len, dy, dyc, dyn, x, xc, xn, part, db, no, nc, db_);                                               \
    }
#define DOT_ROWS(X, nc, db_) X(1, nc, db_) X(2, nc, db_) X(3, nc, db_) X(4, nc, db_) X(5, nc, db_) X(6, nc, db_)
#define DOT_ENTRY(no, nc, db_) [db_][nc - 1][no - 1] = tile_##no##_##nc##_##db_,
#define DOT_ALL(X)                                                                                                     \
    DOT_ROWS(X, 1, 0) DOT_ROWS(X, 2, 0) DOT_ROWS(X, 3, 0) DOT_ROWS(X, 4, 0) DOT_ROWS(X, 1, 1) DOT_ROWS(X, 2, 1)     \
    DOT_ROWS(X, 3, 1)

DOT_ALL(DOT_VARIANT)
/* [db][nc - 1][no - 1] */
static dot_variant_fn *const dot_variants[2][NCONV_DOT_NC][NCONV_DOT_MR] = {DOT_ALL(DOT_ENTRY)};

#define NCONV_DOT_KERNEL(name)                                                                                         \
    void name(int64_t nimg, int64_t len, const float *dy, int64_t dyc, int64_t dyn, int64_t no, const float *x,       \
              int64_t xc, int64_t xn, int64_t nc, float *part, float *db) {                                            \
        if (no < 1 || nc < 1 || len < 1) return;                                                                       \
        dot_variants[db != NULL][nc - 1][no - 1](nimg, len, dy, dyc, dyn, x, xc, xn, part, db);                        \
    }

#endif
