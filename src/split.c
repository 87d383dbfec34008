/*
 * Memory-bounded execution: a core call whose algorithm would need more
 * workspace than the call's budget runs as sub-convolutions, first over runs
 * of images, then, when one image is still too large, over bands of rows
 * along the outermost spatial axis that has more than one (output rows for
 * fwd and bwd_w, input rows for bwd_d). Most of a large call's workspace is
 * its operands' channels-last copies, which shrink with the piece.
 *
 * A band is itself a convolution: the input rows its windows read, with
 * the padding that is left before them, and for bwd_d the output rows whose
 * windows reach the band (products landing outside it fall on the band's
 * end padding and are dropped: they belong to the next band). Bands keep
 * every real row real and every padded row padded, so they need zero
 * padding (the other modes read rows across the band's edge); bwd_d bands
 * need stride 1 along the axis (with a larger stride the first window
 * reaching a band may start inside it). dw is the sum of the pieces' dw:
 * the first piece writes it, each later one adds into it (igemm and
 * winograd, nconv_exec.accumulate) or writes a dense f32 copy that is
 * added; the lanes of db's sums, when the algorithm fills them, likewise.
 *
 * The split is chosen from the workspace at one thread, so it, and with it
 * every bit of the result, does not depend on the thread count; each more
 * thread adds its scratch (tens to hundreds of KiB) to the need, and a call
 * whose threads' scratch would break the context's memory limit runs on
 * fewer (execute.c). f32 in every direction, f16 and bf16 in forward and
 * backward-data.
 */
#include "internal.h"

#include <stdint.h>

static int64_t band_len(const nconv_core *c, nconv_direction dir, int a) {
    return dir == NCONV_DIR_BWD_D ? c->in[a] : c->out[a];
}

static int64_t bands(const nconv_core *c, nconv_direction dir, const nconv_split *s) {
    return s->axis < 0 ? 1 : nconv__div_up(band_len(c, dir, s->axis), s->rows);
}

int64_t nconv__split_pieces(const nconv_core *c, nconv_direction dir, const nconv_split *s) {
    return c->N == 0 ? 1 : nconv__div_up(c->N, s->nb) * bands(c, dir, s);
}

int nconv__split_piece(const nconv_core *c, nconv_direction dir, const nconv_split *s, int64_t i, nconv_piece *p) {
    const int64_t nbands = bands(c, dir, s), j = i % nbands;
    p->c = *c;
    p->n0 = i / nbands * s->nb;
    p->c.N = c->N - p->n0 < s->nb ? c->N - p->n0 : s->nb;
    p->x0 = p->y0 = 0;
    const int a = s->axis;
    if (a < 0) return 1;
    const int64_t len = band_len(c, dir, a), r0 = j * s->rows, r1 = r0 + s->rows < len ? r0 + s->rows : len;
    const int64_t pb = c->pb[a], reach = (c->k[a] - 1) * c->d[a];
    if (dir == NCONV_DIR_BWD_D) { /* stride 1: output o reads input rows o - pb .. o - pb + reach */
        const int64_t o0 = r0 + pb - reach > 0 ? r0 + pb - reach : 0;
        const int64_t o1 = r1 + pb < c->out[a] ? r1 + pb : c->out[a];
        if (o1 <= o0) return 0;
        p->c.in[a] = r1 - r0, p->c.out[a] = o1 - o0, p->c.pb[a] = r0 - (o0 - pb);
        p->x0 = r0, p->y0 = o0;
    } else {
        const int64_t i0 = r0 * c->s[a] - pb > 0 ? r0 * c->s[a] - pb : 0;
        const int64_t end = (r1 - 1) * c->s[a] - pb + reach + 1, i1 = end < c->in[a] ? end : c->in[a];
        if (i1 <= i0) return 0;
        p->c.in[a] = i1 - i0, p->c.out[a] = r1 - r0, p->c.pb[a] = i0 - (r0 * c->s[a] - pb);
        p->x0 = i0, p->y0 = r0;
    }
    return 1;
}

void nconv__piece_view(const nconv_view *v, int64_t n0, int64_t nn, int axis, int64_t r0, int64_t nr, nconv_view *out) {
    *out = *v;
    int64_t off = n0 * v->stride[0];
    out->shape[0] = nn;
    if (axis >= 0) off += r0 * v->stride[2 + axis], out->shape[2 + axis] = nr;
    out->data = (char *)v->data + off * (int64_t)nconv_dtype_size(v->dt);
}

/* Piece i of the first run of images (which holds the largest pieces), unless it has the shape
 * of the last one returned (*last; interior bands all have one shape): 1 new, 0 same, -1 empty. */
