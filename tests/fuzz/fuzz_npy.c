/*
 * Fuzz target: the .npy reader (tools/nconv/npy.c), on in-memory files.
 * Any bytes must load or be refused with a message, and never allocate
 * more than the file could hold.
 */
#include "../../tools/nconv/cli.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size == 0) return 0;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return 0;
    npy_array a;
    char err[512];
    err[0] = '\0';
    if (npy_read_stream(f, "fuzz.npy", &a, err, sizeof err)) {
        if (!err[0]) abort();
    } else {
        int64_t n = 1;
        for (int i = 0; i < a.ndim; i++) n *= a.shape[i];
        if (n != a.numel) abort();
        double s = 0;
        for (int64_t i = 0; i < a.numel; i++) s += a.data[i]; /* every element readable */
        (void)s;
        if (a.ndim > 1) npy_move_axis_front(&a, a.ndim - 1);
        npy_free(&a);
    }
    fclose(f);
    return 0;
}
