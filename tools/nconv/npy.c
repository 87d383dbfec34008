/* NumPy .npy reader and writer: format versions 1-3, little-endian f2/f4/f8 and
 * complex c8/c16, C or Fortran order (converted to C order on reading). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/internal.h" /* half-precision conversions */

static int err_out(char *err, size_t cap, const char *path, const char *why) {
    snprintf(err, cap, "%s: %s", path, why);
    return -1;
}

/* The header dict, parsed as NumPy's reader accepts what its writer makes: a Python dict
 * literal with exactly the keys 'descr' (a string), 'fortran_order' (True or False) and
 * 'shape' (a tuple of non-negative decimal integers), each once, in any order, a trailing
 * comma allowed; blanks between tokens; after the closing brace only blanks. */
typedef struct header_parser {
    const char *s, *end;
    char *why; /* the first problem found */
    size_t cap;
} header_parser;

/* Records "malformed header: <what><arg>". */
static int hp_fail(header_parser *h, const char *what, const char *arg) {
    snprintf(h->why, h->cap, "malformed header: %s%s", what, arg ? arg : "");
    return -1;
}

/* Control characters as '?', for messages. */
static void printable(char *s) {
    for (; *s; s++)
        if (*s < 0x20 || *s == 0x7f) *s = '?';
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static void hp_skip(header_parser *h) {
    while (h->s < h->end && is_blank(*h->s)) h->s++;
}

/* The text at the position, quoted for a message: its first `len` characters (0: up to a blank),
 * at most 16, control characters as '?'. */
typedef struct near_text {
    char s[24];
} near_text;

static near_text hp_near(const header_parser *h, size_t len) {
    near_text t;
    if (h->s >= h->end) return snprintf(t.s, sizeof t.s, "the end of the header"), t;
    size_t n = 0;
    t.s[n++] = '\'';
    for (const char *q = h->s; q < h->end && n <= 16 && (len ? (size_t)(q - h->s) < len : !is_blank(*q)); q++)
        t.s[n++] = *q < 0x20 || *q == 0x7f ? '?' : *q;
    t.s[n++] = '\'';
    t.s[n] = '\0';
    return t;
}

/* The character c after blanks, else a message "expected <what>, found ...". */
static int hp_expect(header_parser *h, char c, const char *what) {
    hp_skip(h);
    if (h->s < h->end && *h->s == c) {
        h->s++;
        return 0;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "expected %s, found ", what);
    return hp_fail(h, msg, hp_near(h, 0).s);
}

/* A quoted string without escapes into out (at most cap - 1 characters). */
static int hp_string(header_parser *h, char *out, size_t cap) {
    hp_skip(h);
    if (h->s >= h->end || (*h->s != '\'' && *h->s != '"'))
        return hp_fail(h, "expected a quoted string, found ", hp_near(h, 0).s);
    const char q = *h->s++;
    size_t n = 0;
    for (; h->s < h->end && *h->s != q; h->s++) {
        if (*h->s == '\\' || *h->s == '\n') return hp_fail(h, *h->s == '\\' ? "a backslash in a string" : "a newline in a string", NULL);
        if (n + 1 >= cap) return hp_fail(h, "a string too long for a key or a dtype", NULL);
        out[n++] = *h->s;
    }
    if (h->s >= h->end) return hp_fail(h, "an unterminated string", NULL);
    h->s++;
    out[n] = '\0';
    return 0;
}

/* The length of the Python name at the position (identifier characters). */
static size_t hp_word(const header_parser *h) {
    size_t n = 0;
    while (h->s + n < h->end && (h->s[n] == '_' || (h->s[n] >= 'a' && h->s[n] <= 'z') ||
                                 (h->s[n] >= 'A' && h->s[n] <= 'Z') || (h->s[n] >= '0' && h->s[n] <= '9')))
        n++;
    return n;
}

static int hp_bool(header_parser *h, int *v) {
    hp_skip(h);
    const size_t n = hp_word(h);
    if (n == 4 && !strncmp(h->s, "True", 4)) *v = 1;
    else if (n == 5 && !strncmp(h->s, "False", 5)) *v = 0;
    else return hp_fail(h, "'fortran_order' must be True or False, found ", hp_near(h, n ? n : 1).s);
    h->s += n;
    return 0;
}

static int hp_shape(header_parser *h, npy_array *a) {
    if (hp_expect(h, '(', "'(' to open the shape tuple")) return -1;
    int64_t span = 1; /* the product with 0s read as 1s, bounded: numel and an empty array's dims */
    a->numel = 1;
    for (;;) {
        hp_skip(h);
        if (h->s < h->end && *h->s == ')') break;
        if (h->s >= h->end || *h->s < '0' || *h->s > '9')
            return hp_fail(h, "expected a dimension (a non-negative integer) or ')', found ", hp_near(h, 0).s);
        if (a->ndim == 8) return hp_fail(h, "a shape of more than 8 dims", NULL);
        if (*h->s == '0' && h->s + 1 < h->end && h->s[1] >= '0' && h->s[1] <= '9')
            return hp_fail(h, "a dimension with a leading zero, ", hp_near(h, 0).s);
        int64_t v = 0;
        for (; h->s < h->end && *h->s >= '0' && *h->s <= '9'; h->s++)
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *h->s - '0', &v) || v > ((int64_t)1 << 40))
                return hp_fail(h, "a dimension above 2^40", NULL);
        if (hp_word(h)) return hp_fail(h, "a dimension followed by ", hp_near(h, 0).s);
        if (__builtin_mul_overflow(span, v > 0 ? v : 1, &span) || span > ((int64_t)1 << 40))
            return hp_fail(h, "a shape of more than 2^40 elements", NULL);
        a->numel *= v;
        a->shape[a->ndim++] = v;
        hp_skip(h);
        if (h->s < h->end && *h->s == ',') {
            h->s++;
            continue;
        }
        if (h->s < h->end && *h->s == ')') {
            /* (n) is an integer in Python, not a tuple */
            if (a->ndim == 1) return hp_fail(h, "a one-dimensional shape without its comma, as in (n,)", NULL);
            break;
        }
        return hp_fail(h, "expected ',' or ')' in the shape, found ", hp_near(h, 0).s);
    }
    h->s++;
    return 0;
}

