/* Argument parsing and small helpers of the CLI. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/internal.h" /* checked arithmetic */

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("nconv: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_INVALID;
}

int cli_numel(int rank, const int64_t *shape, int64_t *n) {
    *n = 1;
    for (int i = 0; i < rank; i++)
        if (!nconv__mul_ok(*n, shape[i], n) || *n > NCONV_MAX_ELEMENTS) return -1;
    return 0;
}

int parse_i64(const char *s, int64_t *v) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || end == s || s[0] == ' ' || s[0] == '\t' || s[0] == '+') return -1;
    *v = x;
    return 0;
}

int parse_f64(const char *s, double *v) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(x) || s[0] == ' ' || s[0] == '\t') return -1;
    *v = x;
    return 0;
}

int parse_i64_list(const char *s, int n, int64_t *out) {
    if (!s || !*s) return -1;
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    int k = 0;
    char *save = NULL;
    if (buf[strlen(buf) - 1] == ',' || buf[0] == ',' || strstr(buf, ",,")) return -1;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (k >= n) return -1;
        if (parse_i64(t, &out[k++])) return -1;
    }
    if (k == 1)
        for (int i = 1; i < n; i++) out[i] = out[0];
    else if (k != n)
        return -1;
    return 0;
}

int parse_dtype(const char *s, nconv_dtype *dt) {
    if (!strcmp(s, "f32")) *dt = NCONV_F32;
    else if (!strcmp(s, "f64")) *dt = NCONV_F64;
    else if (!strcmp(s, "f16")) *dt = NCONV_F16;
    else if (!strcmp(s, "bf16")) *dt = NCONV_BF16;
    else if (!strcmp(s, "c64")) *dt = NCONV_C64;
    else if (!strcmp(s, "c128")) *dt = NCONV_C128;
    else return -1;
    return 0;
}

const char *dtype_str(nconv_dtype dt) {
    static const char *const n[] = {"f32", "f64", "f16", "bf16", "c64", "c128"};
    return (unsigned)dt <= NCONV_C128 ? n[dt] : "?";
}

int parse_padding_mode(const char *s, nconv_padding_mode *m) {
    if (!strcmp(s, "zeros")) *m = NCONV_PAD_ZEROS;
    else if (!strcmp(s, "reflect")) *m = NCONV_PAD_REFLECT;
    else if (!strcmp(s, "replicate")) *m = NCONV_PAD_REPLICATE;
    else if (!strcmp(s, "circular")) *m = NCONV_PAD_CIRCULAR;
    else return -1;
    return 0;
}

int flag_value(int argc, char **argv, int *i, const char *name, const char **val) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n)) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2)) {
        *val = NULL; /* the caller reports the missing value; values never start with "--" */
        return 1;
    }
    *val = argv[++*i];
    return 1;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double problem_bytes(const nconv_problem *p) {
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS], nx = 1, nw = 1, ny = 1;
    if (nconv_problem_shapes(p, xs, ws, ys)) return 0;
    for (int i = 0; i < p->ndims + 2; i++) nx *= xs[i], nw *= ws[i], ny *= ys[i];
    return (double)nconv_dtype_size(p->dtype) * ((double)nx + (double)nw + (double)ny);
}

uint64_t rng_next(uint64_t *s) {
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-52 - 1.0; }

int parse_dirs(const char *s, int dirs[3]) {
    dirs[0] = dirs[1] = dirs[2] = 0;
    char buf[64];
    if (!s || strlen(s) >= sizeof buf || !*s) return -1;
    strcpy(buf, s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "fwd")) dirs[0] = 1;
        else if (!strcmp(t, "bwd_d")) dirs[1] = 1;
        else if (!strcmp(t, "bwd_w")) dirs[2] = 1;
        else if (!strcmp(t, "all")) dirs[0] = dirs[1] = dirs[2] = 1;
        else return -1;
    }
    return 0;
}

int suite_option(int argc, char **argv, int *i, suite_opts *o, problem_list *l) {
    const char *v;
    char err[512];
    if (flag_value(argc, argv, i, "--dir", &v)) {
        if (!v || parse_dirs(v, o->dirs)) return cli_fail("--dir = '%s': expected fwd,bwd_d,bwd_w", v ? v : ""), -1;
    } else if (flag_value(argc, argv, i, "--mb", &v)) {
        if (!v || parse_i64(v, &o->mb) || o->mb < 0) return cli_fail("--mb = '%s': expected an integer >= 0", v ? v : ""), -1;
    } else if (flag_value(argc, argv, i, "--dtype", &v)) {
        if (!v || parse_dtype(v, &o->dtype)) return cli_fail("--dtype = '%s': expected f32, f64, f16, bf16, c64 or c128", v ? v : ""), -1;
        o->dtype_set = 1;
    } else if (flag_value(argc, argv, i, "--device", &v)) {
        if (!v || (strcmp(v, "cuda") && strcmp(v, "cpu")))
            return cli_fail("--device = '%s': expected cpu or cuda", v ? v : ""), -1;
        o->cuda = !strcmp(v, "cuda");
    } else if (flag_value(argc, argv, i, "--padding-mode", &v)) {
        if (!v || parse_padding_mode(v, &o->mode))
            return cli_fail("--padding-mode = '%s': expected zeros, reflect, replicate or circular", v ? v : ""), -1;
    } else if (flag_value(argc, argv, i, "--threads", &v)) {
        int64_t t;
        if (!v || parse_i64(v, &t) || t < 1 || t > 1024) return cli_fail("--threads = '%s': expected 1..1024", v ? v : ""), -1;
        o->threads = (int)t;
    } else if (flag_value(argc, argv, i, "--layout", &v)) {
        if (v && !strcmp(v, "ncx")) o->layout = NCONV_LAYOUT_NCX;
        else if (v && !strcmp(v, "nxc")) o->layout = NCONV_LAYOUT_NXC;
        else return cli_fail("--layout = '%s': expected ncx or nxc", v ? v : ""), -1;
        o->layout_set = 1;
    } else if (flag_value(argc, argv, i, "--algo", &v)) {
        if (!v) return cli_fail("--algo: missing value"), -1;
        o->algo = v;
    } else if (!strcmp(argv[*i], "--transposed")) {
        o->transposed = 1;
    } else if (flag_value(argc, argv, i, "--batch", &v)) {
        if (!v) return cli_fail("--batch: missing file name"), -1;
        if (list_add_batch_file(l, v, o->transposed, err, sizeof err)) return cli_fail("%s", err), -1;
    } else if (argv[*i][0] == '-' && argv[*i][1] == '-') {
        return 0;
    } else {
        if (list_add_desc(l, argv[*i], o->transposed, err, sizeof err)) return cli_fail("%s", err), -1;
    }
    return 1;
}

void suite_apply(const suite_opts *o, problem_list *l) {
    for (size_t k = 0; k < l->n; k++) {
        nconv_problem *p = &l->items[k].p;
        if (o->mb > 0) p->batch = o->mb;
        if (o->dtype_set) p->dtype = o->dtype;
        p->padding_mode = o->mode;
    }
}
