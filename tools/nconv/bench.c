/*
 * nconv bench: times each problem and direction from the plain user layout
 * (every internal transform included): one warm-up run, then repeated runs
 * until MIN_RUNS and MIN_SECONDS are both reached; reports the median. Each
 * is timed twice, run by run in turn: as one-shot calls (ms) and through a
 * plan made beforehand whose weights were given once (plan_ms: forward and
 * bwd_d run on packed weights; bwd_w has none to give). The oneDNN peer runs
 * between two halves of nconv's runs, and its median is reported beside.
 * With no problem given it runs the embedded default suite.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MIN_RUNS = 5, MAX_RUNS = 100 };
static const double MIN_SECONDS = 0.4;
static const double PEER_PAUSE = 0.05; /* after oneDNN: its OpenMP threads stop spinning */

/* The default suite: the problems of ../shared/suites/public.txt at batch 1,
 * with the two largest (VGG, C3D) at half the spatial size, so that the
 * whole run takes about a minute on one core. */
static const char default_suite[] =
    "mb1ic3ih224oc64oh112kh7sh2ph3n\"resnet50:conv1\"\n"
    "mb1ic64ih56oc64oh56kh1ph0n\"resnet50:res2a_1x1\"\n"
    "mb1ic64ih56oc64oh56kh3ph1n\"resnet50:res2a_3x3\"\n"
    "mb1ic64ih56oc256oh56kh1ph0n\"resnet50:res2a_expand\"\n"
    "mb1ic256ih56oc64oh56kh1ph0n\"resnet50:res2b_reduce\"\n"
    "mb1ic128ih56oc128oh28kh3sh2ph1n\"resnet50:res3a_3x3s2\"\n"
    "mb1ic128ih28oc128oh28kh3ph1n\"resnet50:res3b_3x3\"\n"
    "mb1ic512ih28oc128oh28kh1ph0n\"resnet50:res3b_reduce\"\n"
    "mb1ic256ih14oc256oh14kh3ph1n\"resnet50:res4b_3x3\"\n"
    "mb1ic1024ih14oc256oh14kh1ph0n\"resnet50:res4b_reduce\"\n"
    "mb1ic512ih7oc512oh7kh3ph1n\"resnet50:res5b_3x3\"\n"
    "mb1ic2048ih7oc512oh7kh1ph0n\"resnet50:res5b_reduce\"\n"
    "mb1ic256ih56oc512oh28kh1sh2ph0n\"resnet50:res3a_downsample\"\n"
    "mb1g32ic32ih112oc32oh112kh3ph1n\"mobilenetv2:dw_112\"\n"
    "mb1g144ic144ih56oc144oh28kh3sh2ph1n\"mobilenetv2:dw_56s2\"\n"
    "mb1g576ic576ih14oc576oh14kh3ph1n\"mobilenetv2:dw_14\"\n"
    "mb1g32ic128ih56oc128oh56kh3ph1n\"resnext50:conv2_g32\"\n"
    "mb1ic64ih112oc64oh112kh3ph1n\"vgg16:conv1_2/half\"\n"
    "mb1ic1iw16000oc512ow3199kw10sw5pw0n\"wav2vec2:conv0\"\n"
    "mb1ic512iw3199oc512ow1599kw3sw2pw0n\"wav2vec2:conv1\"\n"
    "mb1ic64id8ih28iw28oc128od8oh28ow28kd3kh3kw3pd1ph1pw1n\"c3d:conv2/half\"\n"
    "mb1ic512ih28oc512oh28kh3ph2dh1n\"deeplab:atrous_d2\"\n"
    "--transposed mb1ic256ih8oc128oh16kh4sh2ph1n\"dcgan:deconv2\"\n";

static const char *const dir_names[3] = {"fwd", "bwd_d", "bwd_w"};

