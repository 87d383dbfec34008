/*
 * Reference convolution: the oracle every other algorithm is tested against.
 *
 * Plain loops over dense C-order f64 arrays in the core shapes
 *   x [N, C, ID, IH, IW], w [O, C/G, KD, KH, KW], y [N, O, OD, OH, OW].
 * All three directions walk the same nest, (n, g, o, output position, c, tap),
 * so they are exact adjoints of each other, padding modes included: a tap
 * reads (or, backwards, accumulates into) the input element that
 * nconv__map_index names. Summation order is fixed: results are deterministic.
 *
 * Zero padding behaves as explicit zeros in front of the input (PyTorch's
 * semantics for NaN and Inf): forward and backward-weights multiply them
 * (0 * Inf = NaN reaches y or dw), backward-data computes no gradient for
 * them (dx only receives products of dy with weights).
 * `taps` is scratch for k[0] + k[1] + k[2] indices (the caller provides it).
 */
#include "../internal.h"

#include <string.h>

typedef enum { REF_FWD, REF_BWD_D, REF_BWD_W } ref_dir;

/* Input element for each tap of one output coordinate along one axis. */
static void tap_table(const nconv_core *c, int ax, int64_t o, int64_t *idx) {
    for (int64_t t = 0; t < c->k[ax]; t++)
        idx[t] = nconv__map_index(o * c->s[ax] - c->pb[ax] + t * c->d[ax], c->in[ax], c->mode);
}

/* n taps over zero padding: products with zeros (forward: into the
 * accumulator, backward-weights: into w), nothing for backward-data. */
static void pad_taps(ref_dir dir, int64_t n, double *w, double yv, double *acc) {
    for (int64_t t = 0; t < n; t++) {
        if (dir == REF_FWD) *acc += 0.0 * w[t];
        else if (dir == REF_BWD_W) w[t] += yv * 0.0;
    }
}

static void ref_nest(const nconv_core *c, ref_dir dir, double *x, double *w, double *y, int64_t *td) {
    const int64_t Cg = c->C / c->G, Og = c->O / c->G;
    const int64_t IS = nconv__core_in_spatial(c), OS = nconv__core_out_spatial(c);
    const int64_t KS = nconv__core_kernel_spatial(c);
    int64_t *th = td + c->k[0], *tw = th + c->k[1];
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t g = 0; g < c->G; g++)
            for (int64_t oc = 0; oc < Og; oc++) {
                const int64_t o = g * Og + oc;
                double *wo = w + o * Cg * KS;
                for (int64_t od = 0; od < c->out[0]; od++) {
                    tap_table(c, 0, od, td);
                    for (int64_t oh = 0; oh < c->out[1]; oh++) {
                        tap_table(c, 1, oh, th);
                        for (int64_t ow = 0; ow < c->out[2]; ow++) {
                            tap_table(c, 2, ow, tw);
                            double *yp = y + (n * c->O + o) * OS + (od * c->out[1] + oh) * c->out[2] + ow;
                            const double yv = *yp;
                            double acc = 0;
                            for (int64_t ci = 0; ci < Cg; ci++) {
                                double *xc = x + (n * c->C + g * Cg + ci) * IS;
                                double *wc = wo + ci * KS;
                                for (int64_t kd = 0; kd < c->k[0]; kd++) {
                                    if (td[kd] < 0) {
                                        pad_taps(dir, c->k[1] * c->k[2], wc + kd * c->k[1] * c->k[2], yv, &acc);
                                        continue;
                                    }
                                    for (int64_t kh = 0; kh < c->k[1]; kh++) {
                                        if (th[kh] < 0) {
                                            pad_taps(dir, c->k[2], wc + (kd * c->k[1] + kh) * c->k[2], yv, &acc);
                                            continue;
                                        }
                                        double *xr = xc + (td[kd] * c->in[1] + th[kh]) * c->in[2];
                                        double *wr = wc + (kd * c->k[1] + kh) * c->k[2];
                                        switch (dir) {
                                        case REF_FWD:
                                            for (int64_t kw = 0; kw < c->k[2]; kw++)
                                                acc += (tw[kw] >= 0 ? xr[tw[kw]] : 0.0) * wr[kw];
                                            break;
                                        case REF_BWD_D:
                                            for (int64_t kw = 0; kw < c->k[2]; kw++)
                                                if (tw[kw] >= 0) xr[tw[kw]] += yv * wr[kw];
                                            break;
                                        case REF_BWD_W:
                                            for (int64_t kw = 0; kw < c->k[2]; kw++)
                                                wr[kw] += yv * (tw[kw] >= 0 ? xr[tw[kw]] : 0.0);
                                            break;
                                        }
                                    }
                                }
                            }
                            if (dir == REF_FWD) *yp = acc;
                        }
                    }
                }
            }
}

void nconv__ref_fwd(const nconv_core *c, const double *x, const double *w, double *y, int64_t *taps) {
    ref_nest(c, REF_FWD, (double *)x, (double *)w, y, taps);
}

void nconv__ref_bwd_d(const nconv_core *c, const double *dy, const double *w, double *dx, int64_t *taps) {
    memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * nconv__core_in_spatial(c)));
    ref_nest(c, REF_BWD_D, dx, (double *)w, (double *)dy, taps);
}

void nconv__ref_bwd_w(const nconv_core *c, const double *x, const double *dy, double *dw, int64_t *taps) {
    memset(dw, 0, sizeof(double) * (size_t)(c->O * (c->C / c->G) * nconv__core_kernel_spatial(c)));
    ref_nest(c, REF_BWD_W, (double *)x, dw, (double *)dy, taps);
}
