/*
 * The performance peer: each problem through oneDNN's convolution or
 * deconvolution primitive in this process, with memory format `any` (its
 * preferred layout), the primitive created once and only its execution
 * timed (by the caller), as benchdnn does. Built only when dnnl.h is found.
 */
#include "cli.h"

#ifdef NCONV_HAVE_DNNL

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                   \
    do {                                            \
        if ((call) != dnnl_success) goto fail;      \
    } while (0)

int onednn_available(void) { return 1; }

struct onednn_peer {
    dnnl_primitive_desc_t fwd_pd, pd;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[4];
    dnnl_exec_arg_t args[4];
    int nargs, threads;
};

static dnnl_stream_t strm;

void onednn_destroy(onednn_peer *peer) {
    if (!peer) return;
    if (peer->prim) dnnl_primitive_destroy(peer->prim);
    for (int k = 0; k < 4; k++)
        if (peer->mem[k]) dnnl_memory_destroy(peer->mem[k]);
    if (peer->pd) dnnl_primitive_desc_destroy(peer->pd);
    if (peer->fwd_pd) dnnl_primitive_desc_destroy(peer->fwd_pd);
    free(peer);
}

int onednn_run(onednn_peer *peer) {
    omp_set_num_threads(peer->threads);
    if (dnnl_primitive_execute(peer->prim, strm, peer->nargs, peer->args) != dnnl_success) return -1;
    return dnnl_stream_wait(strm) == dnnl_success ? 0 : -1;
}