/* Parses the header text [s, end) into a (shape, numel), descr and *fortran. */
static int parse_header(const char *s, const char *end, npy_array *a, char *descr, size_t dcap, int *fortran,
                        char *why, size_t cap) {
    header_parser h = {s, end, why, cap};
    for (const char *q = s; q < end; q++)
        if ((unsigned char)*q >= 0x80 || *q == '\0') {
            char what[64];
            snprintf(what, sizeof what, "byte 0x%02x at offset %d (only ASCII text may appear)", (unsigned char)*q,
                     (int)(q - s));
            return hp_fail(&h, what, NULL);
        }
    if (hp_expect(&h, '{', "'{' to open the header dict")) return -1;
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    int seen[3] = {0, 0, 0};
    for (;;) {
        hp_skip(&h);
        if (h.s < h.end && *h.s == '}') break;
        char key[32], msg[128];
        if (hp_string(&h, key, sizeof key)) return -1;
        int k = 0;
        while (k < 3 && strcmp(key, keys[k])) k++;
        printable(key);
        if (k < 3 && seen[k]++) snprintf(msg, sizeof msg, "the key '%s' given twice", key);
        if (k == 3) snprintf(msg, sizeof msg, "the key '%s' (the keys are descr, fortran_order and shape)", key);
        if (k == 3 || seen[k] > 1) return hp_fail(&h, msg, NULL);
        if (hp_expect(&h, ':', "':' after a key")) return -1;
        if ((k == 0 && hp_string(&h, descr, dcap)) || (k == 1 && hp_bool(&h, fortran)) || (k == 2 && hp_shape(&h, a)))
            return -1;
        hp_skip(&h);
        if (h.s < h.end && *h.s == ',') {
            h.s++;
            continue;
        }
        if (h.s < h.end && *h.s == '}') break;
        return hp_fail(&h, "expected ',' or '}' after a value, found ", hp_near(&h, 0).s);
    }
    h.s++;
    for (int k = 0; k < 3; k++)
        if (!seen[k]) {
            char msg[64];
            snprintf(msg, sizeof msg, "the key '%s' is missing", keys[k]);
            return hp_fail(&h, msg, NULL);
        }
    hp_skip(&h);
    if (h.s < h.end) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s after the dict (only blanks may follow it)", hp_near(&h, 0).s);
        return hp_fail(&h, msg, NULL);
    }
    return 0;
}

int npy_read(const char *path, npy_array *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) {
        char why[256];
        snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
        return err_out(err, errcap, path, why);
    }
    int rc = npy_read_stream(f, path, a, err, errcap);
    fclose(f);
    return rc;
}

