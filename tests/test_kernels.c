/* Micro-kernel sweeps against plain loops in f64:
 * - the im2col GEMM: M, N, K over 1, 2, primes and block edges, strided and
 *   transposed A, accumulate on and off (off: C starts as NaN, never read);
 * - every 6 x 16 kernel of every ISA in the registry (skipped, and said so,
 *   when the CPU lacks the ISA): partial rows and columns, kc and ks over
 *   1, 2, primes; init (C starts as NaN) or accumulate; relu; streamed
 *   stores; the plane-store variant;
 * - the all-panels variants against per-panel calls, bit for bit
 *   (sweep_igemm_np, sweep_igemm_planes_np, sweep_gemm_ib_np, sweep_gemm_np), igemm_rows and
 *   igemm_rows16 against igemm_np's and igemm_np16's tiles (sweep_igemm_rows), gemm_ib7_np and
 *   gemm_ib9_np against f64 sums,
 *   igemm_np16 and gemm_np16 against igemm_np and gemm_np and the scalar narrowing
 *   (sweep_igemm_np16, sweep_gemm_np16);
 * - the depthwise tile, row and flattened-plane kernels of every ISA (sweep_dwtile_kernels,
 *   sweep_dwrow_kernels, sweep_dwrow_bw_kernels, sweep_dwflat_kernels, sweep_dwflat_bw_kernels);
 * - the transposes (layout changes) of every ISA (sweep_transpose), the f16 / bf16 ones against
 *   the scalar conversions (sweep_transpose16);
 * - the small-group kernels of every ISA (sweep_gbw_kernels, sweep_gfwd_kernels);
 * - the dot-product kernel of 1x1 backward-weights (sweep_dot);
 * - the few-input-channel kernels of every ISA, forward and backward-weights (sweep_stem_kernels);
 * - the Winograd transforms of every ISA (sweep_wino), AVX-512's bit for bit as AVX2's, and their
 *   16-bit input variants bit for bit as the f32 transforms on widened values (sweep_wino16);
 * - the tables against the kernel lists of kernels.h (check_tables). */
#include "test_util.h"

#include "../src/kernels/kernels.h"
#include "../src/internal.h" /* the f64 GEMM around the f64 kernels */

#include <stddef.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h> /* _mm_sfence: streamed stores land before they are compared */
#endif

static void sweep_tile_kernels(const nconv_kernels *k, uint64_t *rng) {
    const int64_t kcs[] = {1, 2, 5, 16, 67}, kss[] = {1, 2, 3, 9};
    for (int64_t mr = 1; mr <= NCONV_MR; mr++)
        for (int64_t nc = 1; nc <= NCONV_NR; nc += (nc < 3 || nc > 14) ? 1 : 5)
            for (size_t ki = 0; ki < 5; ki++)
                for (size_t si = 0; si < 4; si++)
                    for (int mode = 0; mode < 4; mode++) { /* 0 init, 1 accumulate, 2 init + relu, 3 as 2 + stream */
                        const int64_t kc = kcs[ki], ks = kss[si];
                        /* Rows start a_off = 2 floats in; tap 1 of row 2 is the zero row. */
                        const int64_t a_off = 2;
                        float *a = malloc(sizeof(float) * (size_t)(NCONV_MR * ks * (kc + a_off)));
                        float *zero = calloc((size_t)kc, sizeof(float));
                        float *w = aligned_alloc(64, sizeof(float) * (size_t)(((ks * kc * NCONV_NR + 15) / 16) * 16 + 16));
                        _Alignas(32) float cbuf[NCONV_MR][NCONV_NR + 8]; /* rows 32-byte aligned (streamed stores) */
                        float init[NCONV_NR];
                        double ref[NCONV_MR][NCONV_NR];
                        const float *rows[9 * NCONV_MR];
                        float *crow[NCONV_MR];
                        for (int64_t i = 0; i < NCONV_MR * ks * (kc + a_off); i++) a[i] = (float)test_uniform(rng);
                        for (int64_t i = 0; i < ks * kc * NCONV_NR; i++)
                            w[i] = (i % NCONV_NR) < nc ? (float)test_uniform(rng) : 0.0f;
                        for (int64_t j = 0; j < NCONV_NR; j++) init[j] = (float)test_uniform(rng);
                        for (int64_t t = 0; t < ks; t++)
                            for (int64_t r = 0; r < NCONV_MR; r++)
                                rows[t * NCONV_MR + r] =
                                    t == 1 && r == 2 ? zero : a + ((r < mr ? r : 0) * ks + t) * (kc + a_off);
                        for (int64_t r = 0; r < NCONV_MR; r++) {
                            crow[r] = cbuf[r];
                            for (int64_t j = 0; j < NCONV_NR + 8; j++) cbuf[r][j] = mode == 1 ? (float)(r - j) : NAN;
                        }
                        for (int64_t r = 0; r < mr; r++)
                            for (int64_t j = 0; j < nc; j++) {
                                double acc = mode == 1 ? (double)(r - j) : init[j];
                                for (int64_t t = 0; t < ks; t++)
                                    for (int64_t kk = 0; kk < kc; kk++)
                                        acc += (rows[t * NCONV_MR + r] == zero ? 0.0 : (double)rows[t * NCONV_MR + r][a_off + kk]) *
                                               w[(t * kc + kk) * NCONV_NR + j];
                                ref[r][j] = mode >= 2 && acc < 0 ? 0 : acc;
                            }
                        k->igemm(mr, nc, kc, ks, rows, a_off, zero, w, crow, mode == 1 ? NULL : init,
                                 (mode >= 2 ? NCONV_IGEMM_RELU : 0) | (mode == 3 ? NCONV_IGEMM_STREAM : 0));
                        double worst = 0;
                        int untouched = 1;
                        for (int64_t r = 0; r < NCONV_MR; r++)
                            for (int64_t j = 0; j < NCONV_NR + 8; j++) {
                                if (r < mr && j < nc) {
                                    double e = fabs(cbuf[r][j] - ref[r][j]);
                                    if (!(e <= worst)) worst = e;
                                } else if (mode == 1 ? cbuf[r][j] != (float)(r - j) : !isnan(cbuf[r][j])) {
                                    untouched = 0;
                                }
                            }
                        CHECK(worst <= 1e-5 * (double)(kc * ks), "%s igemm mr %lld nc %lld kc %lld ks %lld mode %d: err %g",
                              k->name, (long long)mr, (long long)nc, (long long)kc, (long long)ks, mode, worst);
                        CHECK(untouched, "%s igemm wrote outside mr x nc (mr %lld nc %lld)", k->name, (long long)mr,
                              (long long)nc);
                        if (mr == NCONV_MR && mode != 1) { /* the plane-store kernel: C^T with channel stride 9 */
                            float pl[NCONV_NR][9];
                            for (int64_t j = 0; j < NCONV_NR; j++)
                                for (int64_t r = 0; r < 9; r++) pl[j][r] = NAN;
                            k->igemm_planes(1, nc, kc, ks, rows, a_off, zero, w, 0, pl[0], 9, init, mode >= 2 ? NCONV_IGEMM_RELU : 0);
                            double pworst = 0;
                            int puntouched = 1;
                            for (int64_t j = 0; j < NCONV_NR; j++)
                                for (int64_t r = 0; r < 9; r++) {
                                    if (j < nc && r < NCONV_MR) {
                                        const double e = fabs(pl[j][r] - ref[r][j]);
                                        if (!(e <= pworst)) pworst = e;
                                    } else if (!isnan(pl[j][r])) {
                                        puntouched = 0;
                                    }
                                }
                            CHECK(pworst <= 1e-5 * (double)(kc * ks) && puntouched,
                                  "%s igemm_planes nc %lld kc %lld ks %lld mode %d: err %g, untouched %d", k->name,
                                  (long long)nc, (long long)kc, (long long)ks, mode, pworst, puntouched);
                        }

                        /* gemm_ib: A packed [kc*ks][6], B rows through pointers, offset 3. */
                        const int64_t K = kc * ks;
                        float *ap = malloc(sizeof(float) * (size_t)(K * NCONV_MR));
                        float *bm = malloc(sizeof(float) * (size_t)(K * (NCONV_NR + 3)));
                        const float **brow = malloc(sizeof(float *) * (size_t)K);
                        for (int64_t i = 0; i < K * NCONV_MR; i++) ap[i] = (float)test_uniform(rng);
                        for (int64_t i = 0; i < K * (NCONV_NR + 3); i++) bm[i] = (float)test_uniform(rng);
                        for (int64_t kk = 0; kk < K; kk++) brow[kk] = bm + (K - 1 - kk) * (NCONV_NR + 3);
                        float cm[NCONV_MR * 20];
                        for (int64_t i = 0; i < NCONV_MR * 20; i++) cm[i] = mode == 1 ? 0.5f : NAN;
                        k->gemm_ib(mr, nc, K, ap, brow, 3, cm, 20, mode == 1);
                        worst = 0;
                        for (int64_t r = 0; r < mr; r++)
                            for (int64_t j = 0; j < nc; j++) {
                                double acc = mode == 1 ? 0.5 : 0;
                                for (int64_t kk = 0; kk < K; kk++) acc += (double)ap[kk * NCONV_MR + r] * brow[kk][3 + j];
                                double e = fabs(cm[r * 20 + j] - acc);
                                if (!(e <= worst)) worst = e;
                            }
                        CHECK(worst <= 1e-5 * (double)K, "%s gemm_ib mr %lld nc %lld K %lld mode %d: err %g", k->name,
                              (long long)mr, (long long)nc, (long long)K, mode, worst);

                        /* gemm: A packed [K][6], B packed [K][16] (aligned), rows starting at
                         * rinit (mode 0), accumulating (1), or at zero then relu (2); C has
                         * 20 columns and must stay untouched outside mr x nc. */
                        float *bp = aligned_alloc(64, sizeof(float) * (size_t)(K * NCONV_NR));
                        float rinit[NCONV_MR];
                        for (int64_t i = 0; i < K * NCONV_NR; i++) bp[i] = (float)test_uniform(rng);
                        for (int64_t r = 0; r < NCONV_MR; r++) rinit[r] = (float)test_uniform(rng);
                        for (int64_t i = 0; i < NCONV_MR * 20; i++) cm[i] = mode == 1 ? 0.25f * (float)(i % 7) : NAN;
                        const int flags = mode == 1 ? NCONV_GEMM_ACCUMULATE : mode == 2 ? NCONV_GEMM_RELU : 0;
                        k->gemm(mr, nc, K, ap, bp, cm, 20, mode == 0 ? rinit : NULL, flags);
                        worst = 0;
                        untouched = 1;
                        for (int64_t r = 0; r < NCONV_MR; r++)
                            for (int64_t j = 0; j < 20; j++) {
                                const int64_t i = r * 20 + j;
                                if (r >= mr || j >= nc) {
                                    if (mode == 1 ? cm[i] != 0.25f * (float)(i % 7) : !isnan(cm[i])) untouched = 0;
                                    continue;
                                }
                                double acc = mode == 1 ? 0.25 * (double)(i % 7) : mode == 0 ? rinit[r] : 0;
                                for (int64_t kk = 0; kk < K; kk++) acc += (double)ap[kk * NCONV_MR + r] * bp[kk * NCONV_NR + j];
                                if (mode == 2 && acc < 0) acc = 0;
                                double e = fabs(cm[i] - acc);
                                if (!(e <= worst)) worst = e;
                            }
                        CHECK(worst <= 1e-5 * (double)K, "%s gemm mr %lld nc %lld K %lld mode %d: err %g", k->name,
                              (long long)mr, (long long)nc, (long long)K, mode, worst);
                        CHECK(untouched, "%s gemm wrote outside mr x nc (mr %lld nc %lld)", k->name, (long long)mr,
                              (long long)nc);
                        free(bp);
                        free(ap), free(bm), free(brow), free(a), free(w), free(zero);
                    }
}

/* The depthwise tile kernels (dwtile, dwtile_bw with and without the bias gradient's sums)
 * against f64 sums: blocks of 1-9 vectors (the widths tiles take at once and their sums), channel
 * tails, columns as wide as the block or wider, the weights' taps as far apart or farther, rows of
 * 1-30 pixels (tiles of every width), 0-3 rows, taps 3, 5, 7 one column apart (the shapes with
 * code of their own) and other taps (1, 2, 4, dilated, reversed), pixel steps 1 and 2. Rows end at
 * the last lane read (ASan sees any read beyond); dwtile's output past the pixels and channels
 * starts as NaN and stays so; relu keeps a NaN read; db without the sums stays as it was; outputs
 * whose pixels keep the vectors aligned are also written with the streamed stores' hint. */
static void sweep_dwtile_kernels(const nconv_kernels *k, uint64_t *rng) {
    const int64_t vl = k->dw_vl, nvs[] = {1, 2, 3, 5, 9}, ns[] = {1, 3, 7, 13, 14, 30};
    /* taps: count, column distance between taps, first tap's column */
    const int64_t shapes[][3] = {{3, 1, 0}, {5, 1, 1}, {7, 1, 0}, {1, 1, 2}, {2, 1, 0}, {4, 1, 0}, {3, 2, 0}, {3, -1, 2}};
    for (size_t vi = 0; vi < 5; vi++)
        for (int tail = 0; tail < 2; tail++)
            for (int wide = 0; wide < 2; wide++)
                for (size_t ni = 0; ni < 6; ni++)
                    for (int64_t nr = 0; nr <= 3; nr += nr ? 2 : 1)
                        for (size_t si = 0; si < 8; si++)
                            for (int64_t step = 1; step <= 2; step++) {
                                const int64_t cw = nvs[vi] * vl, nc = tail ? cw - 3 : cw, cs = wide ? cw + vl : cw;
                                const int64_t ws = wide ? cw + 2 * vl : cw; /* the weights' tap stride */
                                const int64_t n = ns[ni], nt = shapes[si][0], gap = shapes[si][1], t0 = shapes[si][2];
                                /* streamed stores (a hint) where the pixels keep the vectors aligned */
                                const int relu = (int)((vi + ni + si) % 2), stream = (int)((vi + ni + wide) % 2);
                                const int64_t os = stream ? cw + (wide ? vl : 0) : cw + 5;
                                const int flags = (relu ? NCONV_DW_RELU : 0) | (stream ? NCONV_DW_STREAM : 0);
                                int64_t toff[7], last = 0;
                                for (int64_t t = 0; t < nt; t++) {
                                    toff[t] = (t0 + t * gap) * cs;
                                    if (toff[t] > last) last = toff[t];
                                }
                                last += (n - 1) * step * cs + cw; /* floats a row needs */
                                float *row[3], *w[3], init[160];
                                float *out = aligned_alloc(64, (sizeof(float) * (size_t)(n * os) + 63) / 64 * 64);
                                float *dy = malloc(sizeof(float) * (size_t)(n * cw));
                                float *acc = malloc(sizeof(float) * (size_t)(3 * nt * cw));
                                float *db = malloc(sizeof(float) * (size_t)cw);
                                const int with_db = nr > 0 && (si + ni) % 2 == 0;
                                for (int64_t c = 0; c < cw; c++) db[c] = 0.25f;
                                for (int64_t r = 0; r < nr; r++) {
                                    row[r] = malloc(sizeof(float) * (size_t)last);
                                    w[r] = malloc(sizeof(float) * (size_t)((nt - 1) * ws + cw));
                                    for (int64_t i = 0; i < last; i++) row[r][i] = (float)test_uniform(rng);
                                    for (int64_t i = 0; i < (nt - 1) * ws + cw; i++) w[r][i] = (float)test_uniform(rng);
                                }
                                for (int64_t i = 0; i < n * os; i++) out[i] = NAN;
                                for (int64_t i = 0; i < n * cw; i++) dy[i] = (float)test_uniform(rng);
                                for (int64_t i = 0; i < 3 * nt * cw; i++) acc[i] = 0.5f;
                                for (int64_t c = 0; c < cw; c++) init[c] = (float)test_uniform(rng);
                                const int nan_in = relu && nr > 0; /* pixel 0's first tap, channel 1 */
                                if (nan_in) row[0][toff[0] + 1] = NAN;
                                k->dwtile(cw, cs, step, n, nr, (const float *const *)row, (const float *const *)w, ws, nt,
                                          toff, init, out, os, nc, flags);
                                if (nan_in) row[0][toff[0] + 1] = 0.0f;
                                k->dwtile_bw(cw, cs, step, n, nr, (const float *const *)row, nt, toff, dy, acc,
                                             with_db ? db : NULL);
                                double worst = 0;
                                int untouched = 1, nan_ok = !nan_in || isnan(out[1]);
                                for (int64_t i = 0; i < n; i++)
                                    for (int64_t c = 0; c < os; c++) {
                                        const float o = out[i * os + c];
                                        if (c >= nc) {
                                            untouched = untouched && isnan(o);
                                            continue;
                                        }
                                        if (nan_in && i == 0 && c == 1) continue;
                                        double want = init[c];
                                        for (int64_t r = 0; r < nr; r++)
                                            for (int64_t t = 0; t < nt; t++)
                                                want += (double)row[r][toff[t] + i * step * cs + c] * w[r][t * ws + c];
                                        if (relu && want < 0) want = 0;
                                        const double e = fabs(o - want) / (1 + fabs(want));
                                        if (!(e <= worst)) worst = e;
                                    }
                                for (int64_t r = 0; r < nr; r++)
                                    for (int64_t t = 0; t < nt; t++)
                                        for (int64_t c = 0; c < cw; c++) {
                                            double want = 0.5;
                                            for (int64_t i = 0; i < n; i++)
                                                want += (double)dy[i * cw + c] * row[r][toff[t] + i * step * cs + c];
                                            const double e = fabs(acc[(r * nt + t) * cw + c] - want) / (1 + fabs(want));
                                            if (!(e <= worst)) worst = e;
                                        }
                                for (int64_t c = 0; c < cw; c++) {
                                    double want = 0.25;
                                    for (int64_t i = 0; i < n && with_db; i++) want += dy[i * cw + c];
                                    const double e = fabs(db[c] - want) / (1 + fabs(want));
                                    if (!(e <= worst)) worst = e;
                                }
                                for (int64_t i = nr * nt * cw; i < 3 * nt * cw; i++) untouched = untouched && acc[i] == 0.5f;
                                CHECK(worst <= 1e-5 && untouched && nan_ok,
                                      "%s dwtile/dwtile_bw cw %lld nc %lld cs %lld n %lld rows %lld taps %lld gap %lld "
                                      "step %lld flags %d: err %g, untouched %d, NaN kept %d", k->name, (long long)cw,
                                      (long long)nc, (long long)cs, (long long)n, (long long)nr, (long long)nt,
                                      (long long)gap, (long long)step, flags, worst, untouched, nan_ok);
                                for (int64_t r = 0; r < nr; r++) free(row[r]), free(w[r]);
                                free(out), free(dy), free(acc), free(db);
                            }
}