/* Per direction and layout: sums for the summary lines. */
typedef struct totals {
    double ms, flops, onednn_ms_paired, ms_paired, log_ratio, plan_ms, plan_ms_paired, log_plan_ratio;
    int n_ratio;
} totals;

/* Runs of one problem and direction, one-shot calls and the plan's in turn (so that a drift
 * of the machine reaches both alike), appended to times and plan_times from index n, at least
 * MIN_RUNS of each and seconds in all; returns the new count. */
static int time_runs(nconv_context *ctx, run_data *d, int dir, const nconv_plan *plan, double seconds, double *times,
                     double *plan_times, int n) {
    double spent = 0;
    for (int k = 0; n < 2 * MAX_RUNS && (k < MIN_RUNS || spent < seconds); k++, n++) {
        double t0 = now_seconds();
        run_dir(ctx, d, dir);
        times[n] = now_seconds() - t0;
        t0 = now_seconds();
        run_plan(plan, d, dir);
        plan_times[n] = now_seconds() - t0;
        spent += times[n] + plan_times[n];
    }
    return n;
}

static void pause_seconds(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Median time of fn over runs lasting MIN_RUNS and MIN_SECONDS (one warm-up first). */
typedef nconv_status (*timed_fn)(void *arg);

static double time_ms(timed_fn fn, void *arg, nconv_status *st) {
    double times[MAX_RUNS], spent = 0;
    int n = 0;
    if ((*st = fn(arg))) return 0;
    while (n < MAX_RUNS && (n < MIN_RUNS || spent < MIN_SECONDS)) {
        double t0 = now_seconds();
        fn(arg);
        times[n] = now_seconds() - t0;
        spent += times[n++];
    }
    return 1e3 * median(times, n);
}

/* Per-sample weight and bias gradients of a minibatch: B = the problem's
 * batch samples of batch 1 each, x and dy batched, w shared. */
typedef struct per_sample {
    nconv_context *ctx;
    nconv_problem one;
    nconv_batch bt;
    host_tensor x, dy, dw, db;
} per_sample;

static nconv_status run_per_sample(void *arg) {
    per_sample *ps = arg;
    return nconv_backward_batched(ps->ctx, &ps->one, NULL, &ps->bt, &ps->x.t, NULL, NULL, &ps->dy.t, NULL, &ps->dw.t,
                                  &ps->db.t, NULL);
}

/* The ordinary whole-batch backward-weights of the same problem, for scale. */
typedef struct whole_batch {
    nconv_context *ctx;
    run_data *d;
} whole_batch;

static nconv_status run_whole_bwd_w(void *arg) {
    whole_batch *wb = arg;
    return run_dir(wb->ctx, wb->d, 2);
}

static int bench_per_sample(nconv_context *ctx, const problem_list *l, nconv_layout layout, int threads, int csv) {
    if (csv) printf("name,desc,samples,threads,per_sample_ms,whole_batch_bwd_w_ms,ratio_to_whole\n");
    else printf("%-26s %7s %14s %18s %8s\n", "name", "samples", "per_sample_ms", "whole_bwd_w_ms", "ratio");
    int failures = 0;
    for (size_t k = 0; k < l->n; k++) {
        const cli_problem *cp = &l->items[k];
        if (cp->p.ndims > 2) continue; /* the 1D and 2D problems */
        per_sample ps;
        memset(&ps, 0, sizeof ps);
        ps.ctx = ctx;
        ps.one = cp->p;
        ps.one.batch = 1;
        const int64_t B = cp->p.batch;
        int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], oc = cp->p.out_channels;
        char desc[512] = "";
        nconv_problem_to_desc(&cp->p, desc, sizeof desc);
        const int r = cp->p.ndims + 2;
        if (B < 1 || nconv_problem_shapes(&ps.one, xs, ws, ys) || to_tensor_batch(NULL, B, r, xs, NCONV_F32, layout, &ps.x) ||
            to_tensor_batch(NULL, B, r, ys, NCONV_F32, layout, &ps.dy) || to_tensor_batch(NULL, B, r, ws, NCONV_F32, layout, &ps.dw) ||
            to_tensor_batch(NULL, B, 1, &oc, NCONV_F32, layout, &ps.db)) {
            fprintf(stderr, "nconv: %s: cannot set up the per-sample problem (out of memory)\n", desc);
            failures++;
            free(ps.x.buf), free(ps.dy.buf), free(ps.dw.buf), free(ps.db.buf);
            continue;
        }
        ps.bt = (nconv_batch){B, ps.x.batch_stride, 0, 0, 0, 0, ps.dy.batch_stride, 0, ps.dw.batch_stride, ps.db.batch_stride, 0};
        nconv_status st;
        const double ms = time_ms(run_per_sample, &ps, &st);
        run_data d;
        double whole = 0;
        const int no_memory = !st && run_data_init(&d, &cp->p, layout, 11);
        if (!st && !no_memory) {
            whole_batch wb = {ctx, &d};
            whole = time_ms(run_whole_bwd_w, &wb, &st);
            run_data_free(&d);
        }
        if (st || no_memory) {
            fprintf(stderr, "nconv: %s: %s\n", desc, no_memory ? "cannot allocate the operands (out of memory)" : nconv_last_error());
            failures++;
        } else if (csv) {
            printf("%s,%s,%lld,%d,%.4f,%.4f,%.3f\n", cp->name, desc, (long long)B, threads, ms, whole, ms / whole);
        } else {
            printf("%-26s %7lld %14.3f %18.3f %8.2f\n", cp->name, (long long)B, ms, whole, ms / whole);
        }
        fflush(stdout);
        host_tensor *all[] = {&ps.x, &ps.dy, &ps.dw, &ps.db};
        for (int i = 0; i < 4; i++) free(all[i]->buf);
    }
    return failures ? EXIT_CHECK_FAILED : 0;
}