/* Bytes from the position to the end of a seekable stream, -1 if unknown. */
static long remaining(FILE *f) {
    long pos = ftell(f);
    if (pos < 0 || fseek(f, 0, SEEK_END)) return -1;
    long end = ftell(f);
    if (fseek(f, pos, SEEK_SET) || end < pos) return -1;
    return end - pos;
}

/* Reads n bytes into *out. The buffer grows with what arrives (from `first` bytes, doubling),
 * so a stream that holds less than its header claims costs at most twice what it holds.
 * 0: read; 1: the stream ended first; -1: out of memory. */
static int read_bytes(FILE *f, size_t n, size_t first, unsigned char **out) {
    size_t cap = n < first ? n : first, got = 0;
    unsigned char *buf = malloc(cap ? cap : 1);
    while (buf && got < n) {
        if (got == cap) {
            const size_t more = cap > n - cap ? n : 2 * cap;
            unsigned char *b = realloc(buf, more);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b, cap = more;
        }
        const size_t r = fread(buf + got, 1, cap - got, f);
        if (!r) break;
        got += r;
    }
    if (!buf) return -1;
    if (got < n) {
        free(buf);
        return 1;
    }
    *out = buf;
    return 0;
}

int npy_read_stream(FILE *f, const char *path, npy_array *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    unsigned char pre[12];
    int rc = -1;
    char *h = NULL;
    unsigned char *raw = NULL;
    char why[256];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        err_out(err, errcap, path, "not a .npy file (bad magic)");
        goto done;
    }
    size_t hlen;
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0) {
        snprintf(why, sizeof why, "unsupported .npy format version %u.%u (expected 1.0, 2.0 or 3.0)", pre[6], pre[7]);
        err_out(err, errcap, path, why);
        goto done;
    }
    if (pre[6] == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else {
        if (fread(pre + 10, 1, 2, f) != 2) {
            err_out(err, errcap, path, "truncated header");
            goto done;
        }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hlen > 10000) { /* NumPy's own reader refuses longer headers by default */
        snprintf(why, sizeof why, "malformed header: %zu bytes long, more than NumPy's limit of 10000", hlen);
        err_out(err, errcap, path, why);
        goto done;
    }
    h = malloc(hlen + 1);
    if (!h || fread(h, 1, hlen, f) != hlen) {
        err_out(err, errcap, path, h ? "truncated header" : "out of memory");
        goto done;
    }
    char descr[32];
    int fortran = 0;
    if (parse_header(h, h + hlen, a, descr, sizeof descr, &fortran, why, sizeof why)) {
        a->ndim = 0;
        err_out(err, errcap, path, why);
        goto done;
    }
    size_t isz; /* bytes of one real number; a complex element is two */
    a->parts = 1;
    if (!strcmp(descr, "<f2")) strcpy(a->descr, "f2"), isz = 2;
    else if (!strcmp(descr, "<f4")) strcpy(a->descr, "f4"), isz = 4;
    else if (!strcmp(descr, "<f8")) strcpy(a->descr, "f8"), isz = 8;
    else if (!strcmp(descr, "<c8")) strcpy(a->descr, "c8"), isz = 4, a->parts = 2;
    else if (!strcmp(descr, "<c16")) strcpy(a->descr, "c16"), isz = 8, a->parts = 2;
    else {
        printable(descr);
        snprintf(why, sizeof why, "unsupported .npy dtype '%s' (expected <f2, <f4, <f8, <c8 or <c16)", descr);
        err_out(err, errcap, path, why);
        goto done;
    }
    const size_t nbytes = (size_t)a->numel * isz * (size_t)a->parts; /* numel <= 2^40 (hp_shape) */
    /* A seekable file must hold exactly the data; a stream is read as far as it goes. */
    const long left = remaining(f);
    if (left >= 0 && (size_t)left != nbytes) {
        err_out(err, errcap, path,
                (size_t)left < nbytes ? "truncated data (file shorter than its shape says)"
                                      : "trailing bytes after the data");
        goto done;
    }
    const int got = read_bytes(f, nbytes, left >= 0 ? nbytes : (size_t)1 << 20, &raw);
    if (got) {
        err_out(err, errcap, path, got < 0 ? "out of memory" : "truncated data (file shorter than its shape says)");
        goto done;
    }
    if (fgetc(f) != EOF) {
        err_out(err, errcap, path, "trailing bytes after the data");
        goto done;
    }
    a->data = malloc(sizeof(double) * (size_t)a->parts * (size_t)(a->numel ? a->numel : 1));
    if (!a->data) {
        err_out(err, errcap, path, "out of memory");
        goto done;
    }
    int64_t stride[8];
    for (int64_t k = a->ndim - 1, mul = 1; k >= 0; k--) stride[k] = mul, mul *= a->shape[k];
    for (int64_t i = 0; i < a->numel; i++) {
        /* Destination index: C order; source index i is Fortran order when set. */
        int64_t dst = i;
        if (fortran && a->ndim > 1) {
            int64_t rem = i;
            dst = 0;
            for (int k = 0; k < a->ndim; k++) {
                dst += (rem % a->shape[k]) * stride[k];
                rem /= a->shape[k];
            }
        }
        for (int part = 0; part < a->parts; part++) {
            const unsigned char *src = raw + isz * (size_t)(a->parts * i + part);
            double v;
            if (isz == 2) {
                uint16_t u;
                memcpy(&u, src, 2);
                v = nconv__f16_to_f32(u);
            } else if (isz == 4) {
                float x;
                memcpy(&x, src, 4);
                v = x;
            } else {
                memcpy(&v, src, 8);
            }
            a->data[a->parts * dst + part] = v;
        }
    }
    rc = 0;
done:
    if (rc) npy_free(a);
    free(raw);
    free(h);
    return rc;
}