/* The W taps of a row sweep (test_kernels' dwrow and dwrow_bw): pad < 3, a source row of n * step
 * columns padded by pad on the left; pad 3, taps 3 columns in and a row of `past` columns after
 * the last tap's first, read far from its ends. Returns the row's length. */
static int64_t sweep_taps(int64_t nk, int64_t dw, int64_t pad, int64_t n, int64_t step, int64_t past, int64_t *toff) {
    for (int64_t b = 0; b < nk; b++) toff[b] = pad < 3 ? b * dw - pad : b * dw + 3;
    return pad < 3 ? n * step : toff[nk - 1] + past;
}

/* The depthwise row kernel (dwrow) against f64 sums: 1-8 rows (each count has code of its own),
 * rows of 1-56 pixels (vector tails), the shapes with code of their own (1, 2, 3, 5, 7 tap rows at
 * row stride 1, 3, 5, 7 at 2, square or not, pixel steps 1 and 2) and others (more than 8 W taps, dilated
 * tap rows, a list with every row of its own, 1 x 1); W padding of 0-2 columns read through the
 * row length (rows end at len: ASan sees any read beyond) and rows read in full (no padding,
 * len far off), with and without rows of a later call to fetch. Outputs past n stay NaN; relu keeps
 * a NaN read. */
static void sweep_dwrow_kernels(const nconv_kernels *k, uint64_t *rng) {
    /* nr, nk, rs, rd, step, W dilation */
    const int64_t shapes[][6] = {{3, 3, 1, 1, 1, 1}, {5, 5, 1, 1, 1, 1}, {7, 7, 1, 1, 1, 1}, {3, 5, 1, 1, 1, 1},
                                 {3, 3, 2, 1, 2, 1}, {5, 5, 2, 1, 2, 1}, {7, 7, 2, 1, 2, 1}, {3, 3, 2, 1, 1, 1},
                                 {3, 11, 1, 1, 1, 1}, {3, 3, 1, 2, 1, 2}, {9, 3, 9, 1, 2, 1}, {1, 1, 1, 1, 1, 1},
                                 {2, 2, 1, 1, 1, 1}, {1, 3, 1, 1, 1, 1}, {2, 1, 1, 1, 1, 1}};
    const int64_t ns[] = {1, 7, 14, 16, 17, 56};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int64_t m = 1; m <= 8; m++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (int64_t pad = 0; pad <= 3; pad++) { /* pad 3: rows read in full, no length to mind */
                    const int64_t nr = shapes[si][0], nk = shapes[si][1], rs = shapes[si][2], rd = shapes[si][3];
                    const int64_t step = shapes[si][4], dw = shapes[si][5], n = ns[ni];
                    const int relu = (int)((si + ni + (size_t)m) % 2);
                    int64_t toff[16];
                    const int64_t len = sweep_taps(nk, dw, pad, n, step, (n + 15) / 16 * 16 * step, toff);
                    const int64_t nj = (m - 1) * rs + (nr - 1) * rd + 1, ys = n + 3;
                    float *row[80], w[128];
                    for (int64_t j = 0; j < nj; j++) {
                        row[j] = malloc(sizeof(float) * (size_t)len);
                        for (int64_t x = 0; x < len; x++) row[j][x] = (float)test_uniform(rng);
                    }
                    for (int64_t t = 0; t < nr * nk; t++) w[t] = (float)test_uniform(rng);
                    const float init = (float)test_uniform(rng);
                    float *y = malloc(sizeof(float) * (size_t)(m * ys));
                    for (int64_t i = 0; i < m * ys; i++) y[i] = NAN;
                    const int64_t x0 = toff[0]; /* output row 0's pixel 0, first tap */
                    const int nan_in = relu && x0 >= 0 && x0 < len;
                    if (nan_in) row[0][x0] = NAN;
                    /* rows of a later call to fetch (a hint): none, or the first two again */
                    const int64_t ahead = pad % 2 ? 2 : 0;
                    row[nj] = row[0], row[nj + 1] = row[nj > 1 ? 1 : 0];
                    k->dwrow(m, n, nr, (const float *const *)row, rs, rd, nk, toff, step, len, w, init, y, ys, relu,
                             ahead);
                    double worst = 0;
                    int untouched = 1, nan_ok = !nan_in || isnan(y[0]);
                    for (int64_t r = 0; r < m; r++)
                        for (int64_t i = 0; i < ys; i++) {
                            const float o = y[r * ys + i];
                            if (i >= n) {
                                untouched = untouched && isnan(o);
                                continue;
                            }
                            if (nan_in && r == 0) continue;
                            double want = init;
                            for (int64_t a = 0; a < nr; a++)
                                for (int64_t b = 0; b < nk; b++) {
                                    const int64_t x = toff[b] + i * step;
                                    if (x >= 0 && x < len) want += (double)w[a * nk + b] * row[r * rs + a * rd][x];
                                }
                            if (relu && want < 0) want = 0;
                            const double e = fabs(o - want) / (1 + fabs(want));
                            if (!(e <= worst)) worst = e;
                        }
                    CHECK(worst <= 1e-5 && untouched && nan_ok,
                          "%s dwrow m %lld n %lld rows %lld x %lld taps, rs %lld rd %lld step %lld pad %lld: err %g, "
                          "untouched %d, NaN kept %d", k->name, (long long)m, (long long)n, (long long)nr, (long long)nk,
                          (long long)rs, (long long)rd, (long long)step, (long long)pad, worst, untouched, nan_ok);
                    for (int64_t j = 0; j < nj; j++) free(row[j]);
                    free(y);
                }
}

/* The depthwise kernel on flattened planes (dwflat) against f64 sums: 1-5 channels (the tail of
 * a block of 4), planes of 1-200 pixels (vector tails, groups of 4 vectors and the vectors after
 * them), 1-25 taps at offsets of -40 to 40, random lane masks whose set bits read inside the
 * plane; around each plane NaN, so that a lane read past its mask shows. Outputs past n stay NaN;
 * init given or not, relu on or off. */
static void sweep_dwflat_kernels(const nconv_kernels *k, uint64_t *rng) {
    const int64_t ns[] = {1, 15, 16, 17, 49, 64, 65, 81, 196, 200}, nts[] = {1, 3, 9, 25}, margin = 48;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ti++)
            for (int64_t nch = 1; nch <= 5; nch++) {
                const int64_t n = ns[ni], nt = nts[ti], nv = (n + 15) / 16, xs = n + 2 * margin + 3, ys = n + 7;
                const int relu = (int)((ni + ti + (size_t)nch) % 2), with_init = (int)((ni + (size_t)nch) % 3 != 0);
                int64_t off[25];
                uint16_t *mask = calloc((size_t)(nv * nt), sizeof *mask);
                float *x = malloc(sizeof(float) * (size_t)(nch * xs)), *y = malloc(sizeof(float) * (size_t)(nch * ys));
                float w[5 * 25], init[5];
                for (int64_t i = 0; i < nch * xs; i++) x[i] = i % xs >= margin && i % xs < margin + n
                                                                  ? (float)test_uniform(rng) : NAN;
                for (int64_t i = 0; i < nch * ys; i++) y[i] = NAN;
                for (int64_t i = 0; i < nch * nt; i++) w[i] = (float)test_uniform(rng);
                for (int64_t c = 0; c < nch; c++) init[c] = (float)test_uniform(rng);
                for (int64_t t = 0; t < nt; t++) {
                    off[t] = (int64_t)(test_uniform(rng) * 40.0);
                    for (int64_t f = 0; f < n; f++)
                        if (f + off[t] >= 0 && f + off[t] < n && test_uniform(rng) > -0.6)
                            mask[(f / 16) * nt + t] |= (uint16_t)(1u << (f % 16));
                }
                k->dwflat(nch, n, nt, off, mask, x + margin, xs, w, with_init ? init : NULL, y, ys, relu);
                double worst = 0;
                int untouched = 1;
                for (int64_t c = 0; c < nch; c++)
                    for (int64_t f = 0; f < ys; f++) {
                        const float o = y[c * ys + f];
                        if (f >= n) {
                            untouched = untouched && isnan(o);
                            continue;
                        }
                        double want = with_init ? init[c] : 0.0;
                        for (int64_t t = 0; t < nt; t++)
                            if (mask[(f / 16) * nt + t] >> (f % 16) & 1)
                                want += (double)w[c * nt + t] * x[c * xs + margin + f + off[t]];
                        if (relu && want < 0) want = 0;
                        const double e = fabs(o - want) / (1 + fabs(want));
                        if (!(e <= worst)) worst = e;
                    }
                CHECK(worst <= 1e-5 && untouched,
                      "%s dwflat %lld channels, n %lld, %lld taps, relu %d: err %g, untouched %d", k->name, (long long)nch, (long long)n, (long long)nt, relu, worst, untouched);
                free(mask), free(x), free(y);
            }
}

/* dwflat's weight gradient (dwflat_bw) against f64 sums: 1-3 channels, 1-3 images, planes of 1-200
 * pixels (vector tails), 1-25 taps (one to three blocks of 12) at offsets of -40 to 40, random
 * lane masks whose set bits read inside the plane; around each plane NaN, so that a lane read
 * past its mask shows; acc and db added to; db given or not. */
static void sweep_dwflat_bw_kernels(const nconv_kernels *k, uint64_t *rng) {
    const int64_t ns[] = {1, 15, 16, 17, 49, 81, 196, 200}, nts[] = {1, 9, 12, 13, 25}, margin = 48;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ti++)
            for (int64_t nch = 1; nch <= 3; nch++) {
                const int64_t n = ns[ni], nt = nts[ti], nq = 1 + (int64_t)(ni + ti) % 3, nv = (n + 15) / 16;
                const int64_t xs = n + 2 * margin + 5, xq = nch * xs + 3, dys = n + 3, dyq = nch * dys + 1;
                const int with_db = (int)((ni + (size_t)nch) % 2);
                int64_t off[25];
                uint16_t *mask = calloc((size_t)(nv * nt), sizeof *mask);
                float *x = malloc(sizeof(float) * (size_t)(nq * xq)), *dy = malloc(sizeof(float) * (size_t)(nq * dyq));
                float acc[3 * 25], db[3];
                for (int64_t i = 0; i < nq * xq; i++) {
                    const int64_t at = i % xq % xs;
                    x[i] = i % xq < nch * xs && at >= margin && at < margin + n ? (float)test_uniform(rng) : NAN;
                }
                for (int64_t i = 0; i < nq * dyq; i++) dy[i] = (float)test_uniform(rng);
                for (int64_t i = 0; i < nch * nt; i++) acc[i] = (float)test_uniform(rng);
                for (int64_t c = 0; c < nch; c++) db[c] = (float)test_uniform(rng);
                for (int64_t t = 0; t < nt; t++) {
                    off[t] = (int64_t)(test_uniform(rng) * 40.0);
                    for (int64_t f = 0; f < n; f++)
                        if (f + off[t] >= 0 && f + off[t] < n && test_uniform(rng) > -0.6)
                            mask[(f / 16) * nt + t] |= (uint16_t)(1u << (f % 16));
                }
                double want[3 * 25], wdb[3];
                for (int64_t c = 0; c < nch; c++) {
                    wdb[c] = db[c];
                    for (int64_t t = 0; t < nt; t++) want[c * nt + t] = acc[c * nt + t];
                    for (int64_t q = 0; q < nq; q++)
                        for (int64_t f = 0; f < n; f++) {
                            const double d = dy[q * dyq + c * dys + f];
                            wdb[c] += d;
                            for (int64_t t = 0; t < nt; t++)
                                if (mask[(f / 16) * nt + t] >> (f % 16) & 1)
                                    want[c * nt + t] += d * x[q * xq + c * xs + margin + f + off[t]];
                        }
                }
                k->dwflat_bw(nch, nq, n, nt, off, mask, x + margin, xs, xq, dy, dys, dyq, acc, with_db ? db : NULL);
                double worst = 0;
                for (int64_t i = 0; i < nch * nt; i++) {
                    const double e = fabs(acc[i] - want[i]) / (1 + fabs(want[i]));
                    if (!(e <= worst)) worst = e;
                }
                for (int64_t c = 0; with_db && c < nch; c++) {
                    const double e = fabs(db[c] - wdb[c]) / (1 + fabs(wdb[c]));
                    if (!(e <= worst)) worst = e;
                }
                CHECK(worst <= 1e-5, "%s dwflat_bw %lld channels, %lld images, n %lld, %lld taps, db %d: err %g",
                      k->name, (long long)nch, (long long)nq, (long long)n, (long long)nt, with_db, worst);
                free(mask), free(x), free(dy);
            }
}

/* The few-input-channel kernels against f64 sums. stem: 1 to 100 output channels (vector tails,
 * every block width), runs of 1 to 48 pixels (shorter than a block: a pixel at a time; a last
 * block moved back), pixel strides 1 and 3, taps in any order with weight rows in any order;
 * lanes of weights and init past O are NaN, as are y's elements not written (they stay so);
 * relu (a NaN input stays NaN) and streamed stores on 64-byte aligned rows. stem_planes (tables
 * that have it): 1 to 33 channels, rows of 1 to 112 pixels (vector tails, 1 to 3 vectors a
 * block), 1 to 9 source rows, taps reading two runs of a row (as its phases) whose ends and
 * whose neighbours are NaN, at positions before, inside and past them. stem_bw: see below.
 * phases: steps 1 to 5 on rows of 1 to 300, exact. */
