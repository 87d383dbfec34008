/*
 * A path of algorithm "igemm": convolution on channel planes (NCHW f32,
 * f16 or bf16) with no layout conversion, for the shapes where the columns
 * of the GEMM can be output pixels:
 *   1x1 (stride 1, no padding), fwd and bwd_d:
 *     fwd:   y[o][p]  = sum_c w[o][c] * x[c][p]
 *     bwd_d: dx[c][p] = sum_o w[o][c] * dy[o][p]
 *   fwd with a short reduction (Cg * taps <= THIN_RED: input layers, raw
 *   audio), any stride, dilation, padding and padding mode:
 *     y[o][p] = sum_{c, t} w[o][c][t] * x[c][pix(p, t)]
 *   1x1 bwd_w (at the end of this file): dw[o][c] = sum_p dy[o][p] * x[c][p],
 *   a GEMM of transposed planes, or dot products of their rows where
 *   channels are few
 *   strided 1x1 kernels without padding (ResNet's downsampling shortcuts),
 *   each output pixel p reading input pixel off(p):
 *     fwd:   B picked from the planes through the unit's pixel offsets;
 *     bwd_d: the unit's rows summed apart, then spread over whole rows of dx
 *            with the zeros between (a transposed convolution's forward:
 *            act(bias) between, z declined);
 *     bwd_w: x's rows picked, then transposed as for 1x1.
 * Tile rows are output-side channels (A = the weights, packed [tile][k][6]
 * once per call), tile columns 16 pixels: B holds, per reduction row, the
 * 16 input values the pixels read (one line of an input plane for 1x1, a
 * gather otherwise: an im2col of the unit's pixels, cheap when the reduction
 * is short, from input rows copied once per output row and split by column
 * phase), computed by the packed 6 x 16 micro-kernel, which also starts
 * each row at its bias and applies relu (f32 1x1 layers with few rows read
 * B's lines where they lie instead: see IN_PLACE_ROWS). Going through NHWC instead costs
 * two transposes of the activations, more memory traffic than the GEMM
 * itself when channels are few or the output is much larger than the input.
 *
 * 16-bit operands are widened to f32 as they are packed (the weights, B's
 * plane runs, a gather's input rows, the transposes' rows) and outputs
 * narrowed from a unit's f32 rows once its reduction is done: f32
 * accumulation, no whole-tensor conversion.
 *
 * Threads split (image, group, run of 16-pixel tiles) units; each unit runs
 * the reduction in blocks, so every output is summed in one fixed order:
 * results do not depend on the thread count. With z, the tile is filled
 * with bias + alpha * z before the first block.
 */
#include "../internal.h"
#include "../kernels/kernels.h"

#include <string.h>

enum { MR = NCONV_MR, NR = NCONV_NR };
enum { K_BLOCK = 256 };        /* reduction rows per block */
enum { B_FLOATS = 32768 };     /* the packed B of a unit: 128 KiB, in L2 */
enum { MIN_PIXELS = 4 * NR }; /* fewer pixels per plane waste too many lanes: the NHWC path takes them */
enum { SPAN_SHORT_RED = K_BLOCK }; /* but units across images take those with reductions of one block (spans) */
enum { THIN_RED = 64 };        /* fwd reductions up to this length are gathered per unit */
enum { KGROUP = 8 };           /* 1x1: planes copied into B together (see run_task) */
enum { O_FLOATS = 65536 };     /* 16-bit outputs: a unit's f32 rows before narrowing, 256 KiB */
enum { MAX_TILES = 8 };        /* 16-pixel tiles per unit, at most (but see LONG_TILES) */
/* Where one block holds the whole reduction and a unit writes at least twice the rows it reads,
 * stores are the cost: a unit's row runs are made long (up to 2,048 pixels per plane), since many
 * short runs on as many planes each wrote slower than memory allows. Several blocks would sum
 * into a tile larger than L2. */
enum { LONG_TILES = 128 };
enum { L1_B_FLOATS = 8192 }; /* B read by every row tile in turn: 32 KiB, in L1 */
enum { PACK_TILES = 8 };      /* bwd_d's A tiles packed side by side */
enum { PICK_AHEAD = 4 };      /* planes between a pick's loads and its prefetches */
/* 1x1 f32 layers with few output-side channels on planes of 512 pixels or more read B's rows where
 * they lie (the indirect-B kernel, a row pointer per plane) instead of copying them into the
 * packed B first: with up to 8 row tiles reading B, the copy cost more than it saved. With 16-lane
 * kernels that holds up to 11 row tiles, and up to 43 over a reduction of at most 48 planes. With
 * more row tiles over longer reductions (or small planes), each reading every plane's run again,
 * the packed B's contiguous rows are faster (for the 8-lane kernel, which reads A twice as often
 * per product, from 9 row tiles on). */
enum { IN_PLACE_ROWS = 48, IN_PLACE_ROWS16 = 64, IN_PLACE_SHORT_RED = 48, IN_PLACE_SHORT_ROWS = 256 };
enum { IN_PLACE_PIXELS = 512 };
/* f32 outputs larger than the L3 a core shares (32 MiB) are written with non-temporal stores by
 * the 16-lane kernels: smaller ones are still there when the next call reads them, and streaming
 * would send them to memory; the 8-lane GEMM is slow enough that the reads for ownership overlap
 * it. */
#define PLANES_STREAM_BYTES ((size_t)32 << 20)

/* Rows of the GEMM (output-side channels per group) and its reduction:
 * fwd, (c, tap) pairs, taps fastest; bwd_d (1x1 only), output channels. */
static void dims(const nconv_core *c, nconv_direction dir, int64_t *rows, int64_t *red) {
    const int64_t Cg = c->C / c->G, Og = c->O / c->G;
    *rows = dir == NCONV_DIR_FWD ? Og : Cg;
    *red = dir == NCONV_DIR_FWD ? Cg * nconv__core_kernel_spatial(c) : Og;
}

static int is_1x1(const nconv_core *c) {
    for (int i = 0; i < 3; i++)
        if (c->k[i] != 1 || c->s[i] != 1 || c->pb[i] != 0 || c->out[i] != c->in[i]) return 0;
    return 1;
}

/* A strided 1x1 kernel with every output pixel inside x (no padding): B is picked element by
 * element through the unit's pixel offsets (picks_unit). */
static int picks(const nconv_core *c) {
    if (nconv__core_kernel_spatial(c) != 1 || is_1x1(c)) return 0;
    for (int i = 0; i < 3; i++)
        if (c->pb[i] != 0 || (c->out[i] - 1) * c->s[i] >= c->in[i]) return 0;
    return 1;
}

/* The offset in plane view x of output pixel p's input pixel (a pick's). */
static int64_t pixel_offset(const nconv_core *c, const nconv_view *x, int64_t p) {
    const int64_t ow = p % c->out[2], oh = (p / c->out[2]) % c->out[1], od = p / (c->out[2] * c->out[1]);
    return od * c->s[0] * x->stride[2] + oh * c->s[1] * x->stride[3] + ow * c->s[2] * x->stride[4];
}

/* bwd_d of a strided 1x1 kernel: a unit's rows are summed in the thread's f32 rows, then spread
 * over whole rows of dx with the zeros between (scatter_unit). */
static int scatters(const nconv_core *c, nconv_direction dir) { return dir == NCONV_DIR_BWD_D && picks(c); }

/* 1x1 layers on small planes whose pixels are not whole tiles: units may run across images
 * (span_unit), unless z is read or the output is streamed (planes_run); 16-bit ones where the
 * kernel narrows the outputs as it stores them (one reduction block). Planes of fewer than
 * MIN_PIXELS pixels do so only over short reductions: over longer ones (several blocks, each
 * adding to the unit's outputs again) the NHWC path stays faster. */
static int spans(const nconv_core *c, nconv_direction dir) {
    int64_t rows, red;
    dims(c, dir, &rows, &red);
    const int64_t P = nconv__core_out_spatial(c);
    return (c->dt == NCONV_F32 || (nconv__is_16bit(c->dt) && red <= K_BLOCK)) && is_1x1(c) && P % NR != 0 &&
           P > NR && P * (int64_t)sizeof(float) <= 4096 && (P >= MIN_PIXELS || red <= SPAN_SHORT_RED);
}

/* 16-pixel tiles per unit: its packed B fits B_FLOATS and, with 16-bit outputs, its f32 rows
 * (every output-side channel of the group) fit O_FLOATS. */
static int64_t unit_tiles(const nconv_core *c, nconv_direction dir) {
    int64_t rows, red;
    dims(c, dir, &rows, &red);
    const int64_t kb = red < K_BLOCK ? red : K_BLOCK;
    const int64_t cap = red <= K_BLOCK && rows >= 2 * red ? LONG_TILES : MAX_TILES;
    int64_t pt = B_FLOATS / (kb * NR);
    if (pt > cap) pt = cap;
    if ((c->dt != NCONV_F32 || scatters(c, dir)) && pt * NR * rows > O_FLOATS) pt = O_FLOATS / (NR * rows);
    /* a gather's unit of whole output rows when rows are whole tiles: every row segment then
     * fills its tiles, none is a short remnant paying a segment's setup for a tile or two */
    const int64_t row_tiles = c->out[2] / NR;
    if (!is_1x1(c) && c->out[2] % NR == 0 && pt >= row_tiles) pt -= pt % row_tiles;
    return pt < 1 ? 1 : pt;
}

/* 16-bit operands and scatters: floats of a unit's f32 rows (other f32 outputs are written in
 * place) and of a group of its B rows widened (1x1: [KGROUP][tiles * NR], one conversion per
 * plane run). */
static int64_t wide_floats(const nconv_core *c, nconv_direction dir) {
    int64_t rows, red;
    dims(c, dir, &rows, &red);
    return c->dt == NCONV_F32 && !scatters(c, dir) ? 0 : (rows + KGROUP) * unit_tiles(c, dir) * NR;
}

/* Bytes of the packed weights, [G][tiles][red][MR] (see pack_task). */
static size_t apack_bytes(const nconv_core *c, int64_t rows, int64_t red) {
    return sizeof(float) * (size_t)(c->G * nconv__div_up(rows, MR) * MR * red);
}

static int64_t row_floats(const nconv_core *c);
/* Per thread: the packed B panel, the gather's row scratch, the unit's f32 rows (16-bit outputs),
 * then the B rows of the current (image, group), or a pick's pixel offsets. */