onednn_peer *onednn_create(const nconv_problem *p, int dir, int threads, char *impl, size_t cap) {
    static dnnl_engine_t eng; /* the CLI is single-threaded; one engine and stream for the process */
    if (!eng && (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
                 dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success))
        return NULL;
    /* f16 and bf16 where this oneDNN has them for this CPU; its reference implementations are
     * no peer (orders of magnitude slower), so they are left out as if absent. */
    const dnnl_data_type_t dt = p->dtype == NCONV_F32 ? dnnl_f32 : p->dtype == NCONV_F16 ? dnnl_f16
                              : p->dtype == NCONV_BF16 ? dnnl_bf16 : dnnl_data_type_undef;
    if (dt == dnnl_data_type_undef) return NULL;
    omp_set_num_threads(threads);
    onednn_peer *peer = calloc(1, sizeof *peer);
    if (!peer) return NULL;
    peer->threads = threads;

    const int nd = p->ndims, r = nd + 2;
    int64_t out[NCONV_MAX_SPATIAL];
    if (nconv_problem_output_size(p, out)) goto fail;
    dnnl_dims_t src, dst, wei, bia, strides, dil, pl, pr;
    const int64_t G = p->groups;
    src[0] = dst[0] = p->batch;
    src[1] = p->in_channels;
    dst[1] = p->out_channels;
    int wr = 0;
    if (G > 1) wei[wr++] = G;
    wei[wr++] = p->out_channels / G;
    wei[wr++] = p->in_channels / G;
    for (int i = 0; i < nd; i++) {
        src[2 + i] = p->in_size[i];
        dst[2 + i] = out[i];
        wei[wr++] = p->kernel[i];
        strides[i] = p->stride[i];
        dil[i] = p->dilation[i] - 1;
        pl[i] = p->pad_begin[i];
        const int64_t ext = (p->kernel[i] - 1) * p->dilation[i] + 1;
        /* oneDNN wants the end padding that makes its size formula exact. */
        pr[i] = p->transposed ? (p->in_size[i] - 1) * p->stride[i] - out[i] + ext - pl[i]
                              : (out[i] - 1) * p->stride[i] - p->in_size[i] + ext - pl[i];
    }
    bia[0] = p->out_channels;
    dnnl_memory_desc_t src_md, dst_md, wei_md, bia_md;
    TRY(dnnl_memory_desc_init_by_tag(&src_md, r, src, dt, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&dst_md, r, dst, dt, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&wei_md, wr, wei, dt, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&bia_md, 1, bia, dt, dnnl_x));

    if (!p->transposed) {
        dnnl_convolution_desc_t fd, d;
        TRY(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src_md,
                                                       &wei_md, &bia_md, &dst_md, strides, dil, pl, pr));
        TRY(dnnl_primitive_desc_create(&peer->fwd_pd, &fd, NULL, eng, NULL));
        if (dir == 1) {
            TRY(dnnl_dilated_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &src_md, &wei_md,
                                                                 &dst_md, strides, dil, pl, pr));
            TRY(dnnl_primitive_desc_create(&peer->pd, &d, NULL, eng, peer->fwd_pd));
        } else if (dir == 2) {
            TRY(dnnl_dilated_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &src_md, &wei_md,
                                                                    &bia_md, &dst_md, strides, dil, pl, pr));
            TRY(dnnl_primitive_desc_create(&peer->pd, &d, NULL, eng, peer->fwd_pd));
        }
    } else {
        dnnl_deconvolution_desc_t fd, d;
        TRY(dnnl_dilated_deconvolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_deconvolution_direct,
                                                         &src_md, &wei_md, &bia_md, &dst_md, strides, dil, pl, pr));
        TRY(dnnl_primitive_desc_create(&peer->fwd_pd, &fd, NULL, eng, NULL));
        if (dir == 1) {
            TRY(dnnl_dilated_deconvolution_backward_data_desc_init(&d, dnnl_deconvolution_direct, &src_md, &wei_md,
                                                                   &dst_md, strides, dil, pl, pr));
            TRY(dnnl_primitive_desc_create(&peer->pd, &d, NULL, eng, peer->fwd_pd));
        } else if (dir == 2) {
            TRY(dnnl_dilated_deconvolution_backward_weights_desc_init(&d, dnnl_deconvolution_direct, &src_md, &wei_md,
                                                                      &bia_md, &dst_md, strides, dil, pl, pr));
            TRY(dnnl_primitive_desc_create(&peer->pd, &d, NULL, eng, peer->fwd_pd));
        }
    }
    if (!peer->pd) peer->pd = peer->fwd_pd, peer->fwd_pd = NULL;
    struct { int arg; dnnl_query_t q; int idx; } spec[3][4] = {
        {{DNNL_ARG_SRC, dnnl_query_src_md, 0}, {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, 0},
         {DNNL_ARG_BIAS, dnnl_query_weights_md, 1}, {DNNL_ARG_DST, dnnl_query_dst_md, 0}},
        {{DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, 0}, {DNNL_ARG_WEIGHTS, dnnl_query_weights_md, 0},
         {DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md, 0}, {0, dnnl_query_undef, 0}},
        {{DNNL_ARG_SRC, dnnl_query_src_md, 0}, {DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, 0},
         {DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md, 0}, {DNNL_ARG_DIFF_BIAS, dnnl_query_diff_weights_md, 1}}};
    for (int k = 0; k < 4 && spec[dir][k].arg; k++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(peer->pd, spec[dir][k].q, spec[dir][k].idx);
        TRY(dnnl_memory_create(&peer->mem[k], md, eng, DNNL_MEMORY_ALLOCATE));
        void *h;
        TRY(dnnl_memory_get_data_handle(peer->mem[k], &h));
        memset(h, 0, dnnl_memory_desc_get_size(md));
        peer->args[peer->nargs++] = (dnnl_exec_arg_t){spec[dir][k].arg, peer->mem[k]};
    }
    const char *name = "";
    dnnl_primitive_desc_query(peer->pd, dnnl_query_impl_info_str, 0, &name);
    snprintf(impl, cap, "%s", name);
    if (dt != dnnl_f32 && !strncmp(name, "ref", 3)) goto fail;
    TRY(dnnl_primitive_create(&peer->prim, peer->pd));
    if (onednn_run(peer)) goto fail;
    return peer;
fail:
    onednn_destroy(peer);
    return NULL;
}

#else

int onednn_available(void) { return 0; }

onednn_peer *onednn_create(const nconv_problem *p, int dir, int threads, char *impl, size_t cap) {
    (void)p, (void)dir, (void)threads, (void)impl, (void)cap;
    return NULL;
}

int onednn_run(onednn_peer *peer) {
    (void)peer;
    return -1;
}

void onednn_destroy(onednn_peer *peer) { (void)peer; }

#endif