static void sweep_stem_kernels(const nconv_kernels *k, uint64_t *rng) {
    const int64_t Os[] = {1, 7, 16, 17, 32, 33, 48, 64, 96, 100}, ns[] = {1, 5, 6, 7, 8, 9, 23, 48};
    for (size_t oi = 0; oi < sizeof Os / sizeof Os[0]; oi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int64_t xs = 1; xs <= 3; xs += 2)
                for (int flags = 0; flags < 4; flags++) {
                    const int64_t O = Os[oi], n = ns[ni], op = (O + 15) / 16 * 16, nt = 1 + (int64_t)(oi + ni) % 27;
                    const int64_t ys = flags & NCONV_STEM_STREAM ? op : O + 5;
                    int64_t xo[32], wo[32], xmax = 0;
                    for (int64_t t = 0; t < nt; t++) {
                        xo[t] = (int64_t)(test_uniform(rng) * 10 + 10), wo[t] = (nt - 1 - t) * op;
                        if (xo[t] > xmax) xmax = xo[t];
                    }
                    float *x = malloc(sizeof(float) * (size_t)(xmax + n * xs + 1));
                    float *w = aligned_alloc(64, sizeof(float) * (size_t)(nt * op)), init[112];
                    float *y = aligned_alloc(64, sizeof(float) * (size_t)((n * ys + 15) / 16 * 16));
                    for (int64_t i = 0; i < xmax + n * xs + 1; i++) x[i] = (float)test_uniform(rng);
                    for (int64_t i = 0; i < nt * op; i++) w[i] = i % op < O ? (float)test_uniform(rng) : NAN;
                    for (int64_t o = 0; o < op; o++) init[o] = o < O ? (float)test_uniform(rng) : NAN;
                    for (int64_t i = 0; i < (n * ys + 15) / 16 * 16; i++) y[i] = NAN;
                    const int relu = flags & NCONV_STEM_RELU;
                    if (relu) x[xo[0]] = NAN; /* pixel 0, tap 0 */
                    k->stem(n, O, nt, x, xo, xs, w, wo, init, y, ys, flags);
#if defined(__x86_64__) || defined(__i386__)
                    _mm_sfence();
#endif
                    double worst = 0;
                    int untouched = 1, nan_ok = 1;
                    for (int64_t i = 0; i < n; i++)
                        for (int64_t o = 0; o < ys; o++) {
                            const float v = y[i * ys + o];
                            if (o >= O) {
                                untouched &= isnan(v);
                                continue;
                            }
                            double want = init[o];
                            for (int64_t t = 0; t < nt; t++) want += (double)x[xo[t] + i * xs] * w[wo[t] + o];
                            if (isnan(want)) { /* it reads the NaN */
                                nan_ok &= isnan(v);
                                continue;
                            }
                            if (relu && want < 0) want = 0;
                            const double e = fabs(v - want) / (1 + fabs(want));
                            if (!(e <= worst)) worst = e;
                        }
                    CHECK(worst <= 1e-5 && untouched && nan_ok,
                          "%s stem O %lld n %lld taps %lld xs %lld flags %d: err %g, untouched %d, NaN kept %d",
                          k->name, (long long)O, (long long)n, (long long)nt, (long long)xs, flags, worst, untouched,
                          nan_ok);
                    free(x), free(w), free(y);
                }
    const int64_t pOs[] = {1, 8, 9, 16, 33}, pns[] = {1, 15, 16, 17, 40, 48, 49, 64, 112}, nrs[] = {1, 3, 9};
    for (size_t oi = 0; k->stem_planes && oi < sizeof pOs / sizeof pOs[0]; oi++)
        for (size_t ni = 0; ni < sizeof pns / sizeof pns[0]; ni++)
            for (size_t ri = 0; ri < sizeof nrs / sizeof nrs[0]; ri++) {
                /* each source row: run 0 (L0 elements) at 0, run 1 (L1) at L, NaN around them */
                const int64_t O = pOs[oi], n = pns[ni], nr = nrs[ri], op = (O + 15) / 16 * 16, nk = 1 + (int64_t)(oi + ni) % 7;
                const int64_t L0 = n + 2 - (int64_t)ri, L1 = n - 1 + (int64_t)ri, L = L0 + 8, ys = n + 3;
                const int flags = (int)(oi + ri) % 2 ? NCONV_STEM_RELU : 0;
                int64_t koff[8], toff[8], tlen[8], wo[9];
                for (int64_t t = 0; t < nk; t++)
                    koff[t] = t % 2 ? L : 0, tlen[t] = t % 2 ? L1 : L0, toff[t] = t - 3 + (t % 3) * (int64_t)ri;
                float *rowbuf = malloc(sizeof(float) * (size_t)(nr * (L + L1 + 8))), *rows[9];
                for (int64_t r = 0; r < nr; r++) {
                    rows[r] = rowbuf + r * (L + L1 + 8);
                    for (int64_t i = 0; i < L + L1 + 8; i++)
                        rows[r][i] = i < L0 || (i >= L && i < L + L1) ? (float)test_uniform(rng) : NAN;
                    wo[r] = (nr - 1 - r) * nk * op;
                }
                float *w = aligned_alloc(64, sizeof(float) * (size_t)(nr * nk * op)), init[48];
                for (int64_t i = 0; i < nr * nk * op; i++) w[i] = i % op < O ? (float)test_uniform(rng) : NAN;
                for (int64_t o = 0; o < op; o++) init[o] = o < O ? (float)test_uniform(rng) : NAN;
                float *y = malloc(sizeof(float) * (size_t)(O * ys));
                for (int64_t i = 0; i < O * ys; i++) y[i] = NAN;
                k->stem_planes(n, O, nr, (const float *const *)rows, w, wo, nk, koff, toff, tlen, op, init, y, ys, flags);
                double worst = 0;
                int untouched = 1;
                for (int64_t o = 0; o < O; o++)
                    for (int64_t i = 0; i < ys; i++) {
                        const float v = y[o * ys + i];
                        if (i >= n) {
                            untouched &= isnan(v);
                            continue;
                        }
                        double want = init[o];
                        for (int64_t t = 0; t < nk; t++)
                            for (int64_t r = 0; r < nr; r++) {
                                const int64_t at = toff[t] + i;
                                if (at >= 0 && at < tlen[t]) want += (double)w[wo[r] + t * op + o] * rows[r][koff[t] + at];
                            }
                        if (flags && want < 0) want = 0;
                        const double e = fabs(v - want) / (1 + fabs(want));
                        if (!(e <= worst)) worst = e;
                    }
                CHECK(worst <= 1e-5 && untouched, "%s stem_planes O %lld n %lld rows %lld taps %lld: err %g, untouched %d",
                      k->name, (long long)O, (long long)n, (long long)nr, (long long)nk, worst, untouched);
                free(rowbuf), free(w), free(y);
            }
    /* stem_bw: channel widths for every grouping of vectors (1-9 of 16), tap counts across the
     * tiles' splits, sums and db added to what acc and db hold, a row past the taps untouched,
     * dy rows wider than op, and lines to fetch ahead. */
    const int64_t bops[] = {16, 32, 48, 64, 80, 96, 112, 128, 144}, bnts[] = {0, 1, 5, 7, 9, 13, 14, 15, 24, 25, 27, 48};
    const int64_t bns[] = {1, 2, 5, 17};
    for (size_t oi = 0; k->stem_bw && oi < sizeof bops / sizeof bops[0]; oi++)
        for (size_t ti = 0; ti < sizeof bnts / sizeof bnts[0]; ti++)
            for (size_t ni = 0; ni < sizeof bns / sizeof bns[0]; ni++) {
                const int64_t op = bops[oi], nt = bnts[ti], n = bns[ni], xs = 1 + 2 * (int64_t)(ti % 2);
                const int64_t ds = op + 16 * (int64_t)(ni % 2), rows = nt + 1;
                int64_t xo[48], ao[48], xmax = 0;
                for (int64_t t = 0; t < nt; t++) {
                    xo[t] = (int64_t)(test_uniform(rng) * 10 + 10), ao[t] = (nt - 1 - t) * op;
                    if (xo[t] > xmax) xmax = xo[t];
                }
                float *x = malloc(sizeof(float) * (size_t)(xmax + n * xs + 1));
                float *dy = malloc(sizeof(float) * (size_t)(n * ds));
                float *acc = aligned_alloc(64, sizeof(float) * (size_t)(rows * op));
                float *acc0 = malloc(sizeof(float) * (size_t)(rows * op));
                float *db = aligned_alloc(64, sizeof(float) * (size_t)op), db0[144];
                for (int64_t i = 0; i < xmax + n * xs + 1; i++) x[i] = (float)test_uniform(rng);
                for (int64_t i = 0; i < n * ds; i++) dy[i] = (float)test_uniform(rng);
                for (int64_t i = 0; i < rows * op; i++) acc[i] = acc0[i] = (float)test_uniform(rng);
                for (int64_t o = 0; o < op; o++) db[o] = db0[o] = (float)test_uniform(rng);
                const nconv_lines ahead = {dy, n, op, ds};
                k->stem_bw(n, op, nt, x, xo, xs, dy, ds, acc, ao, ni % 3 ? db : NULL, ni % 2 ? &ahead : NULL);
                double worst = 0;
                int untouched = 1;
                for (int64_t o = 0; o < op; o++) {
                    for (int64_t t = 0; t < nt; t++) {
                        double want = acc0[ao[t] + o];
                        for (int64_t i = 0; i < n; i++) want += (double)x[xo[t] + i * xs] * dy[i * ds + o];
                        const double e = fabs(acc[ao[t] + o] - want) / (1 + fabs(want));
                        if (!(e <= worst)) worst = e;
                    }
                    untouched &= acc[nt * op + o] == acc0[nt * op + o];
                    double want = db0[o];
                    for (int64_t i = 0; ni % 3 && i < n; i++) want += dy[i * ds + o];
                    const double e = fabs(db[o] - want) / (1 + fabs(want));
                    if (!(e <= worst)) worst = e;
                }
                CHECK(worst <= 1e-5 && untouched, "%s stem_bw op %lld taps %lld n %lld xs %lld: err %g, untouched %d",
                      k->name, (long long)op, (long long)nt, (long long)n, (long long)xs, worst, untouched);
                free(x), free(dy), free(acc), free(acc0), free(db);
            }
    for (int64_t s = 1; k->phases && s <= 5; s++)
        for (int64_t n = 1; n <= 300; n += n < 70 ? 1 : 115) {
            const int64_t ld = (n + s - 1) / s + 3;
            float *src = malloc(sizeof(float) * (size_t)n), *dst = malloc(sizeof(float) * (size_t)(s * ld));
            for (int64_t i = 0; i < n; i++) src[i] = (float)test_uniform(rng);
            for (int64_t i = 0; i < s * ld; i++) dst[i] = NAN;
            k->phases(n, s, src, dst, ld);
            int ok = 1;
            for (int64_t q = 0; q < s; q++)
                for (int64_t i = 0; i < ld; i++)
                    ok &= i * s + q < n ? dst[q * ld + i] == src[i * s + q] : isnan(dst[q * ld + i]);
            CHECK(ok, "%s phases n %lld step %lld: wrong or outside", k->name, (long long)n, (long long)s);
            free(src), free(dst);
        }
}

/* The depthwise rows' weight gradient (dwrow_bw) against f64 sums: the shapes with code of their
 * own (3, 5, 7 taps at pixel steps 1 and 2, output rows 1 and 2 source rows apart, more tap rows
 * than one pass holds) and others (dilated tap rows and taps, a list with every row of its own,
 * 6, 11 and 1 taps); 1 and 3 images, 1-5 output rows, rows of 1-56 pixels (vector tails), rows of
 * zeros (NULL), W padding of 0-2 columns read through the row length (the last image's rows end
 * at len: ASan sees any read beyond) and rows read far from their ends, whose columns past the
 * last pixel's reach are Inf (a product with a lane past n would make NaN). acc and db are added
 * to; the entries past nr * nk stay untouched. */
static void sweep_dwrow_bw_kernels(const nconv_kernels *k, uint64_t *rng) {
    /* nr, nk, rs, rd, step, W dilation */
    const int64_t shapes[][6] = {{3, 3, 1, 1, 1, 1}, {5, 5, 1, 1, 1, 1}, {7, 7, 1, 1, 1, 1}, {3, 3, 2, 1, 2, 1},
                                 {5, 5, 2, 1, 2, 1}, {7, 7, 2, 1, 2, 1}, {7, 5, 1, 1, 2, 1}, {7, 3, 2, 1, 1, 1},
                                 {3, 3, 1, 2, 1, 2}, {9, 3, 9, 1, 2, 1}, {2, 11, 1, 1, 1, 1}, {4, 6, 2, 1, 2, 1},
                                 {1, 1, 1, 1, 1, 1}};
    const int64_t ns[] = {1, 7, 14, 16, 17, 56};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int64_t m = 1; m <= 5; m += 2)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (int64_t pad = 0; pad <= 3; pad++) { /* pad 3: rows read far from their ends */
                    const int64_t nr = shapes[si][0], nk = shapes[si][1], rs = shapes[si][2], rd = shapes[si][3];
                    const int64_t step = shapes[si][4], dw = shapes[si][5], n = ns[ni], nq = 1 + 2 * (pad % 2);
                    const int64_t dys = n + 3, dyq = m * dys + 2, nt = nr * nk, with_db = (int64_t)(si + ni) % 2;
                    int64_t toff[16];
                    const int64_t len = sweep_taps(nk, dw, pad, n, step, (n + 40) * step, toff);
                    const int64_t xq = len + 5, nj = (m - 1) * rs + (nr - 1) * rd + 1;
                    /* the row list on the heap, exactly nj long: ASan sees a read past it */
                    float **row = malloc(sizeof(float *) * (size_t)nj), acc[80], dy[3 * (5 * 60 + 2)], db = 0.5f;
                    for (int64_t j = 0; j < nj; j++) {
                        /* the first row, or the last, of zeros */
                        const int zeros = nj > 1 && j == ((si + ni) % 2 ? 0 : nj - 1);
                        row[j] = zeros ? NULL : malloc(sizeof(float) * (size_t)((nq - 1) * xq + len));
                        for (int64_t x = 0; !zeros && x < (nq - 1) * xq + len; x++)
                            row[j][x] = x % xq > toff[nk - 1] + (n - 1) * step ? INFINITY : (float)test_uniform(rng);
                    }
                    for (int64_t i = 0; i < nq * dyq; i++)
                        dy[i] = i % dyq < m * dys && i % dyq % dys < n ? (float)test_uniform(rng) : NAN;
                    for (int64_t t = 0; t < 80; t++) acc[t] = t < nt ? (float)test_uniform(rng) : NAN;
                    double want[80], scale[80], want_db = db, scale_db = 1 + fabs(db);
                    for (int64_t t = 0; t < nt; t++) want[t] = acc[t], scale[t] = 1 + fabs(acc[t]);
                    for (int64_t q = 0; q < nq; q++)
                        for (int64_t r = 0; r < m; r++)
                            for (int64_t i = 0; i < n; i++) {
                                const double d = dy[q * dyq + r * dys + i];
                                want_db += d, scale_db += fabs(d);
                                for (int64_t a = 0; a < nr; a++)
                                    for (int64_t b = 0; b < nk; b++) {
                                        const float *x = row[r * rs + a * rd];
                                        const int64_t c = toff[b] + i * step;
                                        const double v = x && c >= 0 && c < len ? x[q * xq + c] : 0.0;
                                        want[a * nk + b] += d * v, scale[a * nk + b] += fabs(d * v);
                                    }
                            }
                    k->dwrow_bw(nq, m, n, nr, (const float *const *)row, rs, rd, xq, nk, toff, step, len, dy, dys, dyq,
                                acc, with_db ? &db : NULL);
                    double worst = with_db ? fabs(db - want_db) / scale_db : (db == 0.5f ? 0 : 1);
                    int untouched = 1;
                    for (int64_t t = 0; t < 80; t++) {
                        if (t >= nt) {
                            untouched = untouched && isnan(acc[t]);
                            continue;
                        }
                        const double e = fabs(acc[t] - want[t]) / scale[t];
                        if (!(e <= worst)) worst = e;
                    }
                    CHECK(worst <= 1e-6 && untouched,
                          "%s dwrow_bw %lld images, m %lld n %lld rows %lld x %lld taps, rs %lld rd %lld step %lld "
                          "dilation %lld pad %lld db %lld: err %g, untouched %d", k->name, (long long)nq, (long long)m,
                          (long long)n, (long long)nr, (long long)nk, (long long)rs, (long long)rd, (long long)step,
                          (long long)dw, (long long)pad, (long long)with_db, worst, untouched);
                    for (int64_t j = 0; j < nj; j++) free(row[j]);
                    free(row);
                }
}