static size_t scratch_bytes(const nconv_core *c, nconv_direction dir) {
    int64_t rows, red;
    dims(c, dir, &rows, &red);
    size_t tail = sizeof(const char *) * (size_t)red;
    if (picks(c) && tail < sizeof(int64_t) * (size_t)(unit_tiles(c, dir) * NR))
        tail = sizeof(int64_t) * (size_t)(unit_tiles(c, dir) * NR);
    return sizeof(float) * (size_t)(B_FLOATS + row_floats(c) + wide_floats(c, dir)) + tail;
}

static int64_t bw_block(const nconv_core *c);
static int64_t bw_chunks(const nconv_core *c);
static int dot_suits(const nconv_core *c);
static size_t dot_part_bytes(const nconv_core *c);

static int planes_shape(const nconv_core *c, nconv_direction dir) {
    /* f16 and bf16 are widened as the operands are packed and narrowed as outputs are stored */
    if (c->dt != NCONV_F32 && c->dt != NCONV_F16 && c->dt != NCONV_BF16) return 0;
    /* bwd_w reduces over pixels: small planes lose no lanes */
    if (dir == NCONV_DIR_BWD_W) return (is_1x1(c) || picks(c)) && bw_block(c) > 0;
    if (nconv__core_out_spatial(c) < MIN_PIXELS && !spans(c, dir)) return 0;
    if (is_1x1(c)) return 1;
    /* a scatter's units are whole output rows, at most a unit's tiles each */
    if (scatters(c, dir)) return c->out[2] <= unit_tiles(c, dir) * NR;
    return dir == NCONV_DIR_FWD && ((c->C / c->G) * nconv__core_kernel_spatial(c) <= THIN_RED || picks(c)) &&
           c->O / c->G >= NR;
}

static int planes_suit(const nconv_exec *e) {
    const nconv_dtype dt = e->c->dt;
    if (!planes_shape(e->c, e->dir) || e->w->dt != dt || e->x->dt != dt || e->y->dt != dt) return 0;
    if (!nconv__view_is_planar(e->x) || !nconv__view_is_planar(e->y)) return 0;
    return !e->epi || !e->epi->z || (e->epi->z->dt == dt && nconv__view_is_planar(e->epi->z));
}

static size_t bw_scratch_bytes(const nconv_core *c);

static size_t planes_workspace(const nconv_core *c, nconv_direction dir, int threads, unsigned copies) {
    (void)copies; /* the operands are read and written in place */
    if (dir == NCONV_DIR_BWD_W && dot_suits(c))
        return nconv__ws_round(sizeof(float) * (size_t)(c->O * (c->C / c->G))) + nconv__ws_round(dot_part_bytes(c));
    if (dir == NCONV_DIR_BWD_W) {
        const int64_t chunks = bw_chunks(c);
        return nconv__ws_round(sizeof(float) * (size_t)(chunks * c->O * (c->C / c->G))) +
               nconv__ws_round(sizeof(double) * (size_t)((chunks - 1) * 4 * c->O)) +
               (size_t)threads * nconv__ws_round(bw_scratch_bytes(c));
    }
    int64_t rows, red;
    dims(c, dir, &rows, &red);
    const size_t apack = apack_bytes(c, rows, red);
    const size_t init = sizeof(float) * (size_t)(c->G * rows);
    return nconv__ws_round(apack) + nconv__ws_round(init) +
           (size_t)threads * nconv__ws_round(scratch_bytes(c, dir));
}

typedef struct planes_ctx {
    const nconv_exec *e;
    const nconv_kernels *k;
    int64_t rows, red, tiles, P; /* P: output pixels per plane */
    int gather;     /* B by gather (im2col of a tile), else plane lines (1x1) */
    int picks;      /* fwd: the gather of a strided 1x1 kernel by pixel offsets (see picks) */
    int scatter;    /* bwd_d of a strided 1x1 kernel (see scatters) */
    int64_t upix;   /* output pixels per unit: pt tiles, or a scatter's whole rows within them */
    int64_t pt;     /* 16-pixel tiles per unit */
    int64_t blocks; /* units per plane */
    float *apack;      /* [G][tiles][red][MR] */
    const float *init; /* [G * rows]: the bias, or NULL */
    const nconv_view *src, *out, *z;
    double alpha;
    int relu;
    int stream;            /* NCONV_GEMM_STREAM on the last reduction block (PLANES_STREAM_BYTES) */
    int in_place;          /* 1x1: B's rows read from the planes by the indirect-B kernel (see IN_PLACE_ROWS) */
    int span;              /* units over the pixels of every image in turn (see span_unit) */
    nconv_convert16_fn cv; /* 16-bit operands: their conversion (NULL: f32) */
    char *scratch;         /* per thread, scratch_bytes(c, dir) rounded */
} planes_ctx;

/* n elements of v from offset off into dst, as f32 (cv: v's 16-bit conversion, NULL for f32). */
static void read_run(const nconv_view *v, nconv_convert16_fn cv, int64_t off, int64_t n, float *dst) {
    if (cv) cv(n, (const uint16_t *)v->data + off, dst, 1);
    else memcpy(dst, (const float *)v->data + off, sizeof(float) * (size_t)n);
}

/* apack[g][t][k][r] = A[t * MR + r][k] of group g (zero past the rows). */
static void pack_task(void *arg, int tid, int nthreads) {
    const planes_ctx *pc = arg;
    const nconv_exec *e = pc->e;
    const nconv_view *w = e->w;
    const nconv_core *c = e->c;
    const int fwd = e->dir == NCONV_DIR_FWD;
    const int64_t Og = c->O / c->G, KS = nconv__core_kernel_spatial(c);
    int64_t u0, u1;
    nconv__split(e->c->G * pc->tiles, tid, nthreads, &u0, &u1);
    if (!fwd && w->stride[1] == 1) {
        /* bwd_d (1x1), rows of w: each row's run for PACK_TILES tiles at a time, k inside, so
         * that the packed tiles are written as that many sequential streams (a tile at a time,
         * rows a channel apart were each fetched again for every tile; all tiles at once, the
         * stores to as many streams missed); 16-bit runs widened by one call first */
        const nconv_convert16_fn wcv = nconv__convert16(pc->k, w->dt);
        float wide[PACK_TILES * MR];
        for (int64_t u = u0; u < u1;) {
            const int64_t g = u / pc->tiles, tb = u % pc->tiles;
            int64_t te = pc->tiles < tb + (u1 - u) ? pc->tiles : tb + (u1 - u);
            te = te < tb + PACK_TILES ? te : tb + PACK_TILES;
            const int64_t row0 = tb * MR, row1 = te * MR < pc->rows ? te * MR : pc->rows;
            for (int64_t k = 0; k < pc->red; k++) {
                const int64_t at = (g * Og + k) * w->stride[0] + row0;
                const float *src = wcv ? wide : (const float *)w->data + at; /* row row0 */
                if (wcv) wcv(row1 - row0, (const uint16_t *)w->data + at, wide, 1);
                for (int64_t t = tb; t < te; t++) {
                    float *d = pc->apack + ((g * pc->tiles + t) * pc->red + k) * MR;
                    const int64_t nr = pc->rows - t * MR < MR ? pc->rows - t * MR : MR;
                    if (nr == MR) {
                        memcpy(d, src + (t - tb) * MR, sizeof(float) * MR);
                    } else {
                        memcpy(d, src + (t - tb) * MR, sizeof(float) * (size_t)nr);
                        memset(d + nr, 0, sizeof(float) * (size_t)(MR - nr));
                    }
                }
            }
            u += te - tb;
        }
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        const int64_t g = u / pc->tiles, t = u % pc->tiles;
        float *dst = pc->apack + u * pc->red * MR;
        const int64_t nr = pc->rows - t * MR < MR ? pc->rows - t * MR : MR;
        if (fwd && KS == 1 && w->stride[1] == 1) { /* fwd 1x1, rows of w: a tile is their transpose */
            if (nr < MR) memset(dst, 0, sizeof(float) * (size_t)(pc->red * MR));
            const int64_t s = (g * Og + t * MR) * w->stride[0];
            if (w->dt == NCONV_F32)
                pc->k->transpose(nr, pc->red, (const float *)w->data + s, w->stride[0], dst, MR);
            else nconv__transpose16(pc->k, w->dt)(nr, pc->red, (const uint16_t *)w->data + s, w->stride[0], dst, MR, 1);
            continue;
        }
        if (!fwd) { /* bwd_d (1x1): A[row][k] = w[g * Og + k][row], a tile's rows side by side in w */
            int64_t s = g * Og * w->stride[0] + t * MR * w->stride[1];
            for (int64_t k = 0; k < pc->red; k++, s += w->stride[0])
                for (int64_t r = 0; r < MR; r++)
                    dst[k * MR + r] = r < nr ? nconv__load_f32(w->data, w->dt, s + r * w->stride[1]) : 0.0f;
            continue;
        }
        if (KS == 1) { /* fwd 1x1: A[row][k] = w[g * Og + row][k] */
            for (int64_t r = 0; r < MR; r++) {
                const int64_t s = (g * Og + t * MR + (r < nr ? r : 0)) * w->stride[0];
                for (int64_t k = 0; k < pc->red; k++)
                    dst[k * MR + r] = r < nr ? nconv__load_f32(w->data, w->dt, s + k * w->stride[1]) : 0.0f;
            }
            continue;
        }
        for (int64_t r = 0; r < MR; r++) {
            const int64_t row = t * MR + r;
            if (row >= pc->rows) {
                for (int64_t k = 0; k < pc->red; k++) dst[k * MR + r] = 0.0f;
                continue;
            }
            /* fwd: w[g * Og + row][ci][t], k = ci * KS + t (nested loops: four divisions per
             * element made this packing half as long as the GEMM of a 1x1 layer) */
            const int64_t s = (g * Og + row) * w->stride[0];
            float *d = dst + r;
            for (int64_t ci = 0; ci < pc->red / KS; ci++)
                for (int64_t t0 = 0; t0 < c->k[0]; t0++)
                    for (int64_t t1 = 0; t1 < c->k[1]; t1++)
                        for (int64_t t2 = 0; t2 < c->k[2]; t2++, d += MR)
                            *d = nconv__load_f32(w->data, w->dt,
                                                 s + ci * w->stride[1] + t0 * w->stride[2] + t1 * w->stride[3] +
                                                     t2 * w->stride[4]);
        }
    }
}

