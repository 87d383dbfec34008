/*
 * oneDNN benchdnn convolution descriptors, read as benchdnn reads them:
 *   gX mbX icX idX ihX iwX ocX odX ohX owX kdX khX kwX sdX shX swX pdX phX pwX
 *   ddX dhX dwX nNAME     ('_' separators optional, dilation 0 = none)
 * Defaults: g 1, mb 2, stride 1. A missing output is computed from the
 * padding (default 0); a missing padding from the output. Dims that are
 * not given copy the next larger one (square / cubic), or default to 1.
 * The end padding is derived from the output size and may be negative.
 * With `transposed`, ic/i* describe the transposed convolution's input and
 * oc/o* its output (benchdnn's deconvolution driver).
 * Every number, given or derived (output size, padding), is at most
 * NUM_MAX, so that the descriptor of any problem parsed parses back.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_G, F_MB, F_IC, F_ID, F_IH, F_IW, F_OC, F_OD, F_OH, F_OW, F_KD, F_KH, F_KW,
       F_SD, F_SH, F_SW, F_PD, F_PH, F_PW, F_DD, F_DH, F_DW, F_COUNT };
static const char *const tokens[F_COUNT] = {"g",  "mb", "ic", "id", "ih", "iw", "oc", "od", "oh", "ow", "kd",
                                            "kh", "kw", "sd", "sh", "sw", "pd", "ph", "pw", "dd", "dh", "dw"};

enum { NUM_MAX_LOG2 = 40 };
#define NUM_MAX (INT64_C(1) << NUM_MAX_LOG2)

static int fail(char *err, size_t cap, const char *desc, const char *why) {
    snprintf(err, cap, "descriptor '%s': %s", desc, why);
    return -1;
}

/* Per spatial axis (0 = d, 1 = h, 2 = w): o, i, k, s, p, d. */
typedef struct axis {
    int64_t o, i, k, s, p, d;
} axis;

int desc_parse(const char *str, int transposed, cli_problem *out, char *err, size_t errcap) {
    int64_t v[F_COUNT];
    for (int f = 0; f < F_COUNT; f++) v[f] = 0;
    v[F_G] = 1;
    v[F_MB] = 2;
    v[F_SD] = v[F_SH] = v[F_SW] = 1;
    v[F_PD] = v[F_PH] = v[F_PW] = -1;
    char name[128] = "";
    const char *s = str;
    while (*s) {
        if (*s == '_') {
            s++;
            continue;
        }
        if (*s == 'n') {
            const char *nm = s + 1;
            size_t len = strlen(nm);
            if (len >= 2 && nm[0] == '"' && nm[len - 1] == '"') nm++, len -= 2;
            if (len >= sizeof name) len = sizeof name - 1;
            memcpy(name, nm, len);
            name[len] = '\0';
            break;
        }
        int f = 0;
        for (; f < F_COUNT; f++)
            if (!strncmp(s, tokens[f], strlen(tokens[f]))) break;
        if (f == F_COUNT) {
            char why[96];
            snprintf(why, sizeof why, "unknown token at '%.20s'", s);
            return fail(err, errcap, str, why);
        }
        s += strlen(tokens[f]);
        if (*s < '0' || *s > '9') {
            char why[96];
            snprintf(why, sizeof why, "'%s' needs a non-negative integer", tokens[f]);
            return fail(err, errcap, str, why);
        }
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (errno || x > NUM_MAX) {
            char why[96];
            snprintf(why, sizeof why, "'%s': number out of range (at most 2^%d)", tokens[f], NUM_MAX_LOG2);
            return fail(err, errcap, str, why);
        }
        v[f] = x;
        s = end;
    }
    if (v[F_G] <= 0) return fail(err, errcap, str, "g must be >= 1");
    if (v[F_MB] < 0) return fail(err, errcap, str, "mb must be >= 0");
    if (v[F_IC] == 0 || v[F_OC] == 0) return fail(err, errcap, str, "ic and oc must be given and >= 1");
    if (v[F_SD] <= 0 || v[F_SH] <= 0 || v[F_SW] <= 0) return fail(err, errcap, str, "strides must be >= 1");

    axis ax[3];
    for (int a = 0; a < 3; a++) {
        ax[a].o = v[F_OD + a];
        ax[a].i = v[F_ID + a];
        ax[a].k = v[F_KD + a];
        ax[a].s = v[F_SD + a];
        ax[a].p = v[F_PD + a];
        ax[a].d = v[F_DD + a];
    }
    for (int a = 0; a < 3; a++) {
        axis *x = &ax[a];
        const int absent = (x->i | x->k | x->o | x->d) == 0 && x->s == 1 && x->p < 1;
        if (absent) continue;
        if (!x->i || !x->k) return fail(err, errcap, str, "a spatial dim needs both its input size and kernel");
        /* Operands are at most NUM_MAX + 1, so a product below 2^61 keeps
         * the sums below from overflowing. */
        const int64_t prod_max = INT64_C(1) << 61;
        const char *const too_large = "kernel extent or strided size out of range";
        if (x->k - 1 > prod_max / (x->d + 1) || x->i - 1 > prod_max / x->s || x->o > prod_max / x->s)
            return fail(err, errcap, str, too_large);
        const int64_t ext = (x->k - 1) * (x->d + 1) + 1;
        if (!x->o) {
            if (x->p < 0) x->p = 0;
            x->o = transposed ? (x->i - 1) * x->s + ext - 2 * x->p : (x->i - ext + 2 * x->p) / x->s + 1;
            if (x->o <= 0) return fail(err, errcap, str, "computed output size < 1");
            if (x->o > NUM_MAX) return fail(err, errcap, str, "computed output size out of range");
            if (x->o > prod_max / x->s) return fail(err, errcap, str, too_large);
        } else if (x->p < 0) {
            x->p = transposed ? ((x->i - 1) * x->s - x->o + ext) / 2 : ((x->o - 1) * x->s - x->i + ext) / 2;
            if (x->p > NUM_MAX) return fail(err, errcap, str, "computed padding out of range");
        }
    }
    /* Rank from the outputs; missing smaller dims copy the larger ones. */
    const int no_d = ax[0].o == 0, no_h = ax[1].o == 0, no_w = ax[2].o == 0;
    int nd = 3;
    if (no_d) nd--;
    if (no_d && no_h) nd--;
    if (no_d && no_h && no_w) return fail(err, errcap, str, "no spatial dimension given");
    if (nd == 3) {
        if (no_h && no_w) ax[1] = ax[2] = ax[0];
        else if (no_h || no_w) return fail(err, errcap, str, "3D problem with only one of h and w given");
    } else if (nd == 2 && no_w) {
        ax[2] = ax[1];
    }
    const axis def = {1, 1, 1, 1, 0, 0};
    if (nd < 3) ax[0] = def;
    if (nd < 2) ax[1] = def;

    memset(out, 0, sizeof *out);
    nconv_problem *p = &out->p;
    nconv_problem_init(p, nd);
    p->batch = v[F_MB];
    p->in_channels = v[F_IC];
    p->out_channels = v[F_OC];
    p->groups = v[F_G];
    p->transposed = transposed;
    for (int k = 0; k < nd; k++) {
        const axis *x = &ax[3 - nd + k];
        const int64_t ext = (x->k - 1) * (x->d + 1) + 1;
        p->in_size[k] = x->i;
        p->kernel[k] = x->k;
        p->stride[k] = x->s;
        p->dilation[k] = x->d + 1;
        p->pad_begin[k] = x->p;
        p->pad_end[k] = transposed ? (x->i - 1) * x->s - x->o + ext - x->p : (x->o - 1) * x->s - x->i + ext - x->p;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->text, sizeof out->text, "%s%s", transposed ? "--transposed " : "", str);
    if (nconv_problem_validate(p)) {
        char why[600];
        snprintf(why, sizeof why, "%s", nconv_last_error());
        return fail(err, errcap, str, why);
    }
    return 0;
}

