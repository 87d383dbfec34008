/*
 * nconv check: every problem and direction through every applicable
 * algorithm, compared with the reference (algorithm "ref"). The error is
 * max |out - ref| / max |ref| over the output (and db for bwd_w); the
 * tolerance is per dtype. Exit status 1 if any comparison fails. With --device cuda, the
 * problems run on CUDA device 0 (cuDNN) instead of the CPU's algorithms.
 */
#include "cli.h"
#include "cuda_rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/internal.h"

static const char *const dir_names[3] = {"fwd", "bwd_d", "bwd_w"};

static double tolerance(nconv_dtype dt) {
    switch (dt) {
    case NCONV_F64:
    case NCONV_C128: return 1e-12;
    case NCONV_F32:
    case NCONV_C64: return 1e-4;
    case NCONV_F16: return 2e-3;
    case NCONV_BF16: return 1e-2;
    }
    return 0;
}

/* Largest |a - r| and |r| over two tensors of the same shape and strides (complex: over
 * real and imaginary parts). */
static void compare(const host_tensor *a, const host_tensor *r, int rank, const int64_t *shape, nconv_dtype dt,
                    double *maxdiff, double *maxref) {
    const int parts = nconv__is_complex(dt) ? 2 : 1;
    dt = nconv__real_dtype(dt);
    int64_t numel;
    if (cli_numel(rank, shape, &numel)) numel = 0; /* validated problems' shapes never overflow */
    for (int64_t i = 0; i < numel; i++) {
        int64_t rem = i, off = 0;
        for (int k = rank - 1; k >= 0; k--) {
            off += (rem % shape[k]) * a->t.stride[k];
            rem /= shape[k];
        }
        for (int part = 0; part < parts; part++) {
            double va = nconv__load(a->buf, dt, parts * off + part), vr = nconv__load(r->buf, dt, parts * off + part);
            double d = fabs(va - vr);
            if (!(d <= *maxdiff)) *maxdiff = d; /* NaN counts as a failure */
            if (fabs(vr) > *maxref) *maxref = fabs(vr);
        }
    }
}

/* Output tensors of a direction: (tensor, rank, shape). */
static int outputs(run_data *d, int dir, host_tensor **t, int *rank, const int64_t **shape) {
    switch (dir) {
    case 0: t[0] = &d->y, rank[0] = d->rank, shape[0] = d->ys; return 1;
    case 1: t[0] = &d->dx, rank[0] = d->rank, shape[0] = d->xs; return 1;
    default:
        t[0] = &d->dw, rank[0] = d->rank, shape[0] = d->ws;
        t[1] = &d->db, rank[1] = 1, shape[1] = &d->p.out_channels;
        return 2;
    }
}

/* The largest relative error of the outputs t against the reference results kept. */
static void worst_error(host_tensor *const *t, void *const *keep, int nout, const int *rank, const int64_t *const *shape,
                        nconv_dtype dt, double *worst) {
    for (int j = 0; j < nout; j++) {
        host_tensor ref = {t[j]->t, keep[j], 0};
        ref.t.data = keep[j];
        double md = 0, mr = 0;
        compare(t[j], &ref, rank[j], shape[j], dt, &md, &mr);
        const double err = md / (mr > 0 ? mr : 1);
        if (!(err <= *worst)) *worst = err;
    }
}

static size_t tensor_bytes(const nconv_problem *p, int rank, const int64_t *shape) {
    int64_t n;
    return cli_numel(rank, shape, &n) ? 0 : nconv_dtype_size(p->dtype) * (size_t)n; /* validated shapes do not overflow */
}