/* The small-group backward-weights kernel: q in {2, 4, 8}, every o0 / no
 * split, 1-3 taps, runs of 1 .. 37 pixels with strides, or stride 0 with a
 * zero tap; accumulators outside [nt][no][8] stay untouched. */
static void sweep_gbw_kernels(const nconv_kernels *k, uint64_t *rng) {
    const int64_t ns[] = {1, 2, 7, 37};
    for (int64_t q = 2; q <= 8; q *= 2)
        for (int64_t o0 = 0; o0 < q; o0 += 4)
            for (int64_t no = 1; no <= (q < 4 ? q : 4); no++)
                for (int64_t nt = 1; nt <= 3; nt++)
                    for (size_t ni = 0; ni < 4; ni++) {
                        if (q < 8 && no != q) continue; /* q = 2, 4: one call covers every output channel */
                        const int64_t n = ns[ni], dys = 8 + 4 * (ni % 2), xs = 8 * (1 + ni % 3), ats = 4 * 8 + 8;
                        float *dy = malloc(sizeof(float) * (size_t)(n * dys)), *x = malloc(sizeof(float) * (size_t)(n * xs + 16));
                        float acc[3 * 40], zero[8] = {0};
                        const float *xt[3];
                        for (int64_t i = 0; i < n * dys; i++) dy[i] = (float)test_uniform(rng);
                        for (int64_t i = 0; i < n * xs + 16; i++) x[i] = (float)test_uniform(rng);
                        for (int i = 0; i < 3 * 40; i++) acc[i] = 0.25f * (float)(i % 7);
                        for (int64_t t = 0; t < nt; t++) xt[t] = x + t * 4;
                        /* nt = 3: stride 0, as for a row of padding (every tap reads one pixel), tap 1 reading zeros. */
                        if (nt == 3) xt[1] = zero;
                        const int64_t xstride = nt == 3 ? 0 : xs;
                        k->gbw(n, q, o0, no, nt, dy, dys, xt, xstride, acc, ats);
                        double worst = 0;
                        int untouched = 1;
                        for (int64_t t = 0; t < 3; t++)
                            for (int64_t j = 0; j < 40; j++) {
                                const int64_t o = j / 8, l = j % 8;
                                const double start = 0.25 * (double)((t * 40 + j) % 7);
                                if (t >= nt || o >= no) {
                                    untouched = untouched && acc[t * 40 + j] == (float)start;
                                    continue;
                                }
                                double want = start;
                                for (int64_t i = 0; i < n; i++)
                                    want += (double)dy[i * dys + (l / q) * q + o0 + o] * xt[t][i * xstride + l];
                                const double e = fabs(acc[t * 40 + j] - want) / (1 + fabs(want));
                                if (!(e <= worst)) worst = e;
                            }
                        CHECK(worst <= 1e-5 && untouched, "%s gbw q %lld o0 %lld no %lld nt %lld n %lld: err %g, untouched %d",
                              k->name, (long long)q, (long long)o0, (long long)no, (long long)nt, (long long)n, worst,
                              untouched);
                        free(dy), free(x);
                    }
}

/* The small-group forward kernel: q in {2, 4, 8}, 1-9 taps, 1 .. 9 pixels
 * (the 4-pixel blocks and the tail), pixel strides, init or not, relu;
 * destination lanes between pixels stay untouched. */
static void sweep_gfwd_kernels(const nconv_kernels *k, uint64_t *rng) {
    const int64_t ns[] = {1, 3, 4, 5, 9}, kss[] = {1, 2, 9};
    for (int64_t q = 2; q <= 8; q *= 2)
        for (size_t ki = 0; ki < 3; ki++)
            for (size_t ni = 0; ni < 5; ni++)
                for (int mode = 0; mode < 3; mode++) { /* 0: no init, 1: init, 2: init + relu */
                    const int64_t n = ns[ni], ks = kss[ki], ss = 8 * (1 + ni % 2), ds = 12;
                    float *src = malloc(sizeof(float) * (size_t)(ks * n * ss + 8)), *w = malloc(sizeof(float) * (size_t)(ks * q * 8));
                    float *dst = malloc(sizeof(float) * (size_t)(n * ds)), init[8];
                    const float *taps[9];
                    for (int64_t i = 0; i < ks * n * ss + 8; i++) src[i] = (float)test_uniform(rng);
                    for (int64_t i = 0; i < ks * q * 8; i++) w[i] = (float)test_uniform(rng);
                    for (int64_t i = 0; i < n * ds; i++) dst[i] = NAN;
                    for (int l = 0; l < 8; l++) init[l] = (float)test_uniform(rng);
                    for (int64_t t = 0; t < ks; t++) taps[t] = src + t * n * ss;
                    k->gfwd(n, q, ks, taps, ss, w, mode ? init : NULL, dst, ds, mode == 2);
                    double worst = 0;
                    int untouched = 1;
                    for (int64_t i = 0; i < n; i++)
                        for (int64_t l = 0; l < ds; l++) {
                            if (l >= 8) {
                                untouched = untouched && isnan(dst[i * ds + l]);
                                continue;
                            }
                            double want = mode ? init[l] : 0.0;
                            for (int64_t t = 0; t < ks; t++)
                                for (int64_t j = 0; j < q; j++) want += (double)w[(t * q + j) * 8 + l] * taps[t][i * ss + (l / q) * q + j];
                            if (mode == 2 && want < 0) want = 0;
                            const double e = fabs(dst[i * ds + l] - want) / (1 + fabs(want));
                            if (!(e <= worst)) worst = e;
                        }
                    CHECK(worst <= 1e-5 && untouched, "%s gfwd q %lld ks %lld n %lld mode %d: err %g, untouched %d", k->name,
                          (long long)q, (long long)ks, (long long)n, mode, worst, untouched);
                    free(src), free(w), free(dst);
                }
}

/* igemm_np (all column panels of a tile in one call) against one igemm call
 * per panel: the same bits, for one tap (rows set up once per call) and two,
 * with a_off and a zero row, with and without the prefetch hints (C's next
 * tile, A's next tile), from init and accumulating onto C. */
static void sweep_igemm_np(const nconv_kernels *k, uint64_t *rng) {
    const int64_t KC = 37, NP = 4, AOFF = 3;
    float *a = malloc(sizeof(float) * 2 * 6 * (KC + AOFF)), *w = malloc(sizeof(float) * NP * 2 * KC * 16 + 32);
    float *init = malloc(sizeof(float) * NP * 16), *c1 = malloc(sizeof(float) * 6 * 80), *c2 = malloc(sizeof(float) * 6 * 80);
    float zero[64] = {0};
    float *wa = (float *)(((uintptr_t)w + 31) & ~(uintptr_t)31); /* the kernels' packed weights are 32-byte aligned */
    for (int64_t i = 0; i < 2 * 6 * (KC + AOFF); i++) a[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * 2 * KC * 16; i++) wa[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * 16; i++) init[i] = (float)test_uniform(rng);
    const float *ap[2 * 6];
    for (int64_t i = 0; i < 2 * 6; i++) ap[i] = i == 4 ? zero : a + i * (KC + AOFF);
    for (int64_t ks = 1; ks <= 2; ks++)
        for (int64_t mr = 1; mr <= 6; mr++)
            for (int64_t np = 1; np <= NP; np++)
                for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                    for (int f = 0; f < 16; f++) { /* the prefetch hint reaches past c's end: a hint never faults */
                        const int flags = (f & 1 ? NCONV_IGEMM_RELU : 0) | (f & 2 ? NCONV_IGEMM_PREFETCH : 0) |
                                          (f & 8 ? NCONV_IGEMM_NEXT_A : 0); /* ap[6 ..] the next tile's rows */
                        const float *fi = f & 4 ? NULL : init; /* NULL: accumulate onto C */
                        float *r1[6], *r2[6];
                        for (int64_t i = 0; i < 6 * 80; i++) c1[i] = c2[i] = (float)(i % 7) - 3.0f;
                        for (int r = 0; r < 6; r++) r1[r] = c1 + r * 80, r2[r] = c2 + r * 80;
                        k->igemm_np(mr, np, nc_last, KC, ks, ap, AOFF, zero, wa, ks * KC * 16, r1, fi, flags);
                        for (int64_t q = 0; q < np; q++) {
                            float *rq[6];
                            for (int r = 0; r < 6; r++) rq[r] = r2[r] + q * 16;
                            k->igemm(mr, q + 1 < np ? 16 : nc_last, KC, ks, ap, AOFF, zero, wa + q * ks * KC * 16, rq,
                                     fi ? fi + q * 16 : NULL, flags & NCONV_IGEMM_RELU);
                        }
                        CHECK(!memcmp(c1, c2, sizeof(float) * 6 * 80),
                              "%s igemm_np ks %lld mr %lld np %lld nc_last %lld flags %d: differs from per-panel calls",
                              k->name, (long long)ks, (long long)mr, (long long)np, (long long)nc_last, flags);
                    }
    free(a), free(w), free(init), free(c1), free(c2);
}

/* igemm_np's calls (igemm_np16's into 16-bit rows when to16) on the tiles of m rows that igemm_rows
 * makes: A rows lda apart from a, C rows ldc elements apart from c (rows past a tile's last repeat
 * its first). */
static void rows_by_tiles(const nconv_kernels *k, int64_t m, int64_t np, int64_t nc_last, int64_t kc, const float *a,
                          int64_t lda, const float *w, float *c, int64_t ldc, const float *init, int flags, int to16) {
    for (int64_t i = 0; i < m; i += 6) {
        const int64_t mr = m - i < 6 ? m - i : 6;
        const float *ar[6];
        float *cr[6];
        uint16_t *hr[6];
        for (int64_t r = 0; r < 6; r++) {
            const int64_t row = i + (r < mr ? r : 0);
            ar[r] = a + row * lda, cr[r] = c + row * ldc, hr[r] = (uint16_t *)c + row * ldc;
        }
        if (to16) k->igemm_np16(mr, np, nc_last, kc, 1, ar, 0, NULL, w, kc * 16, hr, init, flags);
        else k->igemm_np(mr, np, nc_last, kc, 1, ar, 0, NULL, w, kc * 16, cr, init, flags);
    }
}

/* igemm_rows against igemm_np on each tile of 6 rows (row pointers lda and ldc apart): the same
 * bits, and nothing written past the rows or the columns; m over one tile, several and partial
 * last tiles, row strides wider than the rows, from init and accumulating onto C, relu, the
 * prefetch hints (C's and A's next tiles) and streamed stores (rows 32-byte aligned); igemm_rows16 against igemm_np16 the
 * same way, into f16 and bf16 rows. */
static void sweep_igemm_rows(const nconv_kernels *k, uint64_t *rng) {
    enum { KC = 23, NP = 3, MMAX = 20, LDA = 29, LDC = 56 };
    float *a = malloc(sizeof(float) * MMAX * LDA), *w = malloc(sizeof(float) * NP * KC * 16 + 32);
    float *init = malloc(sizeof(float) * NP * 16);
    float *c1 = aligned_alloc(64, sizeof(float) * MMAX * LDC), *c2 = aligned_alloc(64, sizeof(float) * MMAX * LDC);
    float *wa = (float *)(((uintptr_t)w + 31) & ~(uintptr_t)31);
    for (int64_t i = 0; i < MMAX * LDA; i++) a[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * KC * 16; i++) wa[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * 16; i++) init[i] = (float)test_uniform(rng);
    const int64_t ms[] = {1, 5, 6, 7, 12, 17, MMAX};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (int64_t np = 1; np <= NP; np++)
            for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                for (int f = 0; f < 32; f++) {
                    const int64_t m = ms[mi];
                    const int flags = (f & 1 ? NCONV_IGEMM_RELU : 0) | (f & 2 ? NCONV_IGEMM_PREFETCH : 0) |
                                      (f & 8 ? NCONV_IGEMM_STREAM : 0) | (f & 16 ? NCONV_IGEMM_NEXT_A : 0);
                    const float *fi = f & 4 ? NULL : init; /* NULL: accumulate onto C */
                    for (int64_t i = 0; i < MMAX * LDC; i++) c1[i] = c2[i] = (float)(i % 7) - 3.0f;
                    k->igemm_rows(m, np, nc_last, KC, a, LDA, wa, KC * 16, c1, LDC, fi, flags);
                    rows_by_tiles(k, m, np, nc_last, KC, a, LDA, wa, c2, LDC, fi, flags & ~NCONV_IGEMM_NEXT_A, 0);
#if defined(__x86_64__) || defined(__i386__)
                    _mm_sfence();
#endif
                    CHECK(!memcmp(c1, c2, sizeof(float) * MMAX * LDC),
                          "%s igemm_rows m %lld np %lld nc_last %lld flags %d from C %d: differs from igemm_np's tiles",
                          k->name, (long long)m, (long long)np, (long long)nc_last, flags, fi == NULL);
                    if (f & 6) continue; /* into 16-bit rows: from init, no store hints */
                    uint16_t *h1 = (uint16_t *)c1, *h2 = (uint16_t *)c2; /* 16-bit rows LDC elements apart */
                    for (int bf16 = 0; bf16 < 2; bf16++) {
                        const int f16 = (flags & NCONV_IGEMM_RELU) | (bf16 ? NCONV_IGEMM_BF16 : 0);
                        for (int64_t i = 0; i < MMAX * LDC; i++) h1[i] = h2[i] = (uint16_t)(i * 40503u);
                        k->igemm_rows16(m, np, nc_last, KC, a, LDA, wa, KC * 16, h1, LDC, init, f16);
                        rows_by_tiles(k, m, np, nc_last, KC, a, LDA, wa, c2, LDC, init, f16, 1);
                        CHECK(!memcmp(h1, h2, sizeof(uint16_t) * MMAX * LDC),
                              "%s igemm_rows16 %s m %lld np %lld nc_last %lld relu %d: differs from igemm_np16's tiles",
                              k->name, bf16 ? "bf16" : "f16", (long long)m, (long long)np, (long long)nc_last,
                              flags & NCONV_IGEMM_RELU);
                    }
                }
    free(a), free(w), free(init), free(c1), free(c2);
}

/* gemm_ib_np against one gemm_ib call per panel: the same bits, panels of B
 * apart by a row's panel (16) or by a block of packed rows, full and partial
 * last panels, accumulating or not, kc even and odd. */
/* igemm_planes on np panels against one call per panel: the same bits, and nothing
 * written past each panel's channels (the last one's nc_last) or past the tile's 6 pixels. */
static void sweep_igemm_planes_np(const nconv_kernels *k, uint64_t *rng) {
    enum { KC = 29, NP = 5, AOFF = 1, LD = 9, PL = NP * 16 * LD };
    float *a = malloc(sizeof(float) * 2 * 6 * (KC + AOFF)), *w = malloc(sizeof(float) * NP * 2 * KC * 16 + 32);
    float *init = malloc(sizeof(float) * NP * 16), *c1 = malloc(sizeof(float) * PL), *c2 = malloc(sizeof(float) * PL);
    float zero[64] = {0};
    float *wa = (float *)(((uintptr_t)w + 31) & ~(uintptr_t)31);
    for (int64_t i = 0; i < 2 * 6 * (KC + AOFF); i++) a[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * 2 * KC * 16; i++) wa[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * 16; i++) init[i] = (float)test_uniform(rng);
    const float *ap[2 * 6];
    for (int64_t i = 0; i < 2 * 6; i++) ap[i] = i == 7 ? zero : a + i * (KC + AOFF);
    for (int64_t ks = 1; ks <= 2; ks++)
        for (int64_t np = 1; np <= NP; np++)
            for (int64_t nc_last = 1; nc_last <= 16; nc_last += 3)
                for (int relu = 0; relu < 2; relu++) {
                    const int flags = relu ? NCONV_IGEMM_RELU : 0, ws = (int)(ks * KC * 16);
                    for (int64_t i = 0; i < PL; i++) c1[i] = c2[i] = NAN;
                    k->igemm_planes(np, nc_last, KC, ks, ap, AOFF, zero, wa, ws, c1, LD, init, flags);
                    for (int64_t q = 0; q < np; q++)
                        k->igemm_planes(1, q + 1 < np ? 16 : nc_last, KC, ks, ap, AOFF, zero, wa + q * ws, 0,
                                        c2 + q * 16 * LD, LD, init + q * 16, flags);
                    int same = 1, untouched = 1;
                    for (int64_t i = 0; i < PL; i++) {
                        const int64_t ch = i / LD, r = i % LD, used = (np - 1) * 16 + nc_last;
                        same &= isnan(c1[i]) ? isnan(c2[i]) : c1[i] == c2[i];
                        untouched &= (ch < used && r < 6) || isnan(c1[i]);
                    }
                    CHECK(same && untouched, "%s igemm_planes ks %lld np %lld nc_last %lld relu %d: %s", k->name,
                          (long long)ks, (long long)np, (long long)nc_last, relu,
                          same ? "wrote outside its channels" : "differs from per-panel calls");
                }
    free(a), free(w), free(init), free(c1), free(c2);
}

