/* Operands for check and bench: random data in the chosen layout and dtype. */
#include "cli.h"
#include "cuda_rt.h"

#include <stdlib.h>
#include <string.h>

#include "../../src/internal.h" /* element conversions, checked arithmetic */

int to_tensor(const double *src, int rank, const int64_t *shape, nconv_dtype dt, nconv_layout layout, host_tensor *h) {
    return to_tensor_batch(src, 1, rank, shape, dt, layout, h);
}

int to_tensor_batch(const double *src, int64_t batch, int rank, const int64_t *shape, nconv_dtype dt,
                    nconv_layout layout, host_tensor *h) {
    int64_t numel, total;
    if (cli_numel(rank, shape, &numel) || !nconv__mul_ok(batch, numel, &total)) return -1;
    /* 64-byte aligned, as PyTorch's CPU allocator and oneDNN's own buffers are (glibc's malloc
     * gives 16 bytes, which denies the kernels' aligned non-temporal stores). */
    const size_t bytes = nconv_dtype_size(dt) * (size_t)(total > 0 ? total : 1);
    const int parts = nconv__is_complex(dt) ? 2 : 1; /* src holds (real, imaginary) pairs */
    const nconv_dtype rdt = nconv__real_dtype(dt);
    h->buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!h->buf) return -1;
    nconv_tensor_init(&h->t, h->buf, rank, shape, layout);
    h->batch_stride = numel;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < numel; i++) {
            int64_t rem = i, off = b * numel;
            for (int k = rank - 1; k >= 0; k--) {
                off += (rem % shape[k]) * h->t.stride[k];
                rem /= shape[k];
            }
            for (int part = 0; part < parts; part++)
                nconv__store1(h->buf, rdt, parts * off + part, src ? src[parts * (b * numel + i) + part] : 0.0);
        }
    return 0;
}

static int random_tensor(int rank, const int64_t *shape, nconv_dtype dt, nconv_layout layout, uint64_t *seed,
                         host_tensor *h) {
    int64_t numel;
    if (cli_numel(rank, shape, &numel)) return -1;
    const int64_t n = (nconv__is_complex(dt) ? 2 : 1) * numel;
    double *v = calloc((size_t)(n ? n : 1), sizeof(double));
    if (!v) return -1;
    for (int64_t i = 0; i < n; i++) v[i] = rng_uniform(seed);
    int r = to_tensor(v, rank, shape, dt, layout, h);
    free(v);
    return r;
}

int run_data_init(run_data *d, const nconv_problem *p, nconv_layout layout, uint64_t seed) {
    memset(d, 0, sizeof *d);
    d->p = *p;
    d->rank = p->ndims + 2;
    if (nconv_problem_shapes(p, d->xs, d->ws, d->ys)) return -1;
    const nconv_dtype dt = p->dtype;
    const int r = d->rank;
    int64_t oc = p->out_channels;
    if (random_tensor(r, d->xs, dt, layout, &seed, &d->x) || random_tensor(r, d->ws, dt, layout, &seed, &d->w) ||
        random_tensor(1, &oc, dt, layout, &seed, &d->b) || random_tensor(r, d->ys, dt, layout, &seed, &d->dy) ||
        to_tensor(NULL, r, d->ys, dt, layout, &d->y) || to_tensor(NULL, r, d->xs, dt, layout, &d->dx) ||
        to_tensor(NULL, r, d->ws, dt, layout, &d->dw) || to_tensor(NULL, 1, &oc, dt, layout, &d->db)) {
        run_data_free(d);
        return -1;
    }
    return 0;
}

void run_data_free(run_data *d) {
    host_tensor *all[] = {&d->x, &d->w, &d->b, &d->dy, &d->y, &d->dx, &d->dw, &d->db};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]->buf);
    memset(d, 0, sizeof *d);
}

nconv_status run_dir(nconv_context *ctx, run_data *d, int dir) {
    switch (dir) {
    case 0: return nconv_forward(ctx, &d->p, NULL, &d->x.t, &d->w.t, &d->b.t, NULL, &d->y.t, NULL, 0);
    case 1: return nconv_backward(ctx, &d->p, NULL, NULL, &d->w.t, NULL, &d->dy.t, &d->dx.t, NULL, NULL, NULL, NULL, 0);
    default:
        return nconv_backward(ctx, &d->p, NULL, &d->x.t, NULL, NULL, &d->dy.t, NULL, &d->dw.t, &d->db.t, NULL, NULL, 0);
    }
}

nconv_status run_plan_create(nconv_context *ctx, run_data *d, int dir, nconv_layout layout, nconv_plan **plan) {
    nconv_plan_desc desc;
    nconv_plan_desc_init(&desc, dir == 0 ? NCONV_OP_FORWARD : NCONV_OP_BACKWARD);
    if (dir == 1) desc.outputs = NCONV_OUT_DX;
    if (dir == 2) desc.outputs = NCONV_OUT_DW | NCONV_OUT_DB;
    desc.layout = layout;
    nconv_status st = nconv_plan_create(ctx, &d->p, &desc, plan);
    if (!st && dir < 2 && (st = nconv_plan_set_weights(*plan, &d->w.t, dir == 0 ? &d->b.t : NULL))) {
        nconv_plan_destroy(*plan);
        *plan = NULL;
    }
    return st;
}

nconv_status run_plan(const nconv_plan *plan, run_data *d, int dir) {
    nconv_variant_pack v = {0};
    if (dir == 0) v.x = &d->x.t, v.y = &d->y.t;
    else if (dir == 1) v.dy = &d->dy.t, v.dx = &d->dx.t;
    else v.x = &d->x.t, v.dy = &d->dy.t, v.dw = &d->dw.t, v.db = &d->db.t;
    return nconv_plan_execute(plan, &v);
}

nconv_direction core_dir(const nconv_problem *p, int dir) {
    if (dir == 2) return NCONV_DIR_BWD_W;
    if (p->transposed) return dir == 0 ? NCONV_DIR_BWD_D : NCONV_DIR_FWD;
    return dir == 0 ? NCONV_DIR_FWD : NCONV_DIR_BWD_D;
}

int run_data_to_device(const run_data *h, run_data *dv) {
    *dv = *h;
    const host_tensor *src[] = {&h->x, &h->w, &h->b, &h->dy, &h->y, &h->dx, &h->dw, &h->db};
    host_tensor *dst[] = {&dv->x, &dv->w, &dv->b, &dv->dy, &dv->y, &dv->dx, &dv->dw, &dv->db};
    const int64_t *shape[] = {h->xs, h->ws, &h->p.out_channels, h->ys, h->ys, h->xs, h->ws, &h->p.out_channels};
    const int rank[] = {h->rank, h->rank, 1, h->rank, h->rank, h->rank, h->rank, 1};
    for (int i = 0; i < 8; i++) dst[i]->buf = NULL;
    for (int i = 0; i < 8; i++) {
        int64_t n;
        if (cli_numel(rank[i], shape[i], &n)) return -1;
        const size_t bytes = (size_t)(n ? n : 1) * nconv_dtype_size(h->p.dtype);
        if (!(dst[i]->buf = cuda_rt_malloc(bytes)) || cuda_rt_to_device(dst[i]->buf, src[i]->buf, bytes)) return -1;
        dst[i]->t.data = dst[i]->buf;
    }
    return 0;
}

void run_data_free_device(run_data *dv) {
    host_tensor *all[] = {&dv->x, &dv->w, &dv->b, &dv->dy, &dv->y, &dv->dx, &dv->dw, &dv->db};
    for (int i = 0; i < 8; i++) cuda_rt_free(all[i]->buf);
}