int cmd_check(int argc, char **argv) {
    suite_opts o = {{1, 1, 1}, 0, 0, 0, NCONV_F32, NCONV_PAD_ZEROS, 1, NCONV_LAYOUT_NCX, 0, NULL, 0};
    problem_list l = {0};
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--transposed")) o.transposed = 1;
    for (int i = 0; i < argc; i++) {
        int r = suite_option(argc, argv, &i, &o, &l);
        if (r < 0) return list_free(&l), EXIT_INVALID;
        if (r == 0) return list_free(&l), cli_fail("check: unknown option '%s'", argv[i]);
    }
    if (!l.n) return cli_fail("check: no problem given (descriptors or --batch FILE)");
    suite_apply(&o, &l);
    nconv_context *ref_ctx = NULL, *ctx = NULL;
    char why[256];
    if (o.cuda && cuda_rt_load(why, sizeof why)) return list_free(&l), cli_fail("check --device cuda: %s", why);
    if (nconv_context_create(&ref_ctx) || (o.cuda ? nconv_context_create_cuda(&ctx, 0) : nconv_context_create(&ctx))) {
        const int rc = cli_fail("%s", nconv_last_error() + strlen("nconv: "));
        nconv_context_destroy(ref_ctx);
        return list_free(&l), rc;
    }
    nconv_context_set_algorithm(ref_ctx, "ref");
    nconv_context_set_threads(ctx, o.threads);
    int failures = 0, passes = 0;
    for (size_t k = 0; k < l.n; k++) {
        cli_problem *cp = &l.items[k];
        if (nconv_problem_validate(&cp->p)) {
            printf("FAIL  %-5s %-10s %s: %s\n", "-", "-", cp->text, nconv_last_error());
            failures++;
            continue;
        }
        char desc[512];
        nconv_problem_to_desc(&cp->p, desc, sizeof desc);
        for (int dir = 0; dir < 3; dir++) {
            if (!o.dirs[dir]) continue;
            run_data d;
            if (run_data_init(&d, &cp->p, o.layout, 0x5eed + k)) {
                printf("FAIL  %-5s out of memory  %s\n", dir_names[dir], desc);
                failures++;
                continue;
            }
            host_tensor *t[2];
            int rank[2];
            const int64_t *shape[2];
            int nout = outputs(&d, dir, t, rank, shape);
            if (run_dir(ref_ctx, &d, dir)) {
                printf("FAIL  %-5s ref: %s  %s\n", dir_names[dir], nconv_last_error(), desc);
                failures++;
                run_data_free(&d);
                continue;
            }
            /* Keep the reference results, then run each other algorithm. */
            void *keep[2] = {0};
            for (int j = 0; j < nout; j++) {
                size_t nb = tensor_bytes(&cp->p, rank[j], shape[j]);
                keep[j] = malloc(nb ? nb : 1);
                if (keep[j]) memcpy(keep[j], t[j]->buf, nb);
            }
            char algos[256] = "";
            double worst = 0;
            int ok = keep[0] && (nout == 1 || keep[1]), ran = 0;
            if (ok && o.cuda) { /* the device's results into the output buffers, then compared below */
                run_data dv;
                ran = 1;
                snprintf(algos, sizeof algos, "cudnn");
                if (run_data_to_device(&d, &dv)) {
                    printf("FAIL  %-5s cuda: device memory (%s)  %s\n", dir_names[dir], cuda_rt_error(), desc);
                    ok = 0;
                } else if (run_dir(ctx, &dv, dir)) {
                    printf("FAIL  %-5s cuda: %s  %s\n", dir_names[dir], nconv_last_error(), desc);
                    ok = 0;
                }
                for (int j = 0; ok && j < nout; j++) {
                    host_tensor *dev = j == 0 ? (dir == 0 ? &dv.y : dir == 1 ? &dv.dx : &dv.dw) : &dv.db;
                    ok = !cuda_rt_to_host(t[j]->buf, dev->buf, tensor_bytes(&cp->p, rank[j], shape[j]));
                }
                run_data_free_device(&dv);
                if (ok) worst_error(t, keep, nout, rank, shape, cp->p.dtype, &worst);
            }
            for (int a = 0; ok && !o.cuda && a < nconv_algorithm_count(); a++) {
                const char *name = nconv_algorithm_name(a);
                int applies = 0;
                if (!strcmp(name, "ref") ||
                    nconv_algorithm_applies(name, &cp->p, core_dir(&cp->p, dir), &applies, NULL) || !applies)
                    continue;
                if (o.algo && strcmp(o.algo, name)) continue;
                nconv_context_set_algorithm(ctx, name);
                for (int j = 0; j < nout; j++) memset(t[j]->buf, 0xff, tensor_bytes(&cp->p, rank[j], shape[j]));
                ran++;
                snprintf(algos + strlen(algos), sizeof algos - strlen(algos), "%s%s", *algos ? "," : "", name);
                if (run_dir(ctx, &d, dir)) {
                    printf("FAIL  %-5s %s: %s  %s\n", dir_names[dir], name, nconv_last_error(), desc);
                    ok = 0;
                    break;
                }
                worst_error(t, keep, nout, rank, shape, cp->p.dtype, &worst);
            }
            if (ok && !(worst <= tolerance(cp->p.dtype))) ok = 0;
            printf("%s  %-5s %-10s err=%.2e (tol %.0e)  %s%s%s\n", ok ? "ok  " : "FAIL", dir_names[dir],
                   ran ? algos : "ref-only", worst, tolerance(cp->p.dtype), desc, *cp->name ? "  " : "", cp->name);
            fflush(stdout);
            if (ok) passes++;
            else failures++;
            free(keep[0]);
            free(keep[1]);
            run_data_free(&d);
        }
    }
    printf("%d passed, %d failed\n", passes, failures);
    nconv_context_destroy(ref_ctx);
    nconv_context_destroy(ctx);
    list_free(&l);
    return failures ? EXIT_CHECK_FAILED : 0;
}