/* transpose and transpose_stream: every element moved exactly, nothing written outside rows x
 * cols of dst, over sizes around the 8 x 8 and 16 x 16 tiles, 32 x 32 blocks and the streaming
 * kernels' 256-float passes, dst on and off cache-line boundaries (its rows' starts vary too). */
static void sweep_transpose(const nconv_kernels *k, uint64_t *rng) {
    const int64_t sz[] = {1, 5, 7, 8, 9, 14, 15, 16, 17, 31, 32, 33, 47, 70, 300};
    enum { N = sizeof sz / sizeof sz[0] };
    const nconv_f32_transpose_fn fns[2] = {k->transpose, k->transpose_stream};
    for (int f = 0; f < 2; f++)
        for (int64_t off = 0; fns[f] && off < 2 * f + 1; off += 3)
            for (int ri = 0; ri < N; ri++)
                for (int ci = 0; ci < N; ci++) {
                    const int64_t rows = sz[ri], cols = sz[ci], lds = cols + 3, ldd = rows + 5 + 11 * f;
                    float *src = malloc(sizeof(float) * (size_t)(rows * lds));
                    float *mem = aligned_alloc(64, sizeof(float) * (size_t)((cols * ldd + off + 15) / 16 * 16));
                    float *dst = mem + off;
                    for (int64_t i = 0; i < rows * lds; i++) src[i] = (float)test_uniform(rng);
                    for (int64_t i = 0; i < cols * ldd; i++) dst[i] = NAN;
                    fns[f](rows, cols, src, lds, dst, ldd);
                    int ok = 1;
                    for (int64_t j = 0; j < cols; j++)
                        for (int64_t i = 0; i < ldd; i++)
                            ok &= i < rows ? dst[j * ldd + i] == src[i * lds + j] : isnan(dst[j * ldd + i]);
                    CHECK(ok, "%s %s rows %lld cols %lld dst offset %lld: wrong or outside", k->name,
                          f ? "transpose_stream" : "transpose", (long long)rows, (long long)cols, (long long)off);
                    free(src), free(mem);
                }
}

/* f16 / bf16 transposes: each element moved and converted as the scalar conversions do, bit for
 * bit (a NaN only as a NaN), both ways, on random bit patterns of every class (subnormals, Inf,
 * NaN among them); nothing written outside rows x cols of dst; sizes around the 8 x 8 and
 * 16 x 16 tiles and 32 x 32 blocks. */
static int nan16(uint16_t h, int bf16) { return bf16 ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00; }

static void sweep_transpose16(const nconv_kernels *k, uint64_t *rng) {
    const int64_t sz[] = {1, 5, 8, 9, 15, 16, 17, 31, 32, 33, 47, 70};
    enum { N = sizeof sz / sizeof sz[0] };
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int ri = 0; ri < N; ri++)
            for (int ci = 0; ci < N; ci++) {
                const nconv_transpose16_fn t16 = bf16 ? k->bf16_transpose : k->f16_transpose;
                const int64_t rows = sz[ri], cols = sz[ci], lds = cols + 3, ldd = rows + 5;
                uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(rows * lds));
                uint16_t *hd = malloc(sizeof(uint16_t) * (size_t)(cols * ldd));
                float *f = malloc(sizeof(float) * (size_t)(rows * lds)), *fd = malloc(sizeof(float) * (size_t)(cols * ldd));
                for (int64_t i = 0; i < rows * lds; i++) {
                    uint32_t bits = (uint32_t)test_rng(rng);
                    if (i % 2) bits = (bits & 0x807fffffu) | ((uint32_t)test_int(rng, 90, 160) << 23); /* near 1 */
                    memcpy(&f[i], &bits, 4);
                    h[i] = (uint16_t)test_rng(rng);
                }
                for (int64_t i = 0; i < cols * ldd; i++) fd[i] = -7.0f, hd[i] = 0xabab;
                t16(rows, cols, h, lds, fd, ldd, 1);
                t16(rows, cols, f, lds, hd, ldd, 0);
                int wide_ok = 1, narrow_ok = 1;
                for (int64_t j = 0; j < cols; j++)
                    for (int64_t i = 0; i < ldd; i++) {
                        const float got = fd[j * ldd + i];
                        const uint16_t g16 = hd[j * ldd + i];
                        if (i >= rows) {
                            wide_ok &= got == -7.0f, narrow_ok &= g16 == 0xabab;
                            continue;
                        }
                        const uint16_t src = h[i * lds + j];
                        const float w = bf16 ? nconv__bf16_to_f32(src) : nconv__f16_to_f32(src);
                        wide_ok &= isnan(w) ? isnan(got) != 0 : memcmp(&w, &got, 4) == 0;
                        const uint16_t n = bf16 ? nconv__f32_to_bf16(f[i * lds + j]) : nconv__f32_to_f16(f[i * lds + j]);
                        narrow_ok &= nan16(n, bf16) ? nan16(g16, bf16) : g16 == n;
                    }
                CHECK(wide_ok, "%s %s transpose widening rows %lld cols %lld: wrong or outside", k->name,
                      bf16 ? "bf16" : "f16", (long long)rows, (long long)cols);
                CHECK(narrow_ok, "%s %s transpose narrowing rows %lld cols %lld: wrong or outside", k->name,
                      bf16 ? "bf16" : "f16", (long long)rows, (long long)cols);
                free(h), free(hd), free(f), free(fd);
            }
}

static void sweep_gemm_ib_np(const nconv_kernels *k, uint64_t *rng) {
    enum { KC = 23, NP = 5, LD = NP * 16 + 3, LDA = 29 };
    /* A as read: packed (lda 6), rows of LDA floats from column 3 on, and overlapping rows 3 floats apart
     * (as backward-weights reads windows of a W-padded input); ap[l] holds each packed for gemm_ib. */
    const int64_t ldas[3] = {6, LDA, 3};
    float *al = malloc(sizeof(float) * KC * LDA), *ap[3], *bm = malloc(sizeof(float) * KC * NP * 16 * 2);
    float *c1 = malloc(sizeof(float) * 6 * LD), *c2 = malloc(sizeof(float) * 6 * LD);
    const float *rows[KC], *as[3] = {NULL, al + 3, al};
    const float rinit[6] = {0.5f, -1.25f, 3.0f, 0.125f, -0.75f, 2.5f};
    for (int64_t i = 0; i < KC * LDA; i++) al[i] = (float)test_uniform(rng);
    for (int l = 0; l < 3; l++) {
        ap[l] = malloc(sizeof(float) * KC * 6);
        for (int64_t i = 0; i < KC * 6; i++) ap[l][i] = l == 0 ? (float)test_uniform(rng) : as[l][i / 6 * ldas[l] + i % 6];
    }
    as[0] = ap[0];
    for (int64_t i = 0; i < KC * NP * 16 * 2; i++) bm[i] = (float)test_uniform(rng);
    for (int64_t kc = KC - 1; kc <= KC; kc++)
        for (int packed = 0; packed < 2; packed++) {
            /* rows of NP * 16 + 5 floats read from column 5 on, or rows of 16 with panels KC * 16 apart */
            const int64_t boff = packed ? 0 : 5, bs = packed ? KC * 16 : 16;
            for (int64_t i = 0; i < KC; i++) rows[i] = bm + i * (packed ? 16 : NP * 16 + 5);
            for (int l = 0; l < 3; l++)
                for (int64_t mr = 1; mr <= 6; mr++)
                    for (int64_t np = 1; np <= NP; np++)
                        for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                            /* mode 0: from zero; 1: accumulating; 2: from rinit, the same bits as
                             * accumulating onto C holding it; 3: 2 with the fetch ahead */
                            for (int mode = 0; mode < 4; mode++) {
                                const int flags = (mode == 1 ? NCONV_GEMM_ACCUMULATE : 0) |
                                                  (mode == 3 ? NCONV_GEMM_FETCH_B : 0);
                                for (int64_t i = 0; i < 6 * LD; i++) c1[i] = c2[i] = (float)(i % 5) - 2.0f;
                                for (int64_t r = 0; mode >= 2 && r < 6; r++)
                                    for (int64_t j = 0; j < LD; j++) c2[r * LD + j] = rinit[r];
                                k->gemm_ib_np(mr, np, nc_last, kc, as[l], ldas[l], rows, boff, bs, c1, LD,
                                              mode >= 2 ? rinit : NULL, flags);
                                for (int64_t q = 0; q < np; q++)
                                    k->gemm_ib(mr, q + 1 < np ? 16 : nc_last, kc, ap[l], rows, boff + q * bs,
                                               c2 + q * 16, LD, mode != 0);
                                /* written columns must match; the rest still holds what it held */
                                int same = 1;
                                for (int64_t r = 0; r < 6; r++)
                                    for (int64_t j = 0; j < LD; j++) {
                                        const int in = r < mr && j < (np - 1) * 16 + nc_last;
                                        same &= in ? c1[r * LD + j] == c2[r * LD + j]
                                                   : c1[r * LD + j] == (float)((r * LD + j) % 5) - 2.0f;
                                    }
                                CHECK(same,
                                      "%s gemm_ib_np kc %lld packed %d lda %lld mr %lld np %lld nc_last %lld mode %d: "
                                      "differs from per-panel calls",
                                      k->name, (long long)kc, packed, (long long)ldas[l], (long long)mr, (long long)np,
                                      (long long)nc_last, mode);
                            }
        }
    for (int l = 0; l < 3; l++) free(ap[l]);
    free(al), free(bm), free(c1), free(c2);
}

/* The kernels of tiles taller than 6 (gemm_ib7_np, gemm_ib9_np: `name`, of `tall` rows; tables
 * that have them) against f64 sums: rows 1 to tall, full and partial last panels of one to five, kc
 * even and odd (the unrolled and the single steps), A packed tall to a step, as rows of LDA floats
 * and as overlapping windows 3 floats apart, B rows in place or in panels; nothing outside the mr
 * x columns block is written. */
static void sweep_gemm_ib_tall(const nconv_kernels *k, nconv_f32_gemm_ib_np_fn ib, int64_t tall, const char *name,
                               uint64_t *rng) {
    if (!ib) return;
    enum { KC = 24, NP = 5, LD = NP * 16 + 3, LDA = 29, TALL = 9 };
    const int64_t ldas[3] = {tall, LDA, 3};
    float *al = malloc(sizeof(float) * KC * LDA), *bm = malloc(sizeof(float) * KC * NP * 16 * 2);
    float *c = malloc(sizeof(float) * TALL * LD);
    const float *rows[KC];
    const float rinit[TALL] = {0.5f, -1.25f, 3.0f, 0.125f, -0.75f, 2.5f, 1.5f, -2.0f, 0.25f};
    for (int64_t i = 0; i < KC * LDA; i++) al[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < KC * NP * 16 * 2; i++) bm[i] = (float)test_uniform(rng);
    for (int64_t kc = KC - 1; kc <= KC; kc++)
        for (int packed = 0; packed < 2; packed++) {
            const int64_t boff = packed ? 0 : 5, bs = packed ? KC * 16 : 16;
            for (int64_t i = 0; i < KC; i++) rows[i] = bm + i * (packed ? 16 : NP * 16 + 5);
            for (int l = 0; l < 3; l++)
                for (int64_t mr = 1; mr <= tall; mr++)
                    for (int64_t np = 1; np <= NP; np++)
                        for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                            for (int acc = 0; acc < 3; acc++) { /* 2: from rinit */
                                const float *a = al + (l == 1 ? 3 : 0);
                                for (int64_t i = 0; i < TALL * LD; i++) c[i] = (float)(i % 5) - 2.0f;
                                ib(mr, np, nc_last, kc, a, ldas[l], rows, boff, bs, c, LD, acc == 2 ? rinit : NULL,
                                   acc == 1 ? NCONV_GEMM_ACCUMULATE : 0);
                                double err = 0;
                                int outside = 0;
                                for (int64_t r = 0; r < TALL; r++)
                                    for (int64_t j = 0; j < LD; j++) {
                                        const float before = (float)((r * LD + j) % 5) - 2.0f;
                                        const int64_t q = j / 16;
                                        if (r >= mr || q >= np || (q == np - 1 && j % 16 >= nc_last)) {
                                            outside |= c[r * LD + j] != before;
                                            continue;
                                        }
                                        double s = acc == 1 ? before : acc == 2 ? rinit[r] : 0.0;
                                        for (int64_t kk = 0; kk < kc; kk++)
                                            s += (double)a[kk * ldas[l] + r] * rows[kk][boff + q * bs + j % 16];
                                        const double d = fabs(s - c[r * LD + j]);
                                        err = d > err ? d : err;
                                    }
                                CHECK(err <= 1e-5 && !outside,
                                      "%s %s kc %lld packed %d lda %lld mr %lld np %lld nc_last %lld acc %d: "
                                      "err %g, wrote outside %d",
                                      k->name, name, (long long)kc, packed, (long long)ldas[l], (long long)mr, (long long)np,
                                      (long long)nc_last, acc, err, outside);
                            }
        }
    free(al), free(bm), free(c);
}

/* gemm_np against one gemm call per panel: the same bits, from zero, from
 * row initial values and accumulating, with relu, full and partial last
 * panels, kc even and odd, A packed and as rows of LDA floats (the packed
 * copy the per-panel calls read); with NCONV_GEMM_STREAM into rows whose
 * vectors are aligned (the streamed stores), gemm_np and gemm alike against
 * gemm's plain stores. */
static void sweep_gemm_np(const nconv_kernels *k, uint64_t *rng) {
    enum { KC = 21, NP = 5, BS = KC * 16 + 16, LD = NP * 16 + 16, LDA = 29 };
    float *a = malloc(sizeof(float) * KC * 6), *al = malloc(sizeof(float) * KC * LDA);
    float *b = aligned_alloc(64, sizeof(float) * NP * BS);
    float *c1 = aligned_alloc(64, sizeof(float) * 6 * LD), *c2 = aligned_alloc(64, sizeof(float) * 6 * LD);
    float *c3 = aligned_alloc(64, sizeof(float) * 6 * LD), rinit[6];
    for (int64_t i = 0; i < KC * LDA; i++) al[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < KC * 6; i++) a[i] = al[i / 6 * LDA + 3 + i % 6]; /* the six from column 3 on */
    for (int64_t i = 0; i < NP * BS; i++) b[i] = (float)test_uniform(rng);
    for (int r = 0; r < 6; r++) rinit[r] = (float)test_uniform(rng);
    for (int64_t kc = KC - 1; kc <= KC; kc++)
        for (int64_t mr = 1; mr <= 6; mr++)
            for (int64_t np = 1; np <= NP; np++)
                for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                    for (int mode = 0; mode < 16; mode++) {
                        /* mode % 4: 0 zero, 1 rinit, 2 accumulate, 3 rinit + relu; +4 rows; +8 streamed,
                         * C's rows aligned (else 3 floats on, LD - 3 apart) */
                        const int flags = (mode % 4 == 2 ? NCONV_GEMM_ACCUMULATE : 0) |
                                          (mode % 4 == 3 ? NCONV_GEMM_RELU : 0);
                        const int stream = mode & 8 ? NCONV_GEMM_STREAM : 0;
                        const int64_t off = stream ? 0 : 3, ld = stream ? LD : LD - 3;
                        const float *ri = mode % 4 == 1 || mode % 4 == 3 ? rinit : NULL;
                        for (int64_t i = 0; i < 6 * LD; i++) c1[i] = c2[i] = c3[i] = (float)(i % 5) - 2.0f;
                        if (mode % 8 < 4) k->gemm_np(mr, np, nc_last, kc, a, 6, b, BS, c1 + off, ld, ri, flags | stream);
                        else k->gemm_np(mr, np, nc_last, kc, al + 3, LDA, b, BS, c1 + off, ld, ri, flags | stream);
                        for (int64_t q = 0; q < np; q++) {
                            const int64_t nc = q + 1 < np ? 16 : nc_last;
                            k->gemm(mr, nc, kc, a, b + q * BS, c2 + off + q * 16, ld, ri, flags);
                            k->gemm(mr, nc, kc, a, b + q * BS, c3 + off + q * 16, ld, ri, flags | stream);
                        }
                        CHECK(!memcmp(c1, c2, sizeof(float) * 6 * LD) && !memcmp(c3, c2, sizeof(float) * 6 * LD),
                              "%s gemm_np kc %lld mr %lld np %lld nc_last %lld mode %d: differs from per-panel calls",
                              k->name, (long long)kc, (long long)mr, (long long)np, (long long)nc_last, mode);
                    }
    free(a), free(al), free(b), free(c1), free(c2), free(c3);
}