/* Floats of a thread's row scratch for the gather: one padded input row of a whole output row's
 * reach, and its columns split by phase of the W stride (the phases one column apart each). */
static int64_t row_floats(const nconv_core *c) {
    const int64_t reach = (c->out[2] - 1) * c->s[2] + (c->k[2] - 1) * c->d[2] + 1;
    return 2 * (reach + c->s[2]);
}

/* even[i] = x[2 * i], odd[i] = x[2 * i + 1], i < n (three disjoint runs: the loop vectorizes). */
static void deinterleave2(int64_t n, const float *restrict x, float *restrict even, float *restrict odd) {
    for (int64_t i = 0; i < n; i++) {
        even[i] = x[2 * i];
        odd[i] = x[2 * i + 1];
    }
}

/* B rows k0 .. k0 + kc of the unit's output pixels [q0, q1), tiles of NR from q0:
 *   b[(p - q0) / NR][k - k0][(p - q0) % NR] = x[ci][pix(p, t)], k = ci * KS + t,
 * zero outside x (or the padding mode's element) and past q1. Along an output row, tap t's pixels
 * read one input row at stride s[2]: that row is copied once per (row segment, ci, t0, t1),
 * padded, and split into its column phases, so each tap's run of pixels is one contiguous copy
 * (an element-by-element gather cost several times the GEMM). xg is the offset of image n, group g
 * in x; cv widens 16-bit x (NULL: f32). */
static void gather_unit(const nconv_core *c, const nconv_view *x, nconv_convert16_fn cv, int64_t xg, int64_t q0,
                        int64_t q1, int64_t k0, int64_t kc, float *b, float *rowbuf) {
    const int64_t KS = nconv__core_kernel_spatial(c), KW = c->k[2], OW = c->out[2];
    const int64_t s = c->s[2], dl = c->d[2], IW = c->in[2];
    for (int64_t p = q0; p < q1;) { /* one output row segment [p, p + run) */
        const int64_t ow0 = p % OW, oh = (p / OW) % c->out[1], od = p / (OW * c->out[1]);
        const int64_t run = OW - ow0 < q1 - p ? OW - ow0 : q1 - p;
        const int64_t base = ow0 * s - c->pb[2], len = (run - 1) * s + (KW - 1) * dl + 1;
        const int64_t plen = nconv__div_up(len, s); /* floats per phase */
        for (int64_t kr = k0 / KW; kr * KW < k0 + kc; kr++) { /* (ci, t0, t1) */
            const int64_t ci = kr / (KS / KW), tr = kr % (KS / KW), t1 = tr % c->k[1], t0 = tr / c->k[1];
            const int64_t id = nconv__map_index(od * c->s[0] - c->pb[0] + t0 * c->d[0], c->in[0], c->mode);
            const int64_t ih = nconv__map_index(oh * c->s[1] - c->pb[1] + t1 * c->d[1], c->in[1], c->mode);
            const float *ph = rowbuf;
            if (id >= 0 && ih >= 0) {
                const int64_t row = xg + ci * x->stride[1] + id * x->stride[2] + ih * x->stride[3];
                /* columns [lo, hi) lie in x; the others are padding */
                const int64_t lo = base >= 0 ? 0 : -base < len ? -base : len;
                const int64_t hi = IW - base < lo ? lo : IW - base < len ? IW - base : len;
                if (s == 2 && !cv) {
                    /* f32 at stride 2: the two phases read straight from x (no copy of the row
                     * first); the columns outside [a, e), the padding and a column left over at
                     * an odd edge, one by one */
                    const float *xr = (const float *)x->data + row + base;
                    /* the next output row's source row: the hardware prefetcher does not follow
                     * a segment's many rows (the loads below waited on memory) */
                    if (ih + c->s[1] < c->in[1])
                        for (int64_t j = lo; j < hi; j += 16) __builtin_prefetch(xr + c->s[1] * x->stride[3] + j);
                    const int64_t a = lo + (lo & 1), n2 = hi > a ? (hi - a) / 2 : 0, e = a + 2 * n2;
                    deinterleave2(n2, xr + a, rowbuf + a / 2, rowbuf + plen + a / 2);
                    for (int64_t j = a > 0 ? 0 : e; j < len; j = j + 1 == a ? e : j + 1) {
                        const int64_t m = j >= lo && j < hi ? base + j : nconv__map_index(base + j, IW, c->mode);
                        rowbuf[(j % 2) * plen + j / 2] = m < 0 ? 0.0f : ((const float *)x->data)[row + m];
                    }
                } else {
                    float *xp = s == 1 ? rowbuf : rowbuf + s * plen; /* xp[j]: column base + j */
                    if (hi > lo) read_run(x, cv, row + base + lo, hi - lo, xp + lo);
                    for (int64_t j = lo > 0 ? 0 : hi; j < len; j = j + 1 == lo ? hi : j + 1) {
                        const int64_t m = nconv__map_index(base + j, IW, c->mode);
                        xp[j] = m < 0 ? 0.0f : nconv__load_f32(x->data, x->dt, row + m);
                    }
                    if (s == 2) {
                        deinterleave2(len / 2, xp, rowbuf, rowbuf + plen);
                        if (len % 2) rowbuf[len / 2] = xp[len - 1];
                    } else if (s > 2) {
                        for (int64_t f = 0; f < s; f++)
                            for (int64_t i = 0; i * s + f < len; i++) rowbuf[f * plen + i] = xp[i * s + f];
                    }
                }
            }
            for (int64_t t2 = 0; t2 < KW; t2++) {
                const int64_t k = kr * KW + t2;
                if (k < k0 || k >= k0 + kc) continue;
                const float *src = ph + ((t2 * dl) % s) * plen + (t2 * dl) / s;
                for (int64_t j = 0; j < run;) { /* pieces within one tile */
                    const int64_t at = p - q0 + j, piece = NR - at % NR < run - j ? NR - at % NR : run - j;
                    float *d = b + (at / NR * kc + (k - k0)) * NR + at % NR;
                    /* (a fixed size where it can be: a variable one became `rep movs`, slow for 64 bytes) */
                    if (id < 0 || ih < 0)
                        memset(d, 0, sizeof(float) * (size_t)piece);
                    else if (piece == NR)
                        memcpy(d, src + j, sizeof(float) * NR);
                    else
                        for (int64_t q = 0; q < piece; q++) d[q] = src[j + q];
                    j += piece;
                }
            }
        }
        p += run;
    }
    const int64_t tail = (q1 - q0) % NR; /* the last tile's columns past q1 */
    if (tail)
        for (int64_t k = 0; k < kc; k++)
            memset(b + ((q1 - q0) / NR * kc + k) * NR + tail, 0, sizeof(float) * (size_t)(NR - tail));
}

/* B rows k0 .. k0 + kc of the unit's output pixels [q0, q1) of a strided 1x1 kernel (see picks):
 * b[(p - q0) / NR][k - k0][(p - q0) % NR] = x[k][off[p - q0]], zero past q1. Plane by plane, each
 * read once in order; the row copies of gather_unit, at one column per phase used, cost more than
 * the GEMM's share here (reductions are long). */
static void picks_unit(const nconv_view *x, int64_t xg, const int64_t *off, int64_t q0, int64_t q1, int64_t k0,
                       int64_t kc, float *b) {
    const int64_t n = q1 - q0, full = n / NR * NR;
    for (int64_t k = k0; k < k0 + kc; k++) {
        const int64_t plane = xg + k * x->stride[1];
        float *d = b + (k - k0) * NR;
        if (x->dt == NCONV_F32) {
            const float *xp = (const float *)x->data + plane;
            /* a plane further on: the hardware prefetcher does not follow one stream per plane (the
             * loads below waited on memory); at stride 2 eight pixels of a row share a line */
            if (k + PICK_AHEAD < k0 + kc)
                for (int64_t q = 0; q < n; q += 8) __builtin_prefetch(xp + PICK_AHEAD * x->stride[1] + off[q]);
            for (int64_t j = 0; j < full; j += NR, d += kc * NR)
                for (int64_t q = 0; q < NR; q++) d[q] = xp[off[j + q]];
        } else {
            for (int64_t j = 0; j < full; j += NR, d += kc * NR)
                for (int64_t q = 0; q < NR; q++) d[q] = nconv__load_f32(x->data, x->dt, plane + off[j + q]);
        }
        for (int64_t q = full; q < n; q++) d[q - full] = nconv__load_f32(x->data, x->dt, plane + off[q]);
        for (int64_t q = n; q < full + (n > full ? NR : 0); q++) d[q - full] = 0.0f;
    }
}

/* dx of a scatter (see scatters) from the unit's rows o (rows of ldc floats from pixel q0) for
 * output pixels [q0, q1), whole output rows: every row of dx whose pixels are nearest (at or
 * after) to one of those output rows' pixels, from its first pixel in each dimension: the
 * input row of each output row with its values every s[2] columns and the gap's value between,
 * the other rows that value. The gap is zero, or with an epilogue (a transposed convolution's
 * forward) act(bias): init (the rows' bias, or NULL) with relu. Units partition dx: each element
 * is written once, in order. og: the offset of (image, group) in dx; rowbuf holds a row (at
 * least IW floats) for 16-bit dx (cv). */
static void scatter_unit(const nconv_core *c, const nconv_view *dx, nconv_convert16_fn cv, int64_t og, int64_t rows,
                         const float *init, int relu, const float *o, int64_t ldc, int64_t q0, int64_t q1,
                         float *rowbuf) {
    const int64_t OW = c->out[2], OH = c->out[1], OD = c->out[0], IW = c->in[2];
    const size_t esz = nconv_dtype_size(dx->dt);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t plane = og + r * dx->stride[1];
        const float gap = !init || (relu && init[r] < 0) ? 0.0f : init[r]; /* max(0, NaN) is NaN */
        for (int64_t R = q0 / OW; R < q1 / OW; R++) {
            const int64_t oh = R % OH, od = R / OH;
            const float *v = o + r * ldc + R * OW - q0;
            const int64_t d1 = od + 1 == OD ? c->in[0] : (od + 1) * c->s[0];
            const int64_t h1 = oh + 1 == OH ? c->in[1] : (oh + 1) * c->s[1];
            for (int64_t id = od * c->s[0]; id < d1; id++)
                for (int64_t ih = oh * c->s[1]; ih < h1; ih++) {
                    const int64_t at = plane + id * dx->stride[2] + ih * dx->stride[3];
                    char *dst = (char *)dx->data + esz * (size_t)at;
                    const int values = id == od * c->s[0] && ih == oh * c->s[1];
                    if (!values && !init) {
                        memset(dst, 0, esz * (size_t)IW);
                        continue;
                    }
                    float *row = cv ? rowbuf : (float *)dst;
                    for (int64_t iw = 0; iw < IW; iw++) row[iw] = gap;
                    for (int64_t ow = 0; values && ow < OW; ow++) row[ow * c->s[2]] = v[ow];
                    if (cv) cv(IW, rowbuf, (uint16_t *)dst, 0);
                }
        }
    }
}

