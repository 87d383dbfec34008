/* NumPy .npy reader and writer: format versions 1-3, little-endian f2/f4/f8,
 * C or Fortran order (converted to C order on reading). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/internal.h" /* half-precision conversions */

static int err_out(char *err, size_t cap, const char *path, const char *why) {
    snprintf(err, cap, "%s: %s", path, why);
    return -1;
}

/* Finds the value text after 'key': in a header dict. */
static const char *dict_value(const char *h, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *k = strstr(h, pat);
    if (!k) return NULL;
    k += strlen(pat);
    while (*k == ' ') k++;
    if (*k != ':') return NULL;
    k++;
    while (*k == ' ') k++;
    return k;
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

int npy_read_stream(FILE *f, const char *path, npy_array *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    unsigned char pre[12];
    int rc = -1;
    char *h = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        err_out(err, errcap, path, "not a .npy file (bad magic)");
        goto done;
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            err_out(err, errcap, path, "truncated header");
            goto done;
        }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        err_out(err, errcap, path, "unsupported .npy format version");
        goto done;
    }
    if (hlen > (1u << 20)) {
        err_out(err, errcap, path, "malformed header (too long)");
        goto done;
    }
    h = malloc(hlen + 1);
    if (!h || fread(h, 1, hlen, f) != hlen) {
        err_out(err, errcap, path, "truncated header");
        goto done;
    }
    h[hlen] = '\0';
    const char *d = dict_value(h, "descr"), *fo = dict_value(h, "fortran_order"), *sh = dict_value(h, "shape");
    if (!d || !fo || !sh || *d != '\'' || *sh != '(') {
        err_out(err, errcap, path, "malformed header (needs descr, fortran_order, shape)");
        goto done;
    }
    size_t isz;
    if (!strncmp(d, "'<f2'", 5)) strcpy(a->descr, "f2"), isz = 2;
    else if (!strncmp(d, "'<f4'", 5)) strcpy(a->descr, "f4"), isz = 4;
    else if (!strncmp(d, "'<f8'", 5)) strcpy(a->descr, "f8"), isz = 8;
    else {
        char why[128];
        const char *q = strchr(d + 1, '\'');
        snprintf(why, sizeof why, "unsupported .npy dtype %.*s (expected <f2, <f4 or <f8)",
                 q ? (int)(q - d + 1) : 8, d);
        err_out(err, errcap, path, why);
        goto done;
    }
    int fortran;
    if (!strncmp(fo, "False", 5)) fortran = 0;
    else if (!strncmp(fo, "True", 4)) fortran = 1;
    else {
        err_out(err, errcap, path, "malformed header (fortran_order)");
        goto done;
    }
    const char *q = sh + 1;
    a->numel = 1;
    int64_t span = 1; /* the product with 0s read as 1s, bounded: numel (at most span) and an empty array's dims */
    for (;;) {
        while (*q == ' ') q++;
        if (*q == ')') break;
        if (*q < '0' || *q > '9' || a->ndim == 8) {
            err_out(err, errcap, path, "malformed header (shape)");
            goto done;
        }
        char *end;
        errno = 0;
        long long v = strtoll(q, &end, 10);
        if (errno || __builtin_mul_overflow(span, v > 0 ? (int64_t)v : 1, &span) || span > ((int64_t)1 << 40)) {
            err_out(err, errcap, path, "shape too large");
            goto done;
        }
        a->numel *= v;
        a->shape[a->ndim++] = v;
        q = end;
        while (*q == ' ') q++;
        if (*q == ',') q++;
        else if (*q != ')') {
            err_out(err, errcap, path, "malformed header (shape)");
            goto done;
        }
    }
    size_t nbytes = (size_t)a->numel * isz;
    /* Checked before allocating: a header may promise far more than the file holds. */
    const long left = remaining(f);
    if (left >= 0 && (size_t)left != nbytes) {
        err_out(err, errcap, path,
                (size_t)left < nbytes ? "truncated data (file shorter than its shape says)"
                                      : "trailing bytes after the data");
        goto done;
    }
    unsigned char *raw = malloc(nbytes ? nbytes : 1);
    a->data = malloc(sizeof(double) * (size_t)(a->numel ? a->numel : 1));
    if (!raw || !a->data) {
        free(raw);
        err_out(err, errcap, path, "out of memory");
        goto done;
    }
    if (fread(raw, 1, nbytes, f) != nbytes) {
        free(raw);
        err_out(err, errcap, path, "truncated data (file shorter than its shape says)");
        goto done;
    }
    int extra = fgetc(f);
    if (extra != EOF) {
        free(raw);
        err_out(err, errcap, path, "trailing bytes after the data");
        goto done;
    }
    for (int64_t i = 0; i < a->numel; i++) {
        /* Destination index: C order; source index i is Fortran order when set. */
        int64_t dst = i;
        if (fortran && a->ndim > 1) {
            int64_t rem = i, mul = 1;
            dst = 0;
            int64_t stride[8];
            for (int k = a->ndim - 1; k >= 0; k--) stride[k] = mul, mul *= a->shape[k];
            for (int k = 0; k < a->ndim; k++) {
                dst += (rem % a->shape[k]) * stride[k];
                rem /= a->shape[k];
            }
        }
        double v;
        if (isz == 2) {
            uint16_t u;
            memcpy(&u, raw + 2 * i, 2);
            v = nconv__f16_to_f32(u);
        } else if (isz == 4) {
            float x;
            memcpy(&x, raw + 4 * i, 4);
            v = x;
        } else {
            memcpy(&v, raw + 8 * i, 8);
        }
        a->data[dst] = v;
    }
    free(raw);
    rc = 0;
done:
    if (rc) npy_free(a);
    free(h);
    return rc;
}

int npy_write(const char *path, const void *data, const char *descr, int ndim, const int64_t *shape, char *err,
              size_t errcap) {
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<%s', 'fortran_order': False, 'shape': (", descr);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld%s", (long long)shape[i], ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
        numel *= shape[i];
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    /* Pad with spaces so that the data starts at a multiple of 64 bytes. */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    memset(hdr + n, ' ', (size_t)pad);
    n += pad;
    hdr[n++] = '\n';
    size_t isz = descr[1] == '2' ? 2 : descr[1] == '4' ? 4 : 8;
    FILE *f = fopen(path, "wb");
    if (!f) {
        char why[256];
        snprintf(why, sizeof why, "cannot create: %s", strerror(errno));
        return err_out(err, errcap, path, why);
    }
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n &&
             fwrite(data, isz, (size_t)numel, f) == (size_t)numel;
    ok = (fclose(f) == 0) && ok;
    if (!ok) return err_out(err, errcap, path, "write failed");
    return 0;
}

void npy_free(npy_array *a) {
    free(a->data);
    a->data = NULL;
}

int npy_move_axis_front(npy_array *a, int k) {
    if (k == 0) return 0;
    /* [outer][K][inner] -> [K][outer][inner] */
    int64_t outer = 1, inner = 1, K = a->shape[k];
    for (int i = 0; i < k; i++) outer *= a->shape[i];
    for (int i = k + 1; i < a->ndim; i++) inner *= a->shape[i];
    /* An empty array moves no data (its other dims may multiply to 2^40: fuzz_npy timed out). */
    if (a->numel > 0) {
        double *d = malloc(sizeof(double) * (size_t)a->numel);
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