/* The dot-product kernel: every tile of up to 6 x 4 (up to 6 x 3 with db), runs of 1 .. 70 pixels
 * (whole vectors and tails), 1-3 images with strides between rows and images; each partial's
 * lanes sum to the dot product added to their start, and partials outside the tile stay
 * untouched (every lane). */
static void sweep_dot(const nconv_kernels *k, uint64_t *rng) {
    enum { MR = NCONV_DOT_MR, NC = NCONV_DOT_NC, VL = NCONV_DOT_LANES };
    const int64_t lens[] = {1, 7, 16, 17, 40, 70};
    for (int64_t no = 1; no <= MR; no++)
        for (int64_t nc = 1; nc <= NC; nc++)
            for (int with_db = 0; with_db < 2 - (nc == NC); with_db++)
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                    const int64_t len = lens[li], nimg = 1 + (int64_t)(li % 3), dyc = len + 3, xc = len + 5;
                    const int64_t dyn = MR * dyc + 2, xn = NC * xc + 1;
                    float *dy = malloc(sizeof(float) * (size_t)(nimg * dyn)), *x = malloc(sizeof(float) * (size_t)(nimg * xn));
                    float part[MR * NC * VL], db[MR * VL], part0[MR * NC * VL], db0[MR * VL];
                    for (int64_t i = 0; i < nimg * dyn; i++) dy[i] = (float)test_uniform(rng);
                    for (int64_t i = 0; i < nimg * xn; i++) x[i] = (float)test_uniform(rng);
                    for (int i = 0; i < MR * NC * VL; i++) part[i] = part0[i] = 0.125f * (float)(i % 9);
                    for (int i = 0; i < MR * VL; i++) db[i] = db0[i] = 0.25f * (float)(i % 5);
                    k->dot(nimg, len, dy, dyc, dyn, no, x, xc, xn, nc, part, with_db ? db : NULL);
                    double worst = 0;
                    int untouched = 1;
                    for (int64_t o = 0; o < MR; o++) {
                        for (int64_t c = 0; c <= NC; c++) { /* c == NC: db */
                            const float *got = c < NC ? part + (o * NC + c) * VL : db + o * VL;
                            const float *start = c < NC ? part0 + (o * NC + c) * VL : db0 + o * VL;
                            if (o >= no || (c < NC ? c >= nc : !with_db)) {
                                untouched = untouched && !memcmp(got, start, sizeof(float) * VL);
                                continue;
                            }
                            double want = 0, sum = 0;
                            for (int l = 0; l < VL; l++) want += start[l], sum += got[l];
                            for (int64_t j = 0; j < nimg; j++)
                                for (int64_t i = 0; i < len; i++)
                                    want += (double)dy[j * dyn + o * dyc + i] * (c < NC ? x[j * xn + c * xc + i] : 1.0);
                            const double e = fabs(sum - want) / (1 + fabs(want));
                            if (!(e <= worst)) worst = e;
                        }
                    }
                    CHECK(worst <= 1e-5 && untouched, "%s dot no %lld nc %lld db %d len %lld nimg %lld: err %g, untouched %d",
                          k->name, (long long)no, (long long)nc, with_db, (long long)len, (long long)nimg, worst, untouched);
                    free(dy), free(x);
                }
}

/* chsum: every lane the same bits as adding its rows in order (the layouts'
 * bias gradients agree bitwise through it), rows and channels off the blocks;
 * rows 4 KiB apart are summed in blocks of 32 rows (100 rows: 32, 32, 32, 4). */
static void sweep_chsum(const nconv_kernels *k, uint64_t *rng) {
    const int64_t rows_[] = {0, 1, 2, 3, 4, 5, 7, 13, 100}, cols_[] = {1, 3, 7, 8, 9, 16, 17, 64};
    for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++)
        for (size_t ci = 0; ci < 2 * sizeof cols_ / sizeof cols_[0]; ci++) {
            const int64_t cols = cols_[ci % (sizeof cols_ / sizeof cols_[0])];
            const int64_t rows = rows_[ri], ld = ci < sizeof cols_ / sizeof cols_[0] ? cols + 3 : 1003, ls = cols + 2;
            float *x = malloc(sizeof(float) * (size_t)(rows * ld + 1));
            double *lane = malloc(sizeof(double) * (size_t)(4 * ls)), *want = malloc(sizeof(double) * (size_t)(4 * ls));
            for (int64_t i = 0; i < rows * ld; i++) x[i] = (float)test_uniform(rng) * 1e3f;
            for (int64_t i = 0; i < 4 * ls; i++) lane[i] = want[i] = test_uniform(rng);
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++) want[(i % 4) * ls + j] += x[i * ld + j];
            k->chsum(rows, cols, x, ld, lane, ls);
            CHECK(!memcmp(lane, want, sizeof(double) * (size_t)(4 * ls)), "%s chsum rows %lld cols %lld: sums differ",
                  k->name, (long long)rows, (long long)cols);
            free(x), free(lane), free(want);
        }
}

/* Winograd F(4x4, 3x3) transforms against the matrices in double: values,
 * channel tails (lanes past n untouched), skipped outputs, init and relu,
 * and the poison lane that flags Inf / NaN inputs. */
static const double wBT[6][6] = {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                 {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const double wG[6][3] = {{0.25, 0, 0}, {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
static const double wAT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

/* out[i][j] = sum_{a, b} L[i][a] in[a][b] L[j][b], L of rows x cols (row pitch lp). */
static void sandwich(const double *L, int rows, int cols, const double *in, double *out) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < rows; j++) {
            double s = 0;
            for (int a = 0; a < cols; a++)
                for (int b = 0; b < cols; b++) s += L[i * cols + a] * in[a * cols + b] * L[j * cols + b];
            out[i * rows + j] = s;
        }
}

static void sweep_wino(const nconv_kernels *k, uint64_t *rng) {
    const int64_t ns[] = {1, 3, 7, 8, 9, 16, 17, 33, 40};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int64_t n = ns[ni], xs = n + 5;
        float *src = malloc(sizeof(float) * (size_t)(36 * n)), *zero = calloc((size_t)n, sizeof(float));
        float *dst = malloc(sizeof(float) * (size_t)(36 * xs)), *y = malloc(sizeof(float) * (size_t)(16 * xs));
        float *init = malloc(sizeof(float) * (size_t)n), poison[8] = {0};
        const float *sp[36];
        for (int i = 0; i < 36 * n; i++) src[i] = (float)test_uniform(rng);
        for (int i = 0; i < 36; i++) sp[i] = i % 7 == 3 ? zero : src + i * n; /* some patch pixels in padding */
        for (int i = 0; i < 36 * xs; i++) dst[i] = -7.0f;
        k->wino_in(n, sp, dst, xs, poison);
        for (int64_t c = 0; c < n; c++) {
            double d[36], v[36];
            for (int i = 0; i < 36; i++) d[i] = sp[i][c];
            sandwich(&wBT[0][0], 6, 6, d, v);
            for (int i = 0; i < 36; i++)
                CHECK(fabs(dst[i * xs + c] - v[i]) <= 1e-5 * 100, "%s wino_in n %lld: [%d][%lld] %g, want %g", k->name,
                      (long long)n, i, (long long)c, dst[i * xs + c], v[i]);
        }
        for (int i = 0; i < 36; i++)
            for (int64_t c = n; c < xs; c++) CHECK(dst[i * xs + c] == -7.0f, "%s wino_in wrote past n %lld", k->name, (long long)n);
        for (int l = 0; l < 8; l++) CHECK(poison[l] == 0.0f, "%s wino_in: finite inputs poisoned lane %d", k->name, l);
        src[(int)(35 * n) + n - 1] = INFINITY; /* patch pixel 35, last channel */
        k->wino_in(n, sp, dst, xs, poison);
        CHECK(poison[(n - 1) % 8] != poison[(n - 1) % 8], "%s wino_in n %lld: Inf not flagged", k->name, (long long)n);

        /* Output transform: m is dst (finite values again), a few outputs skipped. */
        for (int i = 0; i < 36 * xs; i++) dst[i] = (float)test_uniform(rng);
        for (int64_t c = 0; c < n; c++) init[c] = (float)test_uniform(rng);
        for (int relu = 0; relu < 2; relu++) {
            float *yp[16];
            for (int i = 0; i < 16; i++) yp[i] = i % 5 == 2 ? NULL : y + i * xs;
            for (int i = 0; i < 16 * xs; i++) y[i] = -9.0f;
            k->wino_out(n, dst, xs, relu ? init : NULL, yp, relu);
            for (int64_t c = 0; c < n; c++) {
                double m[36], o[16];
                for (int i = 0; i < 36; i++) m[i] = dst[i * xs + c];
                sandwich(&wAT[0][0], 4, 6, m, o);
                for (int i = 0; i < 16; i++) {
                    double want = o[i] + (relu ? init[c] : 0);
                    if (relu && want < 0) want = 0;
                    const float got = y[i * xs + c];
                    CHECK(yp[i] ? fabs(got - want) <= 1e-5 * 100 : got == -9.0f, "%s wino_out n %lld relu %d: [%d][%lld] %g, want %g",
                          k->name, (long long)n, relu, i, (long long)c, got, yp[i] ? want : -9.0);
                }
            }
            for (int i = 0; i < 16; i++)
                for (int64_t c = n; c < xs; c++) CHECK(y[i * xs + c] == -9.0f, "%s wino_out wrote past n %lld", k->name, (long long)n);
        }
        free(src), free(zero), free(dst), free(y), free(init);
    }
    /* Backward-weights: the dy tile transform A dY A^T (NULL pixels are zeros) and G^T S G. */
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int64_t n = ns[ni], xs = n + 5;
        float *src = malloc(sizeof(float) * (size_t)(16 * n)), *z = malloc(sizeof(float) * (size_t)(36 * xs));
        float *w = malloc(sizeof(float) * (size_t)(9 * xs)), poison[8] = {0};
        const float *sp[16];
        for (int i = 0; i < 16 * n; i++) src[i] = (float)test_uniform(rng);
        for (int i = 0; i < 16; i++) sp[i] = i % 6 == 5 ? NULL : src + i * n;
        for (int i = 0; i < 36 * xs; i++) z[i] = -7.0f;
        k->wino_dy(n, sp, z, xs, poison);
        double A[6][4]; /* A = (A^T)^T */
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 4; j++) A[i][j] = wAT[j][i];
        for (int64_t c = 0; c < n; c++) {
            double want[36];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++) {
                    double acc = 0;
                    for (int a = 0; a < 4; a++)
                        for (int b = 0; b < 4; b++) acc += A[i][a] * (sp[a * 4 + b] ? sp[a * 4 + b][c] : 0.0) * A[j][b];
                    want[i * 6 + j] = acc;
                }
            for (int i = 0; i < 36; i++)
                CHECK(fabs(z[i * xs + c] - want[i]) <= 1e-5 * 100, "%s wino_dy n %lld: [%d][%lld] %g, want %g", k->name,
                      (long long)n, i, (long long)c, z[i * xs + c], want[i]);
        }
        for (int i = 0; i < 36; i++)
            for (int64_t c = n; c < xs; c++) CHECK(z[i * xs + c] == -7.0f, "%s wino_dy wrote past n %lld", k->name, (long long)n);
        for (int l = 0; l < 8; l++) CHECK(poison[l] == 0.0f, "%s wino_dy: finite inputs poisoned lane %d", k->name, l);
        src[(int)(4 * n) + n - 1] = NAN; /* pixel 4, last channel */
        k->wino_dy(n, sp, z, xs, poison);
        CHECK(poison[(n - 1) % 8] != poison[(n - 1) % 8], "%s wino_dy n %lld: NaN not flagged", k->name, (long long)n);

        /* wgrad of one S, then of the sum of two (Winograd backward-weights adds its two slices here). */
        float *z2 = malloc(sizeof(float) * (size_t)(36 * xs));
        for (int i = 0; i < 36 * xs; i++) z[i] = (float)test_uniform(rng), z2[i] = z[i] - 0.75f;
        for (int two = 0; two < 2; two++) {
            for (int i = 0; i < 9 * xs; i++) w[i] = -9.0f;
            k->wino_wgrad(n, z, two ? z2 : NULL, xs, w, xs);
            for (int64_t c = 0; c < n; c++)
                for (int p = 0; p < 3; p++)
                    for (int q = 0; q < 3; q++) {
                        double acc = 0;
                        for (int a = 0; a < 6; a++)
                            for (int b = 0; b < 6; b++) {
                                const double sv = z[(a * 6 + b) * xs + c] + (two ? z2[(a * 6 + b) * xs + c] : 0.0);
                                acc += wG[a][p] * sv * wG[b][q];
                            }
                        CHECK(fabs(w[(p * 3 + q) * xs + c] - acc) <= 1e-6 * 20,
                              "%s wino_wgrad n %lld, %d sources: [%d][%d][%lld] %g, want %g", k->name, (long long)n,
                              1 + two, p, q, (long long)c, w[(p * 3 + q) * xs + c], acc);
                    }
            for (int i = 0; i < 9; i++)
                for (int64_t c = n; c < xs; c++)
                    CHECK(w[i * xs + c] == -9.0f, "%s wino_wgrad wrote past n %lld", k->name, (long long)n);
        }
        free(src), free(z), free(z2), free(w);
    }
    /* Weight transform: 16 columns of 3 x 3 taps. */
    float g[9 * 16], u[36 * 20];
    for (int i = 0; i < 9 * 16; i++) g[i] = (float)test_uniform(rng);
    k->wino_w(g, u, 20);
    for (int l = 0; l < 16; l++) {
        double gg[9], uu[36];
        for (int t = 0; t < 9; t++) gg[t] = g[t * 16 + l];
        /* G g G^T: G is 6 x 3, so sandwich's square form does not apply. */
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++) {
                double s = 0;
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++) s += wG[i][a] * gg[a * 3 + b] * wG[j][b];
                uu[i * 6 + j] = s;
            }
        for (int i = 0; i < 36; i++)
            CHECK(fabs(u[i * 20 + l] - uu[i]) <= 1e-6, "%s wino_w [%d][%d] %g, want %g", k->name, i, l, u[i * 20 + l], uu[i]);
    }
}

/* wino_in16 and wino_dy16 against wino_in and wino_dy of the same table on the widened values, bit
 * for bit (results, the lanes past n left alone, the poison lanes), in f16 and bf16; each pixel's
 * run its own allocation of n values, so that a read past n is seen under ASan. */