/* A spanning unit (pc->span): 1x1 on small planes whose pixels are not whole tiles. The unit
 * runs over pixels [q0, q1) of group g in the order of all images' planes one after another
 * (q = n * P + p), so that only the batch's last tile is part-filled (a 7 x 7 plane filled 49 of
 * 64 lanes on its own, a 14 x 14 one 196 of 208). B's tiles are packed from one image's planes or
 * from two (P >= NR: never more; 16-bit planes widened a run per image into wide first); the GEMM
 * writes runs of tiles inside one image in place (16-bit ones narrowed by the kernel), and a tile
 * across images through tb, whose columns are then written (or narrowed) to both images, and
 * read back from them before a later reduction block adds to them (f32 only: 16-bit spans are one
 * block). The sums are those of the per-image units, bit for bit. */
static void span_unit(const planes_ctx *pc, int64_t g, int64_t q0, int64_t q1, float *bpack, float *wide) {
    const nconv_core *c = pc->e->c;
    const nconv_view *src = pc->src, *out = pc->out;
    const int64_t P = pc->P, ldc = out->stride[1];
    const int64_t sg = g * (pc->e->dir == NCONV_DIR_FWD ? c->C / c->G : c->O / c->G) * src->stride[1];
    const int64_t og = g * pc->rows * ldc;
    const float *x = pc->cv ? NULL : (const float *)src->data + sg;
    float *y = pc->cv ? NULL : (float *)out->data + og;
    uint16_t *y16 = pc->cv ? (uint16_t *)out->data + og : NULL;
    const int flags16 = c->dt == NCONV_BF16 ? NCONV_GEMM_BF16 : 0;
    const int64_t np = nconv__div_up(q1 - q0, NR), nc_last = q1 - q0 - (np - 1) * NR;
    /* tile j: image img[j], its first pixel px[j] there, and of its width the part len[j] in it
     * (the rest, if any, from pixel 0 of image img[j] + 1) */
    int64_t img[LONG_TILES], px[LONG_TILES], len[LONG_TILES], wid[LONG_TILES];
    for (int64_t j = 0; j < np; j++) {
        const int64_t q = q0 + j * NR;
        img[j] = q / P, px[j] = q % P, wid[j] = j + 1 < np ? NR : nc_last;
        len[j] = wid[j] < P - px[j] ? wid[j] : P - px[j];
    }
    for (int64_t k0 = 0; k0 < pc->red; k0 += K_BLOCK) {
        const int64_t kc = pc->red - k0 < K_BLOCK ? pc->red - k0 : K_BLOCK;
        /* tile j's run of plane k at bpack[j][k], a group of planes at a time (as run_task) */
        for (int64_t kg = 0; kg < kc; kg += KGROUP) {
            const int64_t ke = kc - kg < KGROUP ? kc : kg + KGROUP;
            for (int64_t k = kg; pc->cv && k < ke; k++) /* plane k's pixels of the unit, widened */
                for (int64_t q = q0, n; q < q1; q = (n + 1) * P) {
                    n = q / P;
                    const int64_t end = (n + 1) * P < q1 ? (n + 1) * P : q1;
                    const uint16_t *plane = (const uint16_t *)src->data + n * src->stride[0] + sg;
                    pc->cv(end - q, plane + (k0 + k) * src->stride[1] + q % P, wide + (k - kg) * pc->pt * NR + (q - q0),
                           1);
                }
            for (int64_t j = 0; j < np; j++) {
                const float *b = pc->cv ? NULL : x + img[j] * src->stride[0] + px[j];
                for (int64_t k = kg; k < ke; k++) {
                    float *d = bpack + (j * kc + k) * NR;
                    if (pc->cv && wid[j] == NR) {
                        memcpy(d, wide + (k - kg) * pc->pt * NR + j * NR, sizeof(float) * NR);
                        continue;
                    }
                    if (pc->cv) {
                        memcpy(d, wide + (k - kg) * pc->pt * NR + j * NR, sizeof(float) * (size_t)wid[j]);
                        memset(d + wid[j], 0, sizeof(float) * (size_t)(NR - wid[j]));
                        continue;
                    }
                    const float *bk = b + (k0 + k) * src->stride[1];
                    if (len[j] == NR) {
                        memcpy(d, bk, sizeof(float) * NR);
                        continue;
                    }
                    memcpy(d, bk, sizeof(float) * (size_t)len[j]);
                    memcpy(d + len[j], bk + src->stride[0] - px[j], sizeof(float) * (size_t)(wid[j] - len[j]));
                    memset(d + wid[j], 0, sizeof(float) * (size_t)(NR - wid[j]));
                }
            }
        }
        const int last = k0 + kc == pc->red;
        const int flags = (k0 > 0 ? NCONV_GEMM_ACCUMULATE : 0) | (pc->relu && last ? NCONV_GEMM_RELU : 0);
        int64_t chunk = np; /* as run_task: B's tiles in L1 while every row tile reads them */
        if (pc->k->dw_vl >= 16 && kc * NR * np > 2 * L1_B_FLOATS) {
            chunk = L1_B_FLOATS / (kc * NR);
            chunk = chunk < 2 ? 2 : chunk;
        }
        for (int64_t j0 = 0; j0 < np; j0 += chunk) {
            const int64_t j1 = np - j0 < chunk ? np : j0 + chunk;
            for (int64_t t = 0; t < pc->tiles; t++) {
                const int64_t mr = pc->rows - t * MR < MR ? pc->rows - t * MR : MR;
                const float *a = pc->apack + ((g * pc->tiles + t) * pc->red + k0) * MR;
                const float *rinit = pc->init ? pc->init + g * pc->rows + t * MR : NULL;
                /* the tile's rows in image n at pixel p, f32 or 16-bit */
#define SPAN_AT(base, n, p) ((base) + t * MR * ldc + (n) * out->stride[0] + (p))
                for (int64_t j = j0, je; j < j1; j = je) {
                    if (len[j] == wid[j]) { /* tiles j .. je - 1 inside one image: in place */
                        for (je = j + 1; je < j1 && img[je] == img[j] && len[je] == wid[je];) je++;
                        const float *bj = bpack + j * kc * NR;
                        if (pc->cv)
                            pc->k->gemm_np16(mr, je - j, wid[je - 1], kc, a, MR, bj, kc * NR,
                                             SPAN_AT(y16, img[j], px[j]), ldc, rinit, flags | flags16);
                        else
                            pc->k->gemm_np(mr, je - j, wid[je - 1], kc, a, MR, bj, kc * NR, SPAN_AT(y, img[j], px[j]),
                                           ldc, rinit, flags);
                        continue;
                    }
                    /* a tile across images: its columns through tb, all of it set (the 16-bit
                     * narrowing reads whole rows) */
                    je = j + 1;
                    float tb[MR * NR] = {0};
                    const int64_t n = img[j], l0 = len[j], l1 = wid[j] - len[j];
                    for (int64_t r = 0; r < mr && k0 > 0; r++) {
                        memcpy(tb + r * NR, SPAN_AT(y, n, px[j]) + r * ldc, sizeof(float) * (size_t)l0);
                        memcpy(tb + r * NR + l0, SPAN_AT(y, n + 1, 0) + r * ldc, sizeof(float) * (size_t)l1);
                    }
                    pc->k->gemm_np(mr, 1, wid[j], kc, a, MR, bpack + j * kc * NR, kc * NR, tb, NR, rinit, flags);
                    uint16_t tb16[MR * NR]; /* 16-bit: the tile narrowed at once, then its pieces moved */
                    if (pc->cv) pc->cv(mr * NR, tb, tb16, 0);
                    for (int64_t r = 0; r < mr; r++)
                        if (pc->cv) {
                            memcpy(SPAN_AT(y16, n, px[j]) + r * ldc, tb16 + r * NR, sizeof(uint16_t) * (size_t)l0);
                            memcpy(SPAN_AT(y16, n + 1, 0) + r * ldc, tb16 + r * NR + l0, sizeof(uint16_t) * (size_t)l1);
                        } else {
                            memcpy(SPAN_AT(y, n, px[j]) + r * ldc, tb + r * NR, sizeof(float) * (size_t)l0);
                            memcpy(SPAN_AT(y, n + 1, 0) + r * ldc, tb + r * NR + l0, sizeof(float) * (size_t)l1);
                        }
                }
#undef SPAN_AT
            }
        }
    }
}

/* A unit is pt tiles of 16 pixels of one (image, group) (or, spanning, see span_unit). Planes lie pages
 * apart, so each row tile writes its rows for all pt tiles in turn, and B
 * is copied for all of them at once: both touch each page once per unit
 * rather than once per tile (planes smaller than a page may run long
 * reductions a chunk of tiles at a time: see the GEMM below). */
