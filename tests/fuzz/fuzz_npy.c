/*
 * Fuzz target: the .npy reader (tools/nconv/npy.c), on in-memory files, each
 * read twice: as a seekable file and as a stream that cannot seek (a pipe's
 * case, where the reader cannot learn the size first). Any bytes must load,
 * with the same result both ways, or be refused with a message both ways,
 * and never allocate more than the file could hold: an allocation of over
 * 64 MiB from an input of at most a few KiB is a finding.
 */
#define _GNU_SOURCE
#include "../../tools/nconv/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=64"; }

typedef struct cursor {
    const unsigned char *p;
    size_t n, at;
} cursor;

static ssize_t cursor_read(void *c, char *buf, size_t n) {
    cursor *k = c;
    const size_t m = n < k->n - k->at ? n : k->n - k->at;
    memcpy(buf, k->p + k->at, m);
    k->at += m;
    return (ssize_t)m;
}

/* 0: read (into a), 1: refused with a message. */
static int read_one(FILE *f, npy_array *a) {
    char err[512];
    err[0] = '\0';
    if (!f) abort();
    const int rc = npy_read_stream(f, "fuzz.npy", a, err, sizeof err);
    fclose(f);
    if (rc && !err[0]) abort();
    return rc != 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size == 0) return 0;
    npy_array a, b;
    cursor c = {data, size, 0};
    const int ra = read_one(fmemopen((void *)data, size, "rb"), &a);
    const int rb = read_one(fopencookie(&c, "rb", (cookie_io_functions_t){cursor_read, NULL, NULL, NULL}), &b);
    if (ra != rb) abort();
    if (ra) return 0;
    if (a.ndim != b.ndim || a.numel != b.numel || memcmp(a.shape, b.shape, sizeof a.shape) ||
        strcmp(a.descr, b.descr) || a.parts != b.parts || memcmp(a.data, b.data, sizeof(double) * (size_t)(a.numel * a.parts)))
        abort();
    int64_t n = 1;
    for (int i = 0; i < a.ndim; i++) n *= a.shape[i];
    if (n != a.numel) abort();
    if (a.ndim > 1) npy_move_axis_front(&a, a.ndim - 1);
    npy_free(&a);
    npy_free(&b);
    return 0;
}