static void sweep_wino16(const nconv_kernels *k, uint64_t *rng) {
    const int64_t ns[] = {1, 3, 7, 8, 9, 16, 17, 33, 40};
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int64_t n = ns[ni], xs = n + 5;
            uint16_t *h[36], *zero16 = calloc((size_t)n, sizeof(uint16_t));
            float *f[36], *zero = calloc((size_t)n, sizeof(float));
            float *got = malloc(sizeof(float) * (size_t)(36 * xs)), *want = malloc(sizeof(float) * (size_t)(36 * xs));
            const uint16_t *hp[36];
            const float *fp[36];
            for (int i = 0; i < 36; i++) {
                h[i] = malloc(sizeof(uint16_t) * (size_t)n), f[i] = malloc(sizeof(float) * (size_t)n);
                for (int64_t c = 0; c < n; c++) {
                    const float v = (float)(4 * test_uniform(rng));
                    h[i][c] = bf16 ? nconv__f32_to_bf16(v) : nconv__f32_to_f16(v);
                    f[i][c] = bf16 ? nconv__bf16_to_f32(h[i][c]) : nconv__f16_to_f32(h[i][c]);
                }
            }
            for (int pass = 0; pass < 2; pass++) { /* pass 1: an Inf in the last channel of pixel 35 */
                if (pass) h[35][n - 1] = bf16 ? 0x7f80 : 0x7c00, f[35][n - 1] = INFINITY;
                for (int dy = 0; dy < 2; dy++) {
                    float pg[8] = {0}, pw[8] = {0};
                    for (int i = 0; i < 36; i++) { /* some pixels in padding (in) or outside dy (NULL) */
                        const int out = i % 7 == 3 && i != 35;
                        hp[i] = !out ? h[i] : dy ? NULL : zero16;
                        fp[i] = !out ? f[i] : dy ? NULL : zero;
                    }
                    if (dy) hp[15] = h[35], fp[15] = f[35]; /* dy reads 16 pixels: the Inf among them */
                    for (int64_t i = 0; i < 36 * xs; i++) got[i] = want[i] = -7.0f;
                    if (dy) k->wino_dy16(n, hp, bf16, got, xs, pg), k->wino_dy(n, fp, want, xs, pw);
                    else k->wino_in16(n, hp, bf16, got, xs, pg), k->wino_in(n, fp, want, xs, pw);
                    CHECK(!memcmp(got, want, sizeof(float) * (size_t)(36 * xs)), "%s wino_%s16 %s n %lld pass %d: not wino_%s's bits",
                          k->name, dy ? "dy" : "in", bf16 ? "bf16" : "f16", (long long)n, pass, dy ? "dy" : "in");
                    for (int l = 0; l < 8; l++)
                        CHECK((pg[l] == 0.0f) == (pw[l] == 0.0f) && (pg[l] == 0.0f) == (!pass || l != (n - 1) % 8),
                              "%s wino_%s16 %s n %lld pass %d: poison lane %d %g (f32 kernel %g)", k->name,
                              dy ? "dy" : "in", bf16 ? "bf16" : "f16", (long long)n, pass, l, pg[l], pw[l]);
                }
            }
            for (int i = 0; i < 36; i++) free(h[i]), free(f[i]);
            free(zero16), free(zero), free(got), free(want);
        }
}

/* The AVX-512 tile transforms against AVX2's, bit for bit (the same operations per lane). */
static void wino_isas_agree(const nconv_kernels *a, const nconv_kernels *b, uint64_t *rng) {
    const int64_t n = 45, xs = 48;
    float src[36 * 45], out_a[36 * 48], out_b[36 * 48], init[45], pa[8] = {0}, pb[8] = {0};
    float ya[16 * 48], yb[16 * 48];
    const float *sp[36];
    float *dpa[16], *dpb[16];
    for (int i = 0; i < 36 * n; i++) src[i] = (float)test_uniform(rng);
    for (int i = 0; i < n; i++) init[i] = (float)test_uniform(rng);
    for (int i = 0; i < 36; i++) sp[i] = src + i * n;
    for (int f = 0; f < 3; f++) {
        memset(out_a, 0, sizeof out_a), memset(out_b, 0, sizeof out_b);
        memset(ya, 0, sizeof ya), memset(yb, 0, sizeof yb);
        if (f == 0) a->wino_in(n, sp, out_a, xs, pa), b->wino_in(n, sp, out_b, xs, pb);
        if (f == 1) a->wino_dy(n, sp, out_a, xs, pa), b->wino_dy(n, sp, out_b, xs, pb);
        if (f == 2) {
            for (int i = 0; i < 16; i++) dpa[i] = i == 5 ? NULL : ya + i * xs, dpb[i] = i == 5 ? NULL : yb + i * xs;
            a->wino_out(n, src, n, init, dpa, 1), b->wino_out(n, src, n, init, dpb, 1);
        }
        CHECK(!memcmp(out_a, out_b, sizeof out_a) && !memcmp(ya, yb, sizeof ya),
              "%s and %s Winograd transform %d differ", a->name, b->name, f);
    }
}

/* Each table holds what the kernel lists of kernels.h name for its ISA: every slot filled but
 * where a list says NONE, with the function of the ISA its column names. */
#define EXPECT_GENERIC(slot, type, function, avx2, avx512) \
    CHECK((const void *)k->slot == (const void *)nconv_##function##__generic, "generic %s", #slot);
#define EXPECT_AVX2(slot, type, function, avx2, avx512) \
    CHECK((const void *)k->slot == (const void *)NCONV_KERNEL_##avx2(function), "avx2 %s", #slot);
#define EXPECT_AVX512(slot, type, function, avx2, avx512) \
    CHECK((const void *)k->slot == (const void *)NCONV_KERNEL_##avx512(function), "avx512 %s", #slot);
#define EXPECT_AVX512_BF16(slot, type, function, avx2, avx512) \
    CHECK((const void *)k->slot == (const void *)NCONV_KERNEL_BF16_##avx512(function), "avx512_bf16 %s", #slot);
#define COUNT_SLOT(slot, type, function, avx2, avx512) +1
static void check_tables(void) {
    const nconv_kernels *k = nconv__kernels_for(NCONV_ISA_GENERIC);
    CHECK(k && k->isa == NCONV_ISA_GENERIC && !strcmp(k->name, "generic"), "the generic table");
    if (k) { NCONV_KERNELS(EXPECT_GENERIC) }
#if defined(__x86_64__) || defined(_M_X64)
    k = nconv__kernels_for(NCONV_ISA_AVX2);
    CHECK(k && k->isa == NCONV_ISA_AVX2 && !strcmp(k->name, "avx2"), "the avx2 table");
    if (k) { NCONV_KERNELS(EXPECT_AVX2) }
    k = nconv__kernels_for(NCONV_ISA_AVX512);
    CHECK(k && k->isa == NCONV_ISA_AVX512 && !strcmp(k->name, "avx512"), "the avx512 table");
    if (k) { NCONV_KERNELS(EXPECT_AVX512) }
    k = nconv__kernels_for(NCONV_ISA_AVX512_BF16);
    CHECK(k && k->isa == NCONV_ISA_AVX512_BF16 && !strcmp(k->name, "avx512_bf16"), "the avx512_bf16 table");
    if (k) { NCONV_KERNELS(EXPECT_AVX512_BF16) }
    /* the variants built with AVX512-BF16 are their own functions */
    CHECK(k && (const void *)k->bf16_convert != (const void *)nconv_bf16_convert__avx512,
          "avx512_bf16 bf16_convert is the AVX-512F kernel");
#endif
    /* every slot is in a list: the table is the header fields and one pointer per line */
    CHECK(sizeof(nconv_kernels) == offsetof(nconv_kernels, name) + sizeof(const char *) +
                                       (0 NCONV_KERNELS(COUNT_SLOT)) * sizeof(void (*)(void)),
          "nconv_kernels has slots no list names");
}

/* f64_gemm against plain f64 sums (one tile, every reduction length, C unread without
 * accumulate), then the blocked f64 GEMM around it (gemm_f64.c) over sizes across its blocks,
 * transposed A, accumulation, and a split of N that must not change a bit. */
static double f64_sum_err(const double *C, int64_t ldc, const double *R, const double *S, int64_t M, int64_t N) {
    double worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            const double e = fabs(C[i * ldc + j] - R[i * N + j]) / (1e-300 + S[i * N + j]);
            if (!(e <= worst)) worst = e;
        }
    return worst;
}

static void sweep_f64_gemm(const nconv_kernels *k, uint64_t *rng) {
    const int nr = k->f64_nr, mr = NCONV_F64_MR;
    CHECK(nr == 8 || nr == 16, "%s f64 tile width %d", k->name, nr);
    const int64_t kcs[] = {0, 1, 3, 256};
    for (int ki = 0; ki < 4; ki++)
        for (int acc = 0; acc < 2; acc++) {
            const int64_t kc = kcs[ki], ldc = nr + 3;
            /* sizes a multiple of the alignment, as aligned_alloc requires */
            double *a = aligned_alloc(64, sizeof(double) * (size_t)((kc * mr + 15) / 8 * 8));
            double *b = aligned_alloc(64, sizeof(double) * (size_t)(kc * 16 + 8));
            double C[NCONV_F64_MR * 19], R[NCONV_F64_MR * 16], S[NCONV_F64_MR * 16];
            for (int64_t i = 0; i < kc * mr; i++) a[i] = test_uniform(rng);
            for (int64_t i = 0; i < kc * nr; i++) b[i] = test_uniform(rng);
            for (int r = 0; r < mr; r++)
                for (int j = 0; j < nr; j++) {
                    const double init = acc ? test_uniform(rng) : 0;
                    C[r * ldc + j] = acc ? init : NAN;
                    double sum = init, mag = fabs(init);
                    for (int64_t q = 0; q < kc; q++) sum += a[q * mr + r] * b[q * nr + j], mag += fabs(a[q * mr + r] * b[q * nr + j]);
                    R[r * nr + j] = sum, S[r * nr + j] = mag;
                }
            k->f64_gemm(kc, a, b, C, ldc, acc);
            const double e = f64_sum_err(C, ldc, R, S, mr, nr);
            CHECK(e <= 1e-15 * (double)(kc + 2), "%s f64_gemm kc %lld acc %d: err %g", k->name, (long long)kc, acc, e);
            free(a), free(b);
        }
    const int64_t mnk[][3] = {{1, 1, 1}, {5, 7, 3}, {6, 16, 0}, {7, 9, 257}, {97, 17, 20}, {13, 1030, 9}, {7, 33, 600}};
    double *pack = aligned_alloc(64, nconv__f64_gemm_pack_bytes());
    for (int t = 0; t < 7; t++)
        for (int trans = 0; trans < 2; trans++)
            for (int acc = 0; acc < 2; acc++) {
                const int64_t M = mnk[t][0], N = mnk[t][1], K = mnk[t][2], ldb = N + 3, ldc = N + 5;
                double *A = malloc(sizeof(double) * (size_t)(M * K + 1)), *B = malloc(sizeof(double) * (size_t)(K * ldb + 1));
                double *C = malloc(sizeof(double) * (size_t)(M * ldc)), *C2 = malloc(sizeof(double) * (size_t)(M * ldc));
                double *R = malloc(sizeof(double) * (size_t)(M * N)), *S = malloc(sizeof(double) * (size_t)(M * N));
                for (int64_t i = 0; i < M * K; i++) A[i] = test_uniform(rng);
                for (int64_t i = 0; i < K * ldb; i++) B[i] = test_uniform(rng);
                const int64_t rsa = trans ? 1 : K, csa = trans ? M : 1;
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) {
                        const double init = acc ? 0.25 * (double)(i - j) : 0;
                        C[i * ldc + j] = C2[i * ldc + j] = acc ? init : NAN;
                        double sum = init, mag = fabs(init);
                        for (int64_t q = 0; q < K; q++)
                            sum += A[i * rsa + q * csa] * B[q * ldb + j], mag += fabs(A[i * rsa + q * csa] * B[q * ldb + j]);
                        R[i * N + j] = sum, S[i * N + j] = mag;
                    }
                nconv__f64_gemm(k, M, N, K, A, rsa, csa, B, ldb, C, ldc, acc, pack);
                const double e = f64_sum_err(C, ldc, R, S, M, N);
                CHECK(e <= 1e-15 * (double)(K + 2), "%s f64 GEMM M %lld N %lld K %lld trans %d acc %d: err %g", k->name,
                      (long long)M, (long long)N, (long long)K, trans, acc, e);
                /* columns [0, h) and [h, N) in two calls, as threads share dw's columns */
                const int64_t h = N / 2;
                nconv__f64_gemm(k, M, h, K, A, rsa, csa, B, ldb, C2, ldc, acc, pack);
                nconv__f64_gemm(k, M, N - h, K, A, rsa, csa, B + h, ldb, C2 + h, ldc, acc, pack);
                int same = 1;
                for (int64_t i = 0; i < M; i++) same = same && !memcmp(C + i * ldc, C2 + i * ldc, sizeof(double) * (size_t)N);
                CHECK(same, "%s f64 GEMM M %lld N %lld K %lld: a split of N changes the result", k->name, (long long)M,
                      (long long)N, (long long)K);
                free(A), free(B), free(C), free(C2), free(R), free(S);
            }
    free(pack);
}

/* f16 / bf16 conversion kernels against the scalar conversions, bit for bit (a NaN only as a NaN),
 * on random values of every magnitude and on the edges: zeros, subnormals, ties to even, the
 * largest finite values and what overflows, infinities, NaNs; lengths across the vector tails. */
static void sweep_convert(const nconv_kernels *k, uint64_t *rng) {
    enum { N = 1000 };
    static const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x33800000u, 0x33c00000u, 0x387fc000u,
                                     0x38800000u, 0x3f800000u, 0x3f801000u, 0x3f803000u, 0x3f808000u, 0x3f818000u,
                                     0x477fe000u, 0x477ff000u, 0x477fefffu, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                                     0x7fc00000u, 0x7f800001u, 0xffc12345u, 0x3effffffu};
    const size_t ne = sizeof edges / sizeof edges[0];
    float f[N], back[N];
    uint16_t h[N], want[N], hs[N];
    for (int i = 0; i < N; i++) {
        uint32_t bits = (uint32_t)test_rng(rng);
        if (i % 3 == 0) bits = (bits & 0x807fffffu) | ((uint32_t)test_int(rng, 100, 150) << 23); /* around 1 */
        if ((size_t)i < ne) bits = edges[i];
        memcpy(&f[i], &bits, 4);
        hs[i] = (uint16_t)test_rng(rng);
    }
    for (int type = 0; type < 2; type++) {
        const nconv_convert16_fn cv = type ? k->bf16_convert : k->f16_convert;
        const char *name = type ? "bf16" : "f16";
        const int64_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, N};
        for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++) {
            const int64_t n = lens[li];
            for (int i = 0; i < N; i++) want[i] = type ? nconv__f32_to_bf16(f[i]) : nconv__f32_to_f16(f[i]);
            memset(h, 0xab, sizeof h);
            cv(n, f, h, 0);
            int64_t bad = -1;
            for (int64_t i = 0; i < N && bad < 0; i++) {
                const int nan_w = type ? (want[i] & 0x7fff) > 0x7f80 : (want[i] & 0x7fff) > 0x7c00;
                const int nan_h = type ? (h[i] & 0x7fff) > 0x7f80 : (h[i] & 0x7fff) > 0x7c00;
                if (i >= n ? h[i] != 0xabab : nan_w ? !nan_h : h[i] != want[i]) bad = i;
            }
            CHECK(bad < 0, "%s %s narrowing, n %lld: element %lld: 0x%04x, want 0x%04x", k->name, name, (long long)n,
                  (long long)bad, bad < 0 ? 0 : h[bad], bad < 0 ? 0 : want[bad]);
            for (int i = 0; i < N; i++) back[i] = -7.0f;
            cv(n, hs, back, 1);
            bad = -1;
            for (int64_t i = 0; i < N && bad < 0; i++) {
                const float w = type ? nconv__bf16_to_f32(hs[i]) : nconv__f16_to_f32(hs[i]);
                if (i >= n ? back[i] != -7.0f : isnan(w) ? !isnan(back[i]) : memcmp(&w, &back[i], 4) != 0) bad = i;
            }
            CHECK(bad < 0, "%s %s widening, n %lld: element %lld of 0x%04x", k->name, name, (long long)n,
                  (long long)bad, bad < 0 ? 0 : hs[bad]);
        }
    }
}