int npy_write_fd(int fd, const char *name, const void *data, const char *descr, int ndim, const int64_t *shape,
                 char *err, size_t errcap) {
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<%s', 'fortran_order': False, 'shape': (", descr);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld%s", (long long)shape[i], ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
        if (!nconv__mul_ok(numel, shape[i], &numel)) return err_out(err, errcap, name, "shape overflows int64");
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    /* Pad with spaces so that the data starts at a multiple of 64 bytes. */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    memset(hdr + n, ' ', (size_t)pad);
    n += pad;
    hdr[n++] = '\n';
    const size_t isz = !strcmp(descr, "f2") ? 2 : !strcmp(descr, "f4") ? 4 : !strcmp(descr, "c16") ? 16 : 8;
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
    const struct { const void *p; size_t n; } parts[3] = {{pre, 10}, {hdr, (size_t)n}, {data, isz * (size_t)numel}};
    for (int k = 0; k < 3; k++)
        for (size_t done = 0; done < parts[k].n;) {
            const ssize_t w = write(fd, (const char *)parts[k].p + done, parts[k].n - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                char why[256];
                snprintf(why, sizeof why, "write failed: %s", w < 0 ? strerror(errno) : "no progress");
                return err_out(err, errcap, name, why);
            }
            done += (size_t)w;
        }
    return 0;
}

int npy_make_complex(npy_array *a) {
    if (a->parts == 2) return 0;
    double *d = malloc(2 * sizeof(double) * (size_t)(a->numel ? a->numel : 1));
    if (!d) return -1;
    for (int64_t i = 0; i < a->numel; i++) d[2 * i] = a->data[i], d[2 * i + 1] = 0.0;
    free(a->data);
    a->data = d;
    a->parts = 2;
    snprintf(a->descr, sizeof a->descr, "%s", !strcmp(a->descr, "f8") ? "c16" : "c8");
    return 0;
}

void npy_free(npy_array *a) {
    free(a->data);
    a->data = NULL;
}

int npy_move_axis_front(npy_array *a, int k) {
    if (k == 0) return 0;
    /* [outer][K][inner] -> [K][outer][inner] */
    int64_t outer, inner, K = a->shape[k];
    if (cli_numel(k, a->shape, &outer) || cli_numel(a->ndim - k - 1, a->shape + k + 1, &inner)) return -1;
    /* An empty array moves no data (its other dims may multiply to 2^40: fuzz_npy timed out). */
    if (a->numel > 0) {
        inner *= a->parts; /* in doubles */
        double *d = malloc(sizeof(double) * (size_t)a->parts * (size_t)a->numel);
        if (!d) return -1;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < K; j++)
                memcpy(d + (j * outer + o) * inner, a->data + (o * K + j) * inner, sizeof(double) * (size_t)inner);
        free(a->data);
        a->data = d;
    }
    for (int i = k; i > 0; i--) a->shape[i] = a->shape[i - 1];
    a->shape[0] = K;
    return 0;
}