int list_add_desc(problem_list *l, const char *desc, int transposed, char *err, size_t errcap) {
    cli_problem cp;
    if (desc_parse(desc, transposed, &cp, err, errcap)) return -1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        cli_problem *g = realloc(l->items, cap * sizeof *g);
        if (!g) return snprintf(err, errcap, "out of memory"), -1;
        l->items = g;
        l->cap = cap;
    }
    l->items[l->n++] = cp;
    return 0;
}

int list_add_batch_text(problem_list *l, const char *text, const char *origin, int transposed, char *err,
                        size_t errcap) {
    int lineno = 0;
    const char *s = text;
    while (*s) {
        const char *eol = strchr(s, '\n');
        size_t len = eol ? (size_t)(eol - s) : strlen(s);
        lineno++;
        char line[1024];
        if (len >= sizeof line) return snprintf(err, errcap, "%s:%d: line too long", origin, lineno), -1;
        memcpy(line, s, len);
        line[len] = '\0';
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        int line_transposed = 0;
        char *save = NULL;
        for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
            if (!strcmp(t, "--transposed")) {
                line_transposed = 1;
                continue;
            }
            if (t[0] == '-') return snprintf(err, errcap, "%s:%d: unknown option '%s'", origin, lineno, t), -1;
            char e2[700];
            if (list_add_desc(l, t, transposed || line_transposed, e2, sizeof e2))
                return snprintf(err, errcap, "%s:%d: %s", origin, lineno, e2), -1;
            line_transposed = 0;
        }
        s += len + (eol ? 1 : 0);
    }
    return 0;
}

int list_add_batch_file(problem_list *l, const char *path, int transposed, char *err, size_t errcap) {
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, errcap, "--batch %s: cannot open: %s", path, strerror(errno)), -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *g = cap < (1u << 26) ? realloc(buf, cap *= 2) : NULL;
            if (!g) {
                free(buf);
                buf = NULL;
            }
            buf = g;
        }
    }
    fclose(f);
    if (!buf) return snprintf(err, errcap, "--batch %s: too large or out of memory", path), -1;
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return snprintf(err, errcap, "--batch %s: not a text file", path), -1;
    }
    int r = list_add_batch_text(l, buf, path, transposed, err, errcap);
    free(buf);
    return r;
}

void list_free(problem_list *l) {
    free(l->items);
    memset(l, 0, sizeof *l);
}