int cmd_bench(int argc, char **argv) {
    suite_opts o = {{1, 1, 1}, 0, 0, 0, NCONV_F32, NCONV_PAD_ZEROS, 1, NCONV_LAYOUT_NCX, 0, NULL, 0};
    problem_list l = {0};
    int csv = 0, peer = 1, per_sample = 0;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--transposed")) o.transposed = 1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--csv")) {
            csv = 1;
            continue;
        }
        if (!strcmp(argv[i], "--no-onednn")) {
            peer = 0;
            continue;
        }
        if (!strcmp(argv[i], "--per-sample")) {
            per_sample = 1;
            continue;
        }
        int r = suite_option(argc, argv, &i, &o, &l);
        if (r < 0) return list_free(&l), EXIT_INVALID;
        if (r == 0) return list_free(&l), cli_fail("bench: unknown option '%s'", argv[i]);
    }
    int progress = 0;
    if (!l.n) {
        char err[512];
        if (list_add_batch_text(&l, default_suite, "default suite", o.transposed, err, sizeof err))
            return cli_fail("%s", err);
        progress = 1;
    }
    suite_apply(&o, &l);
    nconv_layout layouts[2] = {NCONV_LAYOUT_NCX, NCONV_LAYOUT_NXC};
    int nlayouts = 2;
    if (o.layout_set) layouts[0] = o.layout, nlayouts = 1;
    if (o.cuda) {
        if (per_sample) return list_free(&l), cli_fail("--per-sample: not with --device cuda");
        const int rc = bench_cuda(&l, &o, layouts, nlayouts, csv, progress);
        list_free(&l);
        return rc;
    }
    peer = peer && onednn_available();
    nconv_context *ctx;
    if (nconv_context_create(&ctx)) return list_free(&l), cli_fail("%s", nconv_last_error() + strlen("nconv: "));
    nconv_context_set_threads(ctx, o.threads);
    if (o.algo && strcmp(o.algo, "auto")) {
        if (!strcmp(o.algo, "benchmark")) nconv_context_set_policy(ctx, NCONV_POLICY_BENCHMARK);
        else if (nconv_context_set_algorithm(ctx, o.algo)) {
            int rc = cli_fail("--algo: %s", nconv_last_error() + strlen("nconv: "));
            nconv_context_destroy(ctx);
            list_free(&l);
            return rc;
        }
    }
    if (per_sample) {
        const int rc = bench_per_sample(ctx, &l, o.layout, o.threads, csv);
        nconv_context_destroy(ctx);
        list_free(&l);
        return rc;
    }
    const double peak = fma_peak_gflops(o.threads), mem = memory_bandwidth_gbs(o.threads);
    if (csv) {
        printf(BENCH_CSV_HEADER);
    } else {
        printf("# threads %d, FMA peak %.1f GFLOP/s, memory %.1f GB/s (measured), oneDNN peer: %s\n", o.threads, peak,
               mem, peer ? "yes" : "not built in");
        printf("%-26s %-5s %-6s %9s %8s %6s %7s %-8s %9s %-22s %6s %9s %6s\n", "name", "dir", "layout", "ms",
               "GFLOP/s", "%peak", "GB/s", "algo", "onednn_ms", "onednn_impl", "ratio", "plan_ms", "p_rat");
    }
    int failures = 0;
    totals tot[3][2];
    memset(tot, 0, sizeof tot);
    for (size_t k = 0; k < l.n; k++) {
        cli_problem *cp = &l.items[k];
        char desc[512];
        if (nconv_problem_to_desc(&cp->p, desc, sizeof desc)) {
            fprintf(stderr, "nconv: %s: %s\n", cp->text, nconv_last_error());
            failures++;
            continue;
        }
        double flops;
        nconv_problem_flops(&cp->p, &flops);
        const double bytes = problem_bytes(&cp->p);
        for (int dir = 0; dir < 3; dir++) {
            if (!o.dirs[dir]) continue;
            if (progress) fprintf(stderr, "[%zu/%zu] %s %s\n", k + 1, l.n, cp->name, dir_names[dir]);
            char impl[128] = "";
            onednn_peer *dnnl = peer ? onednn_create(&cp->p, dir, o.threads, impl, sizeof impl) : NULL;
            for (int li = 0; li < nlayouts; li++) {
                run_data d;
                const char *algo = "?";
                nconv_plan *plan = NULL;
                if (run_data_init(&d, &cp->p, layouts[li], 7 + k)) {
                    fprintf(stderr, "nconv: %s %s: cannot allocate the operands (out of memory)\n", desc,
                            dir_names[dir]);
                    failures++;
                    continue;
                }
                if (run_dir(ctx, &d, dir) || run_plan_create(ctx, &d, dir, layouts[li], &plan) ||
                    run_plan(plan, &d, dir) || nconv_plan_algorithm(plan, core_dir(&cp->p, dir), &algo)) {
                    fprintf(stderr, "nconv: %s %s: %s\n", desc, dir_names[dir], nconv_last_error());
                    failures++;
                    nconv_plan_destroy(plan);
                    run_data_free(&d);
                    continue;
                }
                /* nconv, then oneDNN, then nconv again: the peer sits in the middle,
                 * so a drift of this shared machine reaches both alike. Not finer
                 * turns: oneDNN's OpenMP threads spin for milliseconds after each
                 * execution, taking the cores from whatever runs next (measured:
                 * nconv 1.45x slower at 2 threads right after oneDNN), so nconv
                 * resumes only after a pause. */
                double times[2 * MAX_RUNS], plan_times[2 * MAX_RUNS], dnnl_times[MAX_RUNS];
                int n = time_runs(ctx, &d, dir, plan, MIN_SECONDS, times, plan_times, 0), nd = 0;
                int have_peer = dnnl != NULL;
                if (have_peer) {
                    double spent = 0;
                    have_peer = !onednn_run(dnnl); /* warm-up */
                    while (have_peer && nd < MAX_RUNS && (nd < MIN_RUNS || spent < MIN_SECONDS)) {
                        const double t0 = now_seconds();
                        have_peer = !onednn_run(dnnl);
                        dnnl_times[nd] = now_seconds() - t0;
                        spent += dnnl_times[nd++];
                    }
                    pause_seconds(PEER_PAUSE);
                }
                n = time_runs(ctx, &d, dir, plan, MIN_SECONDS, times, plan_times, n);
                nconv_plan_destroy(plan);
                run_data_free(&d);
                const double ms = 1e3 * median(times, n), gf = flops / (ms * 1e-3) * 1e-9;
                const double gbs = bytes / (ms * 1e-3) * 1e-9;
                const double plan_ms = 1e3 * median(plan_times, n);
                const double dnnl_ms = have_peer ? 1e3 * median(dnnl_times, nd) : 0;
                const double pct = peak > 0 ? 100 * gf / peak : 0, ratio = have_peer ? dnnl_ms / ms : 0;
                const double plan_ratio = have_peer ? dnnl_ms / plan_ms : 0;
                const char *lname = layouts[li] == NCONV_LAYOUT_NXC ? "nhwc" : "nchw";
                totals *t = &tot[dir][li];
                t->ms += ms, t->flops += flops, t->plan_ms += plan_ms;
                if (have_peer) {
                    t->onednn_ms_paired += dnnl_ms, t->ms_paired += ms, t->log_ratio += log(ratio), t->n_ratio++;
                    t->plan_ms_paired += plan_ms, t->log_plan_ratio += log(plan_ratio);
                }
                if (csv) {
                    printf("%s,%s,%s,%s,%d,%s,%.4f,%.2f,", cp->name, desc, dir_names[dir], lname, o.threads, algo, ms, gf);
                    if (peak > 0) printf("%.1f", pct);
                    if (have_peer) printf(",%.4f,%s,%.3f,%.4f,%.3f", dnnl_ms, impl, ratio, plan_ms, plan_ratio);
                    else printf(",,,,%.4f,", plan_ms);
                    printf(",%.4g,", gbs); /* significant digits: tiny problems under a checker move KB/s */
                    if (mem > 0) printf("%.1f", mem);
                    printf("\n");
                } else {
                    printf("%-26s %-5s %-6s %9.3f %8.2f %6.1f %7.2f %-8s", cp->name, dir_names[dir], lname, ms, gf, pct,
                           gbs, algo);
                    if (have_peer) printf(" %9.3f %-22s %6.2f %9.3f %6.2f\n", dnnl_ms, impl, ratio, plan_ms, plan_ratio);
                    else printf(" %9s %-22s %6s %9.3f %6s\n", "-", "-", "-", plan_ms, "-");
                }
                fflush(stdout);
            }
            onednn_destroy(dnnl);
        }
    }
    if (!csv)
        for (int dir = 0; dir < 3; dir++)
            for (int li = 0; li < nlayouts; li++) {
                const totals *t = &tot[dir][li];
                if (t->ms <= 0) continue;
                printf("# %-5s %s: total %.3f ms (planned %.3f), %.2f GFLOP/s", dir_names[dir],
                       layouts[li] == NCONV_LAYOUT_NXC ? "nhwc" : "nchw", t->ms, t->plan_ms,
                       t->flops / (t->ms * 1e-3) * 1e-9);
                if (t->n_ratio)
                    printf("; vs oneDNN: geomean ratio %.3f, total-time ratio %.3f; planned: %.3f, %.3f",
                           exp(t->log_ratio / t->n_ratio), t->onednn_ms_paired / t->ms_paired,
                           exp(t->log_plan_ratio / t->n_ratio), t->onednn_ms_paired / t->plan_ms_paired);
                printf("\n");
            }
    nconv_context_destroy(ctx);
    list_free(&l);
    return failures ? EXIT_CHECK_FAILED : 0;
}