/* The 16-bit kernels' output h (6 rows of ld, prefilled 0xabab) against the f32 kernels' c: the
 * first element i = r * ld + j that is not c narrowed by the scalar conversion (a NaN for a NaN)
 * in rows r < mr, columns j < cols, or not left as it was outside them; -1 if none. */
static int64_t first_bad16(const uint16_t *h, const float *c, int64_t ld, int64_t mr, int64_t cols, int bf16) {
    for (int64_t i = 0; i < 6 * ld; i++) {
        const int64_t r = i / ld, j = i % ld;
        if (r >= mr || j >= cols) {
            if (h[i] != 0xabab) return i;
            continue;
        }
        const uint16_t want = bf16 ? nconv__f32_to_bf16(c[i]) : nconv__f32_to_f16(c[i]);
        const int nan_w = bf16 ? (want & 0x7fff) > 0x7f80 : (want & 0x7fff) > 0x7c00;
        const int nan_g = bf16 ? (h[i] & 0x7fff) > 0x7f80 : (h[i] & 0x7fff) > 0x7c00;
        if (nan_w ? !nan_g : h[i] != want) return i;
    }
    return -1;
}

/* igemm_np16 against igemm_np narrowed by the scalar conversions: the same bits (a NaN for a
 * NaN), f16 and bf16, relu or not, one tap and two, partial rows and last panels; columns whose
 * weights are zero keep their init, one of the conversion's edge cases (subnormals, ties, the
 * largest finite values, Inf, NaN); nothing written past the last panel's nc_last or row mr. */
static void sweep_igemm_np16(const nconv_kernels *k, uint64_t *rng) {
    enum { KC = 29, NP = 3, AOFF = 2, LD = NP * 16 + 4 };
    static const uint32_t edges[] = {0x00000001u, 0x387fc000u, 0x477ff000u, 0x7f7fffffu, 0x7fc00000u,
                                     0xff800000u, 0x3f808000u, 0x3f818000u, 0x80000000u, 0x33c00000u,
                                     0x477fefffu, 0x00400000u};
    const int64_t ne = sizeof edges / sizeof edges[0];
    float *a = malloc(sizeof(float) * 2 * 6 * (KC + AOFF)), *w = malloc(sizeof(float) * NP * 2 * KC * 16 + 32);
    float init[NP * 16], c[6][LD], zero[64] = {0};
    uint16_t h[6][LD];
    float *wa = (float *)(((uintptr_t)w + 31) & ~(uintptr_t)31); /* the kernels' packed weights are 32-byte aligned */
    for (int64_t i = 0; i < 2 * 6 * (KC + AOFF); i++) a[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * 2 * KC * 16; i++) wa[i] = i % 4 == 0 ? 0.0f : (float)test_uniform(rng);
    for (int64_t j = 0; j < NP * 16; j++) {
        init[j] = (float)test_uniform(rng);
        if (j % 4 == 0) memcpy(&init[j], &edges[(j / 4) % ne], 4);
    }
    const float *ap[2 * 6];
    for (int64_t i = 0; i < 2 * 6; i++) ap[i] = i == 4 ? zero : a + i * (KC + AOFF);
    for (int64_t ks = 1; ks <= 2; ks++)
        for (int64_t mr = 1; mr <= 6; mr++)
            for (int64_t np = 1; np <= NP; np++)
                for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                    for (int f = 0; f < 4; f++) {
                        const int relu = f & 1 ? NCONV_IGEMM_RELU : 0, bf16 = f & 2;
                        float *cr[6];
                        uint16_t *hr[6];
                        for (int r = 0; r < 6; r++) cr[r] = c[r], hr[r] = h[r];
                        k->igemm_np(mr, np, nc_last, KC, ks, ap, AOFF, zero, wa, ks * KC * 16, cr, init, relu);
                        memset(h, 0xab, sizeof h);
                        k->igemm_np16(mr, np, nc_last, KC, ks, ap, AOFF, zero, wa, ks * KC * 16, hr, init,
                                      relu | (bf16 ? NCONV_IGEMM_BF16 : 0));
                        const int64_t bad = first_bad16(h[0], c[0], LD, mr, (np - 1) * 16 + nc_last, bf16);
                        CHECK(bad < 0,
                              "%s igemm_np16 %s ks %lld mr %lld np %lld nc_last %lld relu %d: row %lld col %lld",
                              k->name, bf16 ? "bf16" : "f16", (long long)ks, (long long)mr, (long long)np,
                              (long long)nc_last, relu, (long long)(bad / LD), (long long)(bad % LD));
                    }
    free(a), free(w);
}

/* bf16_igemm_np (where the table has it) against f64 sums of the same bf16 products: within
 * 1e-5 of the sum of |terms| into f32 rows from init and accumulated onto C, relu or not, one tap
 * and two, partial rows and last panels, the zero row; into bf16 rows the f32 result narrowed
 * by the scalar conversion, bit for bit; nothing written past the last panel's nc_last or row mr. */
static void sweep_bf16_igemm_np(const nconv_kernels *k, uint64_t *rng) {
    if (!k->bf16_igemm_np) return;
    enum { KC = 30, NP = 3, AOFF = 2, LD = NP * 16 + 4, ROW = KC + AOFF };
    uint16_t a[2 * 6 * ROW], zero[KC] = {0}, h[6][LD];
    uint16_t *w = malloc(sizeof(uint16_t) * NP * 2 * KC * 16);
    float init[NP * 16], c[6][LD], c0[6][LD];
    double want[6][LD], mag[6][LD];
    for (int64_t i = 0; i < 2 * 6 * ROW; i++) a[i] = nconv__f32_to_bf16((float)test_uniform(rng));
    for (int64_t i = 0; i < NP * 2 * KC * 16; i++) w[i] = i % 7 == 0 ? 0 : nconv__f32_to_bf16((float)test_uniform(rng));
    for (int64_t j = 0; j < NP * 16; j++) init[j] = (float)test_uniform(rng);
    const uint16_t *ap[2 * 6];
    for (int64_t i = 0; i < 2 * 6; i++) ap[i] = i == 4 ? zero : a + i * ROW;
    for (int64_t ks = 1; ks <= 2; ks++)
        for (int64_t mr = 1; mr <= 6; mr++)
            for (int64_t np = 1; np <= NP; np++)
                for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                    for (int f = 0; f < 4; f++) {
                        const int relu = f & 1 ? NCONV_IGEMM_RELU : 0, from_c = f & 2;
                        const int64_t cols = (np - 1) * 16 + nc_last, ws = ks * KC * 16;
                        float *cr[6];
                        uint16_t *hr[6];
                        for (int r = 0; r < 6; r++) {
                            cr[r] = c[r], hr[r] = h[r];
                            for (int64_t j = 0; j < LD; j++) c[r][j] = c0[r][j] = (float)(r * LD + j) / 64.0f;
                        }
                        for (int r = 0; r < 6; r++)
                            for (int64_t j = 0; j < cols; j++) {
                                const int64_t q = j / 16, col = j % 16;
                                double sum = from_c ? c0[r][j] : init[j], m = fabs(sum);
                                for (int64_t t = 0; t < ks; t++) {
                                    const uint16_t *row = ap[t * 6 + r] == zero ? zero : ap[t * 6 + r] + AOFF;
                                    for (int64_t kk = 0; kk < KC; kk++) {
                                        const uint16_t wb = w[q * ws + ((t * KC + kk) / 2 * 16 + col) * 2 + kk % 2];
                                        const double term =
                                            (double)nconv__bf16_to_f32(row[kk]) * nconv__bf16_to_f32(wb);
                                        sum += term, m += fabs(term);
                                    }
                                }
                                want[r][j] = relu && sum < 0 ? 0.0 : sum, mag[r][j] = m;
                            }
                        k->bf16_igemm_np(mr, np, nc_last, KC, ks, ap, AOFF, zero, w, ws, cr, NULL, from_c ? NULL : init,
                                         relu);
                        int64_t bad = -1;
                        for (int64_t i = 0; i < 6 * LD && bad < 0; i++) {
                            const int64_t r = i / LD, j = i % LD;
                            if (r >= mr || j >= cols ? c[r][j] != c0[r][j]
                                                     : !(fabs(c[r][j] - want[r][j]) <= 1e-5 * mag[r][j] + 1e-30))
                                bad = i;
                        }
                        CHECK(bad < 0,
                              "%s bf16_igemm_np ks %lld mr %lld np %lld nc_last %lld relu %d from C %d: "
                              "row %lld col %lld",
                              k->name, (long long)ks, (long long)mr, (long long)np, (long long)nc_last, relu, from_c,
                              (long long)(bad / LD), (long long)(bad % LD));
                        if (from_c) continue;
                        memset(h, 0xab, sizeof h);
                        k->bf16_igemm_np(mr, np, nc_last, KC, ks, ap, AOFF, zero, w, ws, NULL, hr, init, relu);
                        bad = first_bad16(h[0], c[0], LD, mr, cols, 1);
                        CHECK(bad < 0,
                              "%s bf16_igemm_np into bf16 ks %lld mr %lld np %lld nc_last %lld relu %d: "
                              "row %lld col %lld",
                              k->name, (long long)ks, (long long)mr, (long long)np, (long long)nc_last, relu,
                              (long long)(bad / LD), (long long)(bad % LD));
                    }
    free(w);
}

/* gemm_np16 against gemm_np narrowed by the scalar conversions, as sweep_igemm_np16: f16 and
 * bf16, relu or not, A packed or a matrix's rows (lda 6 and 9), partial rows and last panels,
 * edge-case sums in the columns whose B is zero (through rinit: a row's start value); nothing
 * written past the last panel's nc_last or row mr. */
static void sweep_gemm_np16(const nconv_kernels *k, uint64_t *rng) {
    enum { KC = 23, NP = 3, LD = NP * 16 + 4 };
    static const uint32_t edges[] = {0x00000001u, 0x387fc000u, 0x477ff000u, 0x7fc00000u, 0xff800000u, 0x3f808000u};
    float *a = malloc(sizeof(float) * KC * 9), *b = malloc(sizeof(float) * NP * KC * 16 + 32);
    float rinit[6], c[6][LD];
    uint16_t h[6][LD];
    float *ba = (float *)(((uintptr_t)b + 31) & ~(uintptr_t)31);
    for (int64_t i = 0; i < KC * 9; i++) a[i] = (float)test_uniform(rng);
    for (int64_t i = 0; i < NP * KC * 16; i++) ba[i] = i % 16 % 5 == 0 ? 0.0f : (float)test_uniform(rng);
    for (int r = 0; r < 6; r++) memcpy(&rinit[r], &edges[r], 4);
    for (int64_t lda = 6; lda <= 9; lda += 3)
        for (int64_t mr = 1; mr <= 6; mr++)
            for (int64_t np = 1; np <= NP; np++)
                for (int64_t nc_last = 1; nc_last <= 16; nc_last += 5)
                    for (int f = 0; f < 4; f++) {
                        const int relu = f & 1 ? NCONV_GEMM_RELU : 0, bf16 = f & 2;
                        k->gemm_np(mr, np, nc_last, KC, a, lda, ba, KC * 16, c[0], LD, rinit, relu);
                        memset(h, 0xab, sizeof h);
                        k->gemm_np16(mr, np, nc_last, KC, a, lda, ba, KC * 16, h[0], LD, rinit,
                                     relu | (bf16 ? NCONV_GEMM_BF16 : 0));
                        const int64_t bad = first_bad16(h[0], c[0], LD, mr, (np - 1) * 16 + nc_last, bf16);
                        CHECK(bad < 0,
                              "%s gemm_np16 %s lda %lld mr %lld np %lld nc_last %lld relu %d: row %lld col %lld",
                              k->name, bf16 ? "bf16" : "f16", (long long)lda, (long long)mr, (long long)np,
                              (long long)nc_last, relu, (long long)(bad / LD), (long long)(bad % LD));
                    }
    free(a), free(b);
}

int main(void) {
    uint64_t krng = 77;
    check_tables();
    for (int isa = NCONV_ISA_BEST; isa >= NCONV_ISA_GENERIC; isa--) {
        const nconv_kernels *k = nconv__kernels_for((nconv_isa)isa);
        if (!k) continue;
        if ((nconv_isa)isa > nconv__detect_isa()) {
            printf("skip %s kernels: this CPU lacks the ISA (or NCONV_MAX_ISA caps it)\n", k->name);
            continue;
        }
        sweep_tile_kernels(k, &krng);
        sweep_dwtile_kernels(k, &krng);
        sweep_dwrow_kernels(k, &krng);
        sweep_dwrow_bw_kernels(k, &krng);
        sweep_dwflat_kernels(k, &krng);
        sweep_dwflat_bw_kernels(k, &krng);
        sweep_gbw_kernels(k, &krng);
        sweep_gfwd_kernels(k, &krng);
        sweep_stem_kernels(k, &krng);
        sweep_chsum(k, &krng);
        sweep_dot(k, &krng);
        sweep_transpose(k, &krng);
        sweep_transpose16(k, &krng);
        sweep_igemm_np(k, &krng);
        sweep_igemm_rows(k, &krng);
        sweep_igemm_np16(k, &krng);
        sweep_igemm_planes_np(k, &krng);
        sweep_gemm_ib_np(k, &krng);
        sweep_gemm_ib_tall(k, k->gemm_ib7_np, 7, "gemm_ib7_np", &krng);
        sweep_gemm_ib_tall(k, k->gemm_ib9_np, 9, "gemm_ib9_np", &krng);
        sweep_gemm_np(k, &krng);
        sweep_gemm_np16(k, &krng);
        sweep_bf16_igemm_np(k, &krng);
        sweep_wino(k, &krng);
        sweep_wino16(k, &krng);
        sweep_f64_gemm(k, &krng);
        sweep_convert(k, &krng);
    }
    if (nconv__detect_isa() >= NCONV_ISA_AVX512)
        wino_isas_agree(nconv__kernels_for(NCONV_ISA_AVX512), nconv__kernels_for(NCONV_ISA_AVX2), &krng);
    const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 13, 255, 256, 257, 300};
    uint64_t rng = 5;
    for (size_t mi = 0; mi < 11; mi++)
        for (size_t ni = 0; ni < 11; ni += 2)
            for (size_t ki = 0; ki < 11; ki += 3)
                for (int trans = 0; trans < 2; trans++)
                    for (int acc = 0; acc < 2; acc++) {
                        const int64_t M = sizes[mi] > 64 ? sizes[mi] / 8 : sizes[mi], N = sizes[ni], K = sizes[ki];
                        const int64_t ldb = N + 3, ldc = N + 5;
                        float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * ldb));
                        float *C = malloc(sizeof(float) * (size_t)(M * ldc));
                        double *R = malloc(sizeof(double) * (size_t)(M * N));
                        for (int64_t i = 0; i < M * K; i++) A[i] = (float)test_uniform(&rng);
                        for (int64_t i = 0; i < K * ldb; i++) B[i] = (float)test_uniform(&rng);
                        const int64_t rsa = trans ? 1 : K, csa = trans ? M : 1;
                        for (int64_t i = 0; i < M; i++)
                            for (int64_t j = 0; j < N; j++) {
                                double init = acc ? 0.25 * (double)(i - j) : 0;
                                C[i * ldc + j] = acc ? (float)init : NAN;
                                double s = init;
                                for (int64_t p = 0; p < K; p++) s += (double)A[i * rsa + p * csa] * B[p * ldb + j];
                                R[i * N + j] = s;
                            }
                        nconv_f32_gemm__generic(M, N, K, A, rsa, csa, B, ldb, C, ldc, acc);
                        double worst = 0;
                        for (int64_t i = 0; i < M; i++)
                            for (int64_t j = 0; j < N; j++) {
                                double e = fabs(C[i * ldc + j] - R[i * N + j]) / (1 + fabs(R[i * N + j]));
                                if (!(e <= worst)) worst = e;
                            }
                        CHECK(worst <= 1e-5 * (double)(K > 16 ? K : 16) / 16, "M %lld N %lld K %lld trans %d acc %d: err %g",
                              (long long)M, (long long)N, (long long)K, trans, acc, worst);
                        free(A), free(B), free(C), free(R);
                    }
    return test_summary();
}