static void run_task(void *arg, int tid, int nthreads) {
    const planes_ctx *pc = arg;
    const nconv_core *c = pc->e->c;
    const nconv_view *src = pc->src, *out = pc->out, *z = pc->z;
    char *scratch = pc->scratch + (size_t)tid * nconv__ws_round(scratch_bytes(c, pc->e->dir));
    float *bpack = (float *)scratch; /* [tile][k][NR], 64-byte aligned: the arena rounds */
    float *rowbuf = bpack + B_FLOATS;
    float *wide = rowbuf + row_floats(c);      /* 16-bit: B rows widened, [KGROUP][pt * NR] */
    float *obuf = wide + KGROUP * pc->pt * NR; /* 16-bit or a scatter: the unit's rows, [rows][pt * NR] */
    const char **brows = (const char **)(wide + wide_floats(c, pc->e->dir));
    const float **frows = (const float **)brows; /* B's rows where they lie in place of brows (f32) */
    int64_t *off = (int64_t *)brows; /* a pick's pixel offsets instead */
    const nconv_convert16_fn cv = pc->cv;
    const size_t esz = nconv_dtype_size(c->dt);
    const int64_t plane_bytes = (int64_t)esz * src->stride[1]; /* from one channel's plane to the next */
    /* f32 rows are written in place; 16-bit ones narrowed by the kernel as it stores them when
     * the reduction is one call's (and no z is read first), else summed in obuf, from its column
     * 0, then narrowed */
    const int direct16 = cv && !z && pc->red <= K_BLOCK && !pc->scatter;
    const int in_obuf = pc->scatter || (cv && !direct16);
    const int flags16 = c->dt == NCONV_BF16 ? NCONV_GEMM_BF16 : 0;
    const int64_t ldc = in_obuf ? pc->pt * NR : out->stride[1];
    const int64_t src_group = pc->e->dir == NCONV_DIR_FWD ? c->C / c->G : c->O / c->G; /* channels of src per group */
    if (pc->span) { /* a thread's run of (group, image) pairs, each group's images one span cut into
                     * units of pt tiles: threads write no cache line in common. With fewer pairs
                     * than threads, a run of (group, tile) pairs: threads share the lines where
                     * their runs meet. */
        const int64_t pixels = c->N * pc->P, step = c->N * c->G >= nthreads ? pc->P : NR;
        const int64_t per = nconv__div_up(pixels, step); /* images or tiles of a group */
        int64_t u0, u1;
        nconv__split(c->G * per, tid, nthreads, &u0, &u1);
        for (int64_t u = u0; u < u1;) {
            const int64_t g = u / per, s0 = u % per, s1 = per - s0 < u1 - u ? per : s0 + (u1 - u);
            const int64_t q1 = s1 * step < pixels ? s1 * step : pixels;
            for (int64_t q = s0 * step; q < q1; q += pc->pt * NR)
                span_unit(pc, g, q, q + pc->pt * NR < q1 ? q + pc->pt * NR : q1, bpack, wide);
            u += s1 - s0;
        }
        return;
    }
    int64_t u0, u1;
    nconv__split(c->N * c->G * pc->blocks, tid, nthreads, &u0, &u1);
    int64_t cur = -1; /* the (image, group) brows hold */
    for (int64_t u = u0; u < u1; u++) {
        const int64_t ng = u / pc->blocks, n = ng / c->G, g = ng % c->G;
        const int64_t q0 = (u % pc->blocks) * pc->upix, q1 = q0 + pc->upix < pc->P ? q0 + pc->upix : pc->P;
        const int64_t sg = n * src->stride[0] + g * src_group * src->stride[1];
        if (!pc->gather && ng != cur) {
            for (int64_t k = 0; k < pc->red; k++)
                if (pc->in_place) frows[k] = (const float *)src->data + sg + k * src->stride[1];
                else brows[k] = (const char *)src->data + esz * (size_t)(sg + k * src->stride[1]);
            cur = ng;
        }
        for (int64_t q = q0; pc->picks && q < q1; q++) off[q - q0] = pixel_offset(c, src, q);
        const int64_t og = n * out->stride[0] + g * pc->rows * out->stride[1];
        /* o[r * ldc + q - q0]: pixel q of row r (of the output itself when 16-bit rows are narrowed
         * by the kernel) */
        float *o = in_obuf ? obuf : cv ? NULL : (float *)out->data + og + q0;
        /* z goes in before the GEMM (with the bias); a bias alone starts the rows in the kernel */
        if (z)
            for (int64_t r = 0; r < pc->rows; r++) {
                const float b = pc->init ? pc->init[g * pc->rows + r] : 0.0f;
                float *orow = o + r * ldc;
                if (z) read_run(z, cv, n * z->stride[0] + (g * pc->rows + r) * z->stride[1] + q0, q1 - q0, orow);
                for (int64_t q = 0; q < q1 - q0; q++) orow[q] = b + (z ? (float)pc->alpha * orow[q] : 0.0f);
            }
        for (int64_t k0 = 0; k0 < pc->red; k0 += K_BLOCK) {
            const int64_t kc = pc->red - k0 < K_BLOCK ? pc->red - k0 : K_BLOCK;
            if (pc->picks) picks_unit(src, sg, off, q0, q1, k0, kc, bpack);
            else if (pc->gather) gather_unit(c, src, cv, sg, q0, q1, k0, kc, bpack, rowbuf);
            /* Planes in groups of KGROUP: each tile's rows of the group are one contiguous run
             * of bpack (a k at a time, the stores would go to every tile, 16 KiB apart). */
            for (int64_t kg = 0; kg < kc && !pc->gather && !pc->in_place; kg += KGROUP) {
                const int64_t ke = kc - kg < KGROUP ? kc : kg + KGROUP;
                /* 16-bit planes are widened a run per plane first (a call per 16 values cost
                 * more than the copy). */
                for (int64_t k = kg; cv && k < ke; k++)
                    cv(q1 - q0, (const uint16_t *)brows[k0 + k] + q0, wide + (k - kg) * pc->pt * NR, 1);
                /* Each k is another plane: on planes larger than a page, too many streams for the
                 * hardware prefetcher (the misses were most of this copy, itself as long as the
                 * GEMM of a 1x1 layer), so the next group's runs are fetched ahead. Runs of
                 * smaller planes lie a page or less apart, which it follows: there the burst of
                 * prefetches stalled the copy. */
                for (int64_t p0 = q0; p0 < q1; p0 += NR)
                    for (int64_t k = kg; k < ke; k++) {
                        const float *b =
                            cv ? wide + (k - kg) * pc->pt * NR + (p0 - q0) : (const float *)brows[k0 + k] + p0;
                        if (p0 == q0 && k + KGROUP < kc && plane_bytes > 4096) /* the next group's planes */
                            for (int64_t p = q0; p < q1; p += 64 / (int64_t)esz)
                                __builtin_prefetch(brows[k0 + k + KGROUP] + esz * (size_t)p);
                        float *d = bpack + ((p0 - q0) / NR * kc + k) * NR;
                        if (q1 - p0 >= NR) {
                            memcpy(d, b, sizeof(float) * NR);
                        } else {
                            memcpy(d, b, sizeof(float) * (size_t)(q1 - p0));
                            memset(d + (q1 - p0), 0, sizeof(float) * (size_t)(NR - (q1 - p0)));
                        }
                    }
            }
            const int last = k0 + kc == pc->red;
            const int flags = (z || k0 > 0 ? NCONV_GEMM_ACCUMULATE : 0) | (pc->relu && last ? NCONV_GEMM_RELU : 0) |
                              (pc->stream && last ? NCONV_GEMM_STREAM : 0);
            /* Every pixel tile of the unit in one call (the kernel takes them in pairs, which share
             * A's loads): with short reductions (raw audio: 10) the call was the cost. With 16-lane
             * vectors, long ones on planes smaller than a page run the row tiles over a chunk of
             * pixel tiles at a time, whose B stays in L1 while every row tile reads it (the B of a
             * whole unit was read from L2 once per row tile); larger planes keep whole rows per
             * call (see above), and 8-lane kernels, which read A twice as often per product, lost
             * more to reading it from L2 than they gained on B. */
            const int64_t np = nconv__div_up(q1 - q0, NR), nc_last = q1 - q0 - (np - 1) * NR;
            int64_t chunk = np;
            if (pc->k->dw_vl >= 16 && kc * NR * np > 2 * L1_B_FLOATS && pc->P * (int64_t)sizeof(float) <= 4096) {
                chunk = L1_B_FLOATS / (kc * NR);
                chunk = chunk < 2 ? 2 : chunk;
            }
            for (int64_t j0 = 0; j0 < np; j0 += chunk) {
                const int64_t nj = np - j0 < chunk ? np - j0 : chunk, ncl = j0 + nj == np ? nc_last : NR;
                const float *bj = bpack + j0 * kc * NR;
                for (int64_t t = 0; t < pc->tiles; t++) {
                    const int64_t mr = pc->rows - t * MR < MR ? pc->rows - t * MR : MR;
                    const float *a = pc->apack + ((g * pc->tiles + t) * pc->red + k0) * MR;
                    const float *rinit = pc->init ? pc->init + g * pc->rows + t * MR : NULL;
                    /* The first row tile reads B's rows from memory, so the kernel fetches ahead
                     * along them where they are more than 16 (fewer, the hardware prefetcher
                     * follows); the later tiles find them in cache, where fetches only cost. */
                    if (pc->in_place)
                        pc->k->gemm_ib_np(mr, nj, ncl, kc, a, MR, frows + k0, q0 + j0 * NR, NR,
                                          o + t * MR * ldc + j0 * NR, ldc, rinit,
                                          (flags & NCONV_GEMM_ACCUMULATE) |
                                              (t == 0 && kc > 16 ? NCONV_GEMM_FETCH_B : 0));
                    else if (direct16)
                        pc->k->gemm_np16(mr, nj, ncl, kc, a, MR, bj, kc * NR,
                                         (uint16_t *)out->data + og + t * MR * ldc + q0 + j0 * NR, ldc, rinit,
                                         flags | flags16);
                    else
                        pc->k->gemm_np(mr, nj, ncl, kc, a, MR, bj, kc * NR, o + t * MR * ldc + j0 * NR, ldc, rinit,
                                       flags);
                }
            }
        }
        for (int64_t r = 0; pc->in_place && pc->relu && r < pc->rows; r++)
            for (int64_t q = 0; q < q1 - q0; q++) o[r * ldc + q] = o[r * ldc + q] < 0 ? 0.0f : o[r * ldc + q];
        if (pc->scatter)
            scatter_unit(c, out, cv, og, pc->rows, pc->init ? pc->init + g * pc->rows : NULL, pc->relu, obuf, ldc,
                         q0, q1, rowbuf);
        else
            for (int64_t r = 0; cv && !direct16 && r < pc->rows; r++)
                cv(q1 - q0, obuf + r * ldc, (uint16_t *)out->data + og + r * out->stride[1] + q0, 0);
    }
    if (pc->stream) nconv__stream_fence();
}

static nconv_status planes_bwd_w(const nconv_exec *e);