static int next_shape(const nconv_core *c, nconv_direction dir, const nconv_split *s, int64_t i, nconv_piece *p,
                      nconv_piece *last) {
    if (!nconv__split_piece(c, dir, s, i, p)) return -1;
    const int a = s->axis;
    if (i > 0 && a >= 0 && p->c.in[a] == last->c.in[a] && p->c.out[a] == last->c.out[a] && p->c.pb[a] == last->c.pb[a])
        return 0;
    *last = *p;
    return 1;
}

/* Over the shapes of the pieces: the largest workspace at `threads` of algorithm a (and of
 * those its declined runs go on to); SIZE_MAX if a piece is empty or a does not apply to it
 * (whole: the call itself, which reports that when it is planned). */
static size_t scan(const nconv_algo *a, const nconv_core *c, nconv_direction dir, const nconv_split *s, int threads,
                   unsigned copies) {
    const int whole = nconv__split_pieces(c, dir, s) == 1;
    size_t need = 0;
    nconv_piece p, last;
    for (int64_t i = 0; i < bands(c, dir, s); i++) {
        const int k = next_shape(c, dir, s, i, &p, &last);
        if (k < 0) return SIZE_MAX;
        if (k == 0) continue;
        if (!whole && !a->applies(&p.c, dir, NULL)) return SIZE_MAX;
        const size_t w = nconv__algo_need(a, &p.c, dir, threads, copies);
        if (w > need) need = w;
    }
    return need;
}

/* The largest piece's workspace, and for bwd_w in pieces db's lanes and, unless they add
 * into the first's, the dense dw the others write. */
size_t nconv__split_need(const nconv_algo *a, const nconv_core *c, nconv_direction dir, const nconv_split *s,
                         int threads, unsigned copies) {
    size_t need = scan(a, c, dir, s, threads, copies);
    const int acc = a->accumulates;
    if (need != SIZE_MAX && dir == NCONV_DIR_BWD_W && nconv__split_pieces(c, dir, s) > 1) {
        const size_t dw = sizeof(float) * (size_t)(c->O * (c->C / c->G) * nconv__core_kernel_spatial(c));
        need += nconv__ws_round(4 * sizeof(double) * (size_t)c->O);
        if (!acc) need += nconv__ws_round(dw);
    }
    return need;
}

/* Candidate t of split_choose: its need at one thread into *one (and *least where smaller),
 * and t into *s if it fits the budget; returns whether it does. */
static int try_split(const nconv_algo *a, const nconv_core *c, nconv_direction dir, unsigned copies, size_t budget,
                     const nconv_split *t, nconv_split *s, size_t *one, size_t *least) {
    *one = nconv__split_need(a, c, dir, t, 1, copies);
    if (*one < *least) *least = *one;
    if (*one > budget) return 0;
    *s = *t;
    return 1;
}

size_t nconv__split_choose(const nconv_algo *a, const nconv_core *c, nconv_direction dir, unsigned copies,
                           size_t budget, nconv_split *s, size_t *least) {
    *s = (nconv_split){c->N > 0 ? c->N : 1, -1, 0};
    size_t one = nconv__split_need(a, c, dir, s, 1, copies); /* of *s */
    const size_t whole = one;
    *least = one;
    /* f16 / bf16 in forward and backward-data only: their pieces write their own outputs, while
     * dw over pieces would be summed in an f32 copy, which ran slower than the whole call
     * (BENCHMARKS.md, design measurements) */
    const int splits = c->dt == NCONV_F32 || (nconv__is_16bit(c->dt) && dir != NCONV_DIR_BWD_W);
    int fits = !splits || c->N == 0 || one <= budget;
    /* Candidates from coarse to fine, the first that fits; none fits: whole (finer pieces
     * that still do not fit would only be slower). */
    for (int64_t nb = c->N; !fits && nb > 1;) {
        const nconv_split t = {nb = nconv__div_up(nb, 2), -1, 0};
        fits = try_split(a, c, dir, copies, budget, &t, s, &one, least);
    }
    int ax = 0;
    while (ax < 3 && band_len(c, dir, ax) <= 1) ax++;
    if (!fits && ax < 3 && c->mode == NCONV_PAD_ZEROS && (dir != NCONV_DIR_BWD_D || c->s[ax] == 1)) {
        const int64_t len = band_len(c, dir, ax);
        for (int64_t nbands = 2, rows = len; !fits && rows > 1; nbands *= 2) {
            const nconv_split t = {1, ax, rows = nconv__div_up(len, nbands)};
            fits = try_split(a, c, dir, copies, budget, &t, s, &one, least);
        }
    }
    if (!fits) return whole;
    *least = one;
    return one;
}