static nconv_status planes_run(const nconv_exec *e) {
    if (!planes_suit(e)) return (nconv_status)NCONV__DECLINE_LAYOUT;
    /* a scatter's z (a transposed convolution's forward) lies in dx, not in the unit's rows */
    if (scatters(e->c, e->dir) && e->epi && e->epi->z) return (nconv_status)NCONV__DECLINE_OWN;
    if (e->dir == NCONV_DIR_BWD_W) return planes_bwd_w(e);
    const nconv_core *c = e->c;
    planes_ctx pc;
    memset(&pc, 0, sizeof pc);
    pc.e = e;
    pc.k = e->k;
    dims(c, e->dir, &pc.rows, &pc.red);
    pc.tiles = nconv__div_up(pc.rows, MR);
    pc.P = nconv__core_out_spatial(c);
    pc.scatter = scatters(c, e->dir);
    pc.gather = !is_1x1(c) && !pc.scatter;
    pc.picks = picks(c) && e->dir == NCONV_DIR_FWD;
    pc.pt = unit_tiles(c, e->dir);
    pc.upix = pc.scatter ? pc.pt * NR / c->out[2] * c->out[2] : pc.pt * NR;
    pc.blocks = nconv__div_up(pc.P, pc.upix);
    pc.cv = nconv__convert16(e->k, c->dt);
    const int threads = e->threads;
    pc.apack = e->packed ? (float *)e->packed : nconv__arena_take(e->ws, apack_bytes(c, pc.rows, pc.red));
    float *init = nconv__arena_take(e->ws, sizeof(float) * (size_t)(c->G * pc.rows));
    pc.scratch = nconv__arena_take(e->ws, (size_t)threads * nconv__ws_round(scratch_bytes(c, e->dir)));
    if (!pc.apack || !init || !pc.scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    const int fwd = e->dir == NCONV_DIR_FWD;
    pc.src = fwd ? e->x : e->y;
    pc.out = fwd ? e->y : e->x;
    if (e->epi) {
        if (e->epi->bias) {
            nconv__epi_init(e->epi, init, c->G * pc.rows);
            pc.init = init;
        }
        pc.z = e->epi->z;
        pc.alpha = e->epi->alpha;
        pc.relu = e->epi->relu;
    }
    const int64_t out_numel = nconv__core_output_numel(nconv__exec_whole(e), e->dir);
    pc.stream = !pc.cv && !pc.scatter && e->k->dw_vl >= 16 && sizeof(float) * (size_t)out_numel >= PLANES_STREAM_BYTES;
    if (pc.stream && e->path) *e->path = "streamed stores";
    const int vl16 = e->k->dw_vl >= 16;
    pc.in_place = is_1x1(c) && !pc.cv && !pc.stream && pc.P >= IN_PLACE_PIXELS &&
                  (pc.rows <= (vl16 ? IN_PLACE_ROWS16 : IN_PLACE_ROWS) ||
                   (vl16 && pc.red <= IN_PLACE_SHORT_RED && pc.rows <= IN_PLACE_SHORT_ROWS));
    if (pc.in_place && e->path) *e->path = "B in place";
    pc.span = spans(c, e->dir) && !pc.z && !pc.stream && !pc.in_place;
    if (pc.P < MIN_PIXELS && !pc.span) return (nconv_status)NCONV__DECLINE_OWN; /* planes_shape let it in to span */
    if (pc.span && e->path) *e->path = "units across images";
    if (!e->packed) nconv__parallel(e, pack_task, &pc);
    nconv__parallel(e, run_task, &pc);
    return NCONV_OK;
}

/* Prepacked weights (fwd, bwd_d): A as pack_task makes it, [G][tiles][red][MR], which depends on
 * the channels, groups and kernel alone. */
static size_t planes_pack_size(const nconv_core *c, nconv_direction dir, int threads, size_t *scratch) {
    (void)threads;
    *scratch = 0;
    if (dir == NCONV_DIR_BWD_W) return 0;
    int64_t rows, red;
    dims(c, dir, &rows, &red);
    return apack_bytes(c, rows, red);
}

static nconv_status planes_pack(const nconv_exec *e, void *dst) {
    planes_ctx pc;
    memset(&pc, 0, sizeof pc);
    pc.e = e;
    pc.k = e->k;
    dims(e->c, e->dir, &pc.rows, &pc.red);
    pc.tiles = nconv__div_up(pc.rows, MR);
    pc.apack = dst;
    nconv__parallel(e, pack_task, &pc);
    return NCONV_OK;
}

/* ---------------------------------------------------- 1x1 backward-weights
 *
 * dw[o][c] = sum over images n and pixels p of dy[n][o][p] * x[n][c][p]:
 * tile rows are output channels (A = dy^T), columns input channels
 * (B = x^T), the reduction runs over pixels in blocks of one image, and
 * both operands are transposed from their planes block by block (no NHWC
 * copies of x and dy, which cost more than this GEMM). Small weights
 * (at most 64 Ki floats) split the pixels into chunks, each with its own
 * sums, added in chunk order afterwards; threads take whole chunks. Else
 * threads own row tiles (when O >= C) or pairs of column panels, and each
 * packs the other side whole: the smaller one (with small weights each
 * thread would transpose all of x and dy). Every dw element adds its blocks in (n, p) order
 * within a chunk, the chunks in order; chunks depend on the problem alone,
 * so the sums do not depend on the thread count. db's lanes, when wanted,
 * come from the transposed dy rows (lane: the pixel's index mod 4 in its
 * image segment of a block), per chunk, added like the sums.
 */
enum { BW_KC = 256, BW_BAND = 24, BW_SCRATCH = 4 << 20, BW_MAX_CHUNKS = 8 };

/* Pixels per block: a multiple of 4 whose per-thread packing fits BW_SCRATCH (0: none does). */
static int64_t bw_block(const nconv_core *c) {
    const int64_t Og = c->O / c->G, Cg = c->C / c->G;
    const int64_t per_k = (int64_t)sizeof(float) * (nconv__div_up(Og, MR) * MR + nconv__div_up(Cg, NR) * NR + BW_BAND);
    int64_t kc = BW_SCRATCH / per_k;
    if (kc > BW_KC) kc = BW_KC;
    kc -= kc % 4;
    return kc >= 16 ? kc : 0;
}

/* Pixel chunks with sums of their own (1: none), as igemm's NHWC bwd_w chooses them but at
 * most BW_MAX_CHUNKS: each chunk costs a pass over its sums, and more chunks than threads gain
 * nothing. */
static int64_t bw_chunks(const nconv_core *c) {
    const int64_t dwf = c->O * (c->C / c->G), M = c->N * nconv__core_out_spatial(c), kc = bw_block(c);
    if (dwf > (64 << 10) || kc == 0) return 1;
    int64_t n = M / (2 * kc);
    const int64_t cap = (4 << 20) / ((int64_t)sizeof(float) * dwf);
    if (n > cap) n = cap;
    if (n > BW_MAX_CHUNKS) n = BW_MAX_CHUNKS;
    return n > 1 ? n : 1;
}

/* Per thread: A of every row tile, B of every column panel (a block each), the transpose band;
 * a pick's panel of x rows ([NR][kc]) and its pixel offsets. */
static size_t bw_scratch_bytes(const nconv_core *c) {
    const int64_t Og = c->O / c->G, Cg = c->C / c->G, kc = bw_block(c);
    const int64_t pick = picks(c) ? kc * NR + kc * (int64_t)(sizeof(int64_t) / sizeof(float)) : 0;
    return sizeof(float) * (size_t)(kc * (nconv__div_up(Og, MR) * MR + nconv__div_up(Cg, NR) * NR + BW_BAND) + pick);
}

typedef struct pbw_ctx {
    const nconv_exec *e;
    const nconv_kernels *k;
    nconv_convert16_fn cv; /* 16-bit operands: their conversion (NULL: f32) */
    int64_t Og, Cg, P, kc, otiles, cpanels, chunks;
    int split_rows;     /* one chunk: threads own row tiles (else pairs of column panels) */
    int picks;          /* x's pixels picked by offset (see picks) */
    float *acc;         /* per chunk: [G][Og][Cg] */
    double *lanes;      /* db's lanes (of chunk 0), or NULL */
    double *lanes_more; /* db's lanes of chunks 1.. (4 * O doubles each) */
    char *scratch;
    size_t stride;
} pbw_ctx;

/* Rows off + r * stride[1] (r < nrows, a channel apart) of a plane view, len elements each,
 * transposed into dst ([len][ldd] f32), widened on the way when v is 16-bit. */
static void rows_transposed(const nconv_kernels *k, const nconv_view *v, int64_t off, int64_t nrows, int64_t len,
                            float *dst, int64_t ldd) {
    if (v->dt == NCONV_F32) k->transpose(nrows, len, (const float *)v->data + off, v->stride[1], dst, ldd);
    else nconv__transpose16(k, v->dt)(nrows, len, (const uint16_t *)v->data + off, v->stride[1], dst, ldd, 1);
}

/* Row tiles [t0, t1) and column panels [q0, q1) over pixels [m_lo, m_hi) into acc and, when
 * not NULL, lanes (zeroed by the caller). The first block's kernel calls write the sums
 * unzeroed (no pass to zero them first). */
static void pbw_range(const pbw_ctx *b, char *scratch, int64_t t0, int64_t t1, int64_t q0, int64_t q1, int64_t m_lo,
                      int64_t m_hi, float *acc_all, double *lanes) {
    const nconv_core *c = b->e->c;
    const nconv_view *x = b->e->x, *y = b->e->y;
    const nconv_kernels *k = b->k;
    const int64_t Og = b->Og, Cg = b->Cg, kc = b->kc;
    float *apack = (float *)scratch;             /* [otiles][kc][MR] */
    float *bpack = apack + b->otiles * kc * MR;  /* [cpanels][kc][NR] */
    float *band = bpack + b->cpanels * kc * NR;  /* [kc][BW_BAND] */
    float *picked = band + kc * BW_BAND;         /* a pick's x rows, [NR][kc] */
    int64_t *off = (int64_t *)(picked + kc * NR); /* and their pixels' offsets */
    const int64_t o0 = t0 * MR, o1 = t1 * MR < Og ? t1 * MR : Og, c0 = q0 * NR, c1 = q1 * NR < Cg ? q1 * NR : Cg;
    for (int64_t g = 0; g < c->G; g++) {
        float *acc = acc_all + g * Og * Cg;
        if (m_lo >= m_hi) /* no pixels: no kernel call writes the sums */
            for (int64_t o = o0; o < o1; o++) memset(acc + o * Cg + c0, 0, sizeof(float) * (size_t)(c1 - c0));
        /* Blocks of kc pixels over all images (small planes would make short reductions), each
         * transposed in segments of one image. */
        for (int64_t m0 = m_lo; m0 < m_hi; m0 += kc) {
            const int64_t kk = m_hi - m0 < kc ? m_hi - m0 : kc;
            for (int64_t i0 = 0; i0 < kk;) {
                const int64_t n = (m0 + i0) / b->P, p0 = (m0 + i0) % b->P;
                const int64_t len = b->P - p0 < kk - i0 ? b->P - p0 : kk - i0;
                const int64_t xs = n * x->stride[0] + g * Cg * x->stride[1] + (b->picks ? 0 : p0);
                for (int64_t i = 0; b->picks && i < len; i++) off[i] = pixel_offset(c, x, p0 + i);
                const int64_t ys = n * y->stride[0] + g * Og * y->stride[1] + p0;
                /* A: dy^T of the rows, BW_BAND channels per transpose, then split into tiles of MR */
                for (int64_t ob = o0; ob < o1; ob += BW_BAND) {
                    const int64_t nb = o1 - ob < BW_BAND ? o1 - ob : BW_BAND;
                    rows_transposed(k, y, ys + ob * y->stride[1], nb, len, band, BW_BAND);
                    if (lanes) k->chsum(len, nb, band, BW_BAND, lanes + g * Og + ob, c->O);
                    for (int64_t r = 0; r < nb; r += MR) {
                        float *dst = apack + ((ob + r - o0) / MR) * kc * MR + i0 * MR;
                        const int64_t nr = nb - r < MR ? nb - r : MR;
                        if (nr == MR) /* constant-size copies */
                            for (int64_t i = 0; i < len; i++)
                                memcpy(dst + i * MR, band + i * BW_BAND + r, sizeof(float) * MR);
                        else
                            for (int64_t i = 0; i < len; i++)
                                for (int64_t q = 0; q < MR; q++)
                                    dst[i * MR + q] = q < nr ? band[i * BW_BAND + r + q] : 0.0f;
                    }
                }
                /* B: x^T of the columns, a panel of NR channels per transpose (zeros past Cg) */
                for (int64_t q = q0; q < q1; q++) {
                    const int64_t nc = Cg - q * NR < NR ? Cg - q * NR : NR;
                    float *dst = bpack + (q - q0) * kc * NR + i0 * NR;
                    if (b->picks) { /* the panel's rows picked, then transposed */
                        for (int64_t r = 0; r < nc; r++) {
                            const int64_t plane = xs + (q * NR + r) * x->stride[1];
                            for (int64_t i = 0; i < len; i++)
                                picked[r * kc + i] = nconv__load_f32(x->data, x->dt, plane + off[i]);
                        }
                        k->transpose(nc, len, picked, kc, dst, NR);
                    } else {
                        rows_transposed(k, x, xs + q * NR * x->stride[1], nc, len, dst, NR);
                    }
                    if (nc < NR)
                        for (int64_t i = 0; i < len; i++)
                            memset(dst + i * NR + nc, 0, sizeof(float) * (size_t)(NR - nc));
                }
                i0 += len;
            }
            /* Two column panels per call (their B stays in L1 while the row tiles pass) */
            for (int64_t q = q0; q < q1; q += 2) {
                const int64_t np = q1 - q < 2 ? 1 : 2, ql = q + np - 1;
                const int64_t nc_last = Cg - ql * NR < NR ? Cg - ql * NR : NR;
                for (int64_t t = t0; t < t1; t++) {
                    const int64_t mr = Og - t * MR < MR ? Og - t * MR : MR;
                    k->gemm_np(mr, np, nc_last, kk, apack + (t - t0) * kc * MR, MR, bpack + (q - q0) * kc * NR, kc * NR,
                               acc + t * MR * Cg + q * NR, Cg, NULL, m0 > m_lo ? NCONV_GEMM_ACCUMULATE : 0);
                }
            }
        }
    }
}

static double *pbw_lanes(const pbw_ctx *b, int64_t ch) {
    if (!b->lanes) return NULL;
    return ch == 0 ? b->lanes : b->lanes_more + (ch - 1) * 4 * b->e->c->O;
}

static void pbw_task(void *arg, int tid, int nthreads) {
    const pbw_ctx *b = arg;
    char *scratch = b->scratch + (size_t)tid * b->stride;
    const int64_t M = b->e->c->N * b->P;
    if (b->chunks > 1) {
        int64_t ch0, ch1;
        nconv__split(b->chunks, tid, nthreads, &ch0, &ch1);
        for (int64_t ch = ch0; ch < ch1; ch++) {
            int64_t m0, m1;
            nconv__split(M, (int)ch, (int)b->chunks, &m0, &m1);
            double *lanes = pbw_lanes(b, ch);
            for (int64_t i = 0; lanes && ch > 0 && i < 4 * b->e->c->O; i++) lanes[i] = 0; /* chunk 0's: zeroed */
            pbw_range(b, scratch, 0, b->otiles, 0, b->cpanels, m0, m1,
                      b->acc + ch * b->e->c->O * b->Cg, lanes);
        }
        return;
    }
    int64_t t0 = 0, t1 = b->otiles, q0 = 0, q1 = b->cpanels;
    if (b->split_rows) {
        nconv__split(b->otiles, tid, nthreads, &t0, &t1);
    } else {
        nconv__split(nconv__div_up(b->cpanels, 2), tid, nthreads, &q0, &q1);
        q0 *= 2, q1 = 2 * q1 < b->cpanels ? 2 * q1 : b->cpanels;
    }
    if (t0 >= t1 || q0 >= q1) return;
    /* db's lanes: each output channel's by one thread (the rows' owner, or the first column range) */
    pbw_range(b, scratch, t0, t1, q0, q1, 0, M, b->acc, b->lanes && (b->split_rows || q0 == 0) ? b->lanes : NULL);
}

static void pbw_sum_task(void *arg, int tid, int nthreads) {
    const pbw_ctx *b = arg;
    nconv__add_chunks(tid, nthreads, b->acc, b->e->c->O * b->Cg, b->chunks, b->lanes, b->lanes_more, 4 * b->e->c->O);
}

/* dw (the caller's layout) from the sums, rows split across threads. */
static void pbw_out_task(void *arg, int tid, int nthreads) {
    const pbw_ctx *b = arg;
    const nconv_view *w = b->e->w;
    const int64_t rows = b->e->c->O;
    int64_t r0, r1;
    nconv__split(rows, tid, nthreads, &r0, &r1);
    for (int64_t o = r0; o < r1; o++) {
        if (w->stride[1] == 1 && !b->e->accumulate) { /* a dense row of dw, written as a whole */
            const float *src = b->acc + o * b->Cg;
            if (w->dt == NCONV_F32) memcpy((float *)w->data + o * w->stride[0], src, sizeof(float) * (size_t)b->Cg);
            else b->cv(b->Cg, src, (uint16_t *)w->data + o * w->stride[0], 0);
            continue;
        }
        for (int64_t ci = 0; ci < b->Cg; ci++) {
            const int64_t off = o * w->stride[0] + ci * w->stride[1];
            const float v = b->acc[o * b->Cg + ci];
            if (w->dt == NCONV_F32) {
                float *wd = w->data;
                wd[off] = b->e->accumulate ? wd[off] + v : v;
            } else {
                nconv__store1(w->data, w->dt, off, b->e->accumulate ? (float)nconv__load(w->data, w->dt, off) + v : v);
            }
        }
    }
}

/* ------------------------------------- 1x1 backward-weights by dot products
 *
 * Where channels are few, the transposes above cost as much as the GEMM. The dot kernel reads both
 * planes in place instead: a tile of 6 output x 4 input channels sums dy[o][p] * x[c][p] over a
 * block of pixels into 16-lane partial sums, kept in the workspace from block to block and summed
 * across lanes once at the end. db, when wanted, is one more column of the first column tile (a
 * row of dy adds itself there). Threads own row tiles (when there are as many as column tiles)
 * or column tiles, and run every block over them in order: each sum adds the same kernel calls
 * in the same order whatever the thread count.
 */
enum { DOT_BLOCK = 1024 };         /* pixels per kernel call: a tile's 10 rows, 40 KiB, stay in L1 */
enum { DOT_MAX_CHANNELS = 48 };    /* the smaller side of dw, at most (or x's channels at most 64) */
enum { DOT_MIN_PIXELS = 512 };     /* per plane: short rows pay the kernel's per-row costs too often */
enum { DOT_MAX_PART = 16 << 20 };  /* bytes of partial sums */
enum { DOT_TILE = NCONV_DOT_MR * NCONV_DOT_NC * NCONV_DOT_LANES, DOT_DB = NCONV_DOT_MR * NCONV_DOT_LANES };

typedef struct dot_geo {
    int64_t Og, Cg, P, otiles, ctiles;
    int64_t len, imgs, pblocks, blocks; /* a block: imgs images, or len pixels of one image */
    int64_t part_floats; /* partial sums: [G][otiles][ctiles][DOT_TILE], then db's [G][otiles][DOT_DB] */
} dot_geo;

static void dot_geometry(const nconv_core *c, dot_geo *g) {
    g->Og = c->O / c->G, g->Cg = c->C / c->G, g->P = nconv__core_out_spatial(c);
    g->otiles = nconv__div_up(g->Og, NCONV_DOT_MR);
    /* Cg channels and db's column, always counted (the workspace does not know whether db is
     * wanted), as evenly as 4-column tiles allow */
    g->ctiles = nconv__div_up(g->Cg + 1, NCONV_DOT_NC);
    const int64_t per_img = nconv__div_up(g->P, DOT_BLOCK);
    g->len = per_img > 1 ? nconv__div_up(nconv__div_up(g->P, per_img), 16) * 16 : g->P;
    g->imgs = per_img > 1 ? 1 : DOT_BLOCK / g->P;
    g->pblocks = nconv__div_up(g->P, g->len);
    g->blocks = nconv__div_up(c->N, g->imgs) * g->pblocks;
    g->part_floats = c->G * g->otiles * (g->ctiles * DOT_TILE + DOT_DB);
}

static size_t dot_part_bytes(const nconv_core *c) {
    dot_geo g;
    dot_geometry(c, &g);
    return sizeof(float) * (size_t)g.part_floats;
}

static int dot_suits(const nconv_core *c) {
    if (c->dt != NCONV_F32 || !is_1x1(c) || nconv__core_out_spatial(c) < DOT_MIN_PIXELS) return 0;
    dot_geo g;
    dot_geometry(c, &g);
    return ((g.Og < g.Cg ? g.Og : g.Cg) <= DOT_MAX_CHANNELS || g.Cg <= 64) &&
           (int64_t)sizeof(float) * g.part_floats <= DOT_MAX_PART;
}

typedef struct dot_ctx {
    const nconv_exec *e;
    dot_geo g;
    int64_t V;   /* columns: Cg, and db's first when wanted */
    int by_rows; /* threads own row tiles (else column tiles) */
    float *part; /* [part_floats] */
    float *acc;  /* [G][Og][Cg] */
} dot_ctx;

/* Column tile t's input channels [*c0, *c0 + *nc) of its group: columns [V t / ctiles,
 * V (t + 1) / ctiles) of V, less db's column 0 (in tile 0) when wanted. */
static void dot_columns(const dot_ctx *d, int64_t t, int64_t *c0, int64_t *nc) {
    const int db = d->V > d->g.Cg;
    const int64_t v0 = d->V * t / d->g.ctiles, v1 = d->V * (t + 1) / d->g.ctiles;
    *c0 = v0 - (db && v0 > 0), *nc = v1 - v0 - (db && t == 0);
}

static float *dot_part(const dot_ctx *d, int64_t g, int64_t ot, int64_t ct) {
    return d->part + ((g * d->g.otiles + ot) * d->g.ctiles + ct) * DOT_TILE;
}

static float *dot_dbpart(const dot_ctx *d, int64_t g, int64_t ot) {
    return d->part + d->e->c->G * d->g.otiles * d->g.ctiles * DOT_TILE + (g * d->g.otiles + ot) * DOT_DB;
}

/* Tile (g, ot, ct) over block bi. */
static void dot_tile(const dot_ctx *d, int64_t g, int64_t ot, int64_t ct, int64_t bi) {
    const nconv_view *x = d->e->x, *y = d->e->y;
    const dot_geo *q = &d->g;
    const int db = d->V > q->Cg;
    const int64_t n0 = bi / q->pblocks * q->imgs, p0 = bi % q->pblocks * q->len;
    const int64_t nimg = d->e->c->N - n0 < q->imgs ? d->e->c->N - n0 : q->imgs, len = q->P - p0 < q->len ? q->P - p0 : q->len;
    int64_t c0, nc;
    dot_columns(d, ct, &c0, &nc);
    const int64_t o0 = ot * NCONV_DOT_MR, no = q->Og - o0 < NCONV_DOT_MR ? q->Og - o0 : NCONV_DOT_MR;
    const float *dy = (const float *)y->data + n0 * y->stride[0] + (g * q->Og + o0) * y->stride[1] + p0;
    const float *xs = (const float *)x->data + n0 * x->stride[0] + (g * q->Cg + c0) * x->stride[1] + p0;
    d->e->k->dot(nimg, len, dy, y->stride[1], y->stride[0], no, xs, x->stride[1], x->stride[0], nc,
                 dot_part(d, g, ot, ct), db && ct == 0 ? dot_dbpart(d, g, ot) : NULL);
}

static void dot_task(void *arg, int tid, int nthreads) {
    const dot_ctx *d = arg;
    const dot_geo *q = &d->g;
    const int64_t per = d->by_rows ? q->otiles : q->ctiles;
    int64_t u0, u1;
    nconv__split(d->e->c->G * per, tid, nthreads, &u0, &u1);
    /* the thread's tiles of each group: their sums zeroed, then every block, row tiles outermost
     * (their dy rows stay in L1 while the column tiles pass, x's come from L2) */
    for (int64_t u = u0; u < u1;) {
        const int64_t g = u / per, t0 = u % per, t1 = u1 - g * per < per ? u1 - g * per : per;
        const int64_t ot0 = d->by_rows ? t0 : 0, ot1 = d->by_rows ? t1 : q->otiles;
        const int64_t ct0 = d->by_rows ? 0 : t0, ct1 = d->by_rows ? q->ctiles : t1;
        for (int64_t ot = ot0; ot < ot1; ot++) {
            memset(dot_part(d, g, ot, ct0), 0, sizeof(float) * (size_t)((ct1 - ct0) * DOT_TILE));
            if (ct0 == 0) memset(dot_dbpart(d, g, ot), 0, sizeof(float) * DOT_DB);
        }
        for (int64_t bi = 0; bi < q->blocks; bi++)
            for (int64_t ot = ot0; ot < ot1; ot++)
                for (int64_t ct = ct0; ct < ct1; ct++) dot_tile(d, g, ot, ct, bi);
        u = g * per + t1;
    }
}

static double lane_sum(const float *p) {
    double s = 0;
    for (int l = 0; l < NCONV_DOT_LANES; l++) s += p[l];
    return s;
}

/* Each output's partial sums added lane by lane (in double) into d->acc and db's lanes. */
static void dot_sum_task(void *arg, int tid, int nthreads) {
    const dot_ctx *d = arg;
    const dot_geo *q = &d->g;
    double *lanes = d->e->db_lanes;
    const int db = d->V > q->Cg;
    int64_t r0, r1;
    nconv__split(d->e->c->O, tid, nthreads, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t g = r / q->Og, o = r % q->Og, ot = o / NCONV_DOT_MR, orow = o % NCONV_DOT_MR;
        for (int64_t ct = 0; ct < q->ctiles; ct++) {
            int64_t c0, nc;
            dot_columns(d, ct, &c0, &nc);
            const float *part = dot_part(d, g, ot, ct) + orow * NCONV_DOT_NC * NCONV_DOT_LANES;
            for (int64_t j = 0; j < nc; j++) d->acc[r * q->Cg + c0 + j] = (float)lane_sum(part + j * NCONV_DOT_LANES);
        }
        if (db && lanes) lanes[r] = lane_sum(dot_dbpart(d, g, ot) + orow * NCONV_DOT_LANES);
    }
}

static void pbw_out_task(void *arg, int tid, int nthreads);

static nconv_status dot_bwd_w(const nconv_exec *e) {
    const nconv_core *c = e->c;
    dot_ctx d;
    memset(&d, 0, sizeof d);
    d.e = e;
    dot_geometry(c, &d.g);
    d.V = d.g.Cg + (e->db_lanes != NULL);
    d.by_rows = d.g.otiles >= d.g.ctiles;
    d.acc = nconv__arena_take(e->ws, sizeof(float) * (size_t)(c->O * d.g.Cg));
    d.part = nconv__arena_take(e->ws, sizeof(float) * (size_t)d.g.part_floats);
    if (!d.acc || !d.part) return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    if (e->db_lanes)
        for (int64_t i = 0; i < 4 * c->O; i++) e->db_lanes[i] = 0;
    nconv__parallel(e, dot_task, &d);
    nconv__parallel(e, dot_sum_task, &d);
    pbw_ctx b;
    memset(&b, 0, sizeof b);
    b.e = e, b.Cg = d.g.Cg, b.acc = d.acc;
    nconv__parallel(e, pbw_out_task, &b);
    if (e->db_lanes) *e->db_done = 1;
    if (e->path) *e->path = "dot products";
    return NCONV_OK;
}

static nconv_status planes_bwd_w(const nconv_exec *e) {
    const nconv_core *c = e->c;
    if (dot_suits(c)) return dot_bwd_w(e);
    pbw_ctx b;
    memset(&b, 0, sizeof b);
    b.e = e;
    b.k = e->k;
    b.cv = nconv__convert16(e->k, c->dt);
    b.Og = c->O / c->G, b.Cg = c->C / c->G, b.P = nconv__core_out_spatial(c), b.kc = bw_block(c);
    b.otiles = nconv__div_up(b.Og, MR), b.cpanels = nconv__div_up(b.Cg, NR), b.chunks = bw_chunks(c);
    b.split_rows = b.Og >= b.Cg;
    b.picks = picks(c);
    b.stride = nconv__ws_round(bw_scratch_bytes(c));
    b.acc = nconv__arena_take(e->ws, sizeof(float) * (size_t)(b.chunks * c->O * b.Cg));
    b.lanes_more = nconv__arena_take(e->ws, sizeof(double) * (size_t)((b.chunks - 1) * 4 * c->O));
    b.scratch = nconv__arena_take(e->ws, (size_t)e->threads * b.stride);
    if (!b.acc || (b.chunks > 1 && !b.lanes_more) || !b.scratch)
        return nconv__error(NCONV_OUT_OF_MEMORY, "nconv: workspace too small for algorithm igemm");
    b.lanes = e->db_lanes;
    if (b.lanes)
        for (int64_t i = 0; i < 4 * c->O; i++) b.lanes[i] = 0;
    nconv__parallel(e, pbw_task, &b);
    if (b.chunks > 1) nconv__parallel(e, pbw_sum_task, &b);
    nconv__parallel(e, pbw_out_task, &b);
    if (b.lanes) *e->db_done = 1;
    return NCONV_OK;
}

static int planes_applies(const nconv_core *c, nconv_direction dir, const char **why_not) {
    if (!nconv__igemm_applies(c, dir, why_not)) return 0;
    if (planes_shape(c, dir)) return 1;
    if (why_not)
        *why_not = "f32, f16 or bf16 1x1 layers (strided ones without padding too; bwd_w: with few pixels per "
                   "block), or forward with a short reduction";
    return 0;
}

/* Not where the activations are channels-last: they would always be declined. */
static int planes_suits(unsigned copies) { return !(copies & NCONV_ACTS_NXC); }

/* Operands that are not dense NCHW f32 planes are declined (igemm computes them). */
const nconv_algo nconv_algo_igemm_planes = {.name = "igemm_planes", .applies = planes_applies,
                                            .workspace = planes_workspace, .run = planes_run, .accumulates = 1,
                                            .declines = {NCONV__DECLINES_LAYOUT,
                                                         NCONV__DECLINES_LAYOUT | NCONV__DECLINES_OWN,
                                                         NCONV__DECLINES_LAYOUT},
                                            .suits = planes_suits, .pack_size = planes_pack_size,
                                            .pack = planes_pack};
