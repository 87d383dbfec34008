/*
 * Fuzz target: `nconv compute` in-process, its argument parsing and its
 * output path. An input is argument lines, then up to three small files:
 *
 *   ARG\nARG\n...[#FILE#contents of f0.npy[#FILE#f1.npy[#FILE#f2.npy]]]
 *
 * where an argument "@0".."@2" names that file and "@out" the output
 * directory, which holds a marker file. Every run must end with exit status
 * 0, 1 or 2; a failed run must leave the directory as it was (the marker
 * alone, unchanged), a good one the marker unchanged and no temporary file.
 * Everything happens in a scratch directory of the process's own: an input
 * whose path flags (--x ... --out) name anything else is skipped, and so is
 * one with an integer from 5 to 2^40 in magnitude, which bounds the work of
 * a run (larger ones stay: they exercise the size checks).
 */
#define _GNU_SOURCE
#include "../../tools/nconv/cli.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_ARGS = 48, MAX_ARG = 160, MAX_FILES = 3 };
static const char marker[] = "a marker that no run may change\n";

/* Large allocations fail instead of aborting the run (the CLI reports them), under ASan and
 * under ThreadSanitizer, which the checked builds replay the corpus with. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1:max_allocation_size_mb=256"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag;
    return ftw->level ? remove(path) : 0;
}

/* The scratch directory, made once and emptied before each input. */
static char scratch[64];

static void scratch_remove(void) {
    nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(scratch);
}

static int scratch_ready(void) {
    if (!scratch[0]) {
        snprintf(scratch, sizeof scratch, "/tmp/nconv-fuzz-cli-XXXXXX");
        if (!mkdtemp(scratch)) return scratch[0] = '\0', 0;
        atexit(scratch_remove);
    }
    return nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

static void in_scratch(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", scratch, name); }

static int write_file(const char *name, const unsigned char *p, size_t n) {
    char path[128];
    in_scratch(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    const int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The flags whose value is a path: it must be one of the scratch files. */
static int path_flag(const char *a, size_t n) {
    static const char *const flags[] = {"--x", "--w", "--b", "--z", "--dy", "--ggx", "--ggw", "--ggb", "--out"};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        if (strlen(flags[k]) == n && !strncmp(a, flags[k], n)) return 1;
    return 0;
}

/* "@0".."@2" and "@out" as paths in the scratch directory (1), else 0. */
static int scratch_path(const char *a, char *out, size_t cap) {
    if (!strcmp(a, "@out")) return in_scratch(out, cap, "out"), 1;
    if (a[0] == '@' && a[1] >= '0' && a[1] < '0' + MAX_FILES && !a[2]) {
        char name[8];
        snprintf(name, sizeof name, "f%c.npy", a[1]);
        return in_scratch(out, cap, name), 1;
    }
    return 0;
}

/* Whether an argument stays inside the scratch directory and keeps the run small. */
static int arg_allowed(const char *a) {
    char buf[MAX_ARG + 1];
    const size_t n = strlen(a);
    if (n > MAX_ARG) return 0;
    memcpy(buf, a, n + 1);
    const char *v = strchr(buf, '=');
    char *save = NULL;
    for (char *t = strtok_r(v ? (char *)v + 1 : buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t x;
        if (!parse_i64(t, &x) && (x > 4 || x < -4) && x < ((int64_t)1 << 40) && x > -((int64_t)1 << 40)) return 0;
    }
    return 1;
}

/* "out" holds the marker alone (failed), or the marker and no temporary file (done). */
static int out_as_expected(int done) {
    char path[128];
    in_scratch(path, sizeof path, "out");
    DIR *d = opendir(path);
    if (!d) return 0;
    int ok = 1, seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!strcmp(e->d_name, "keep")) seen = 1;
        else if (!done || e->d_name[0] == '.') ok = 0;
    }
    closedir(d);
    char buf[sizeof marker];
    in_scratch(path, sizeof path, "out/keep");
    FILE *f = fopen(path, "rb");
    const size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    return ok && seen && n == sizeof marker - 1 && !memcmp(buf, marker, n);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static const char sep[] = "#FILE#";
    const unsigned char *end = data + size, *args_end = memmem(data, size, sep, 6);
    if (!args_end) args_end = end;
    static char args[MAX_ARGS][MAX_ARG + 64];
    char *argv[MAX_ARGS + 1];
    int argc = 0, to_out = 0;
    if (!scratch_ready()) abort();
    for (const unsigned char *p = data; p < args_end && argc < MAX_ARGS;) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(args_end - p));
        const size_t n = (size_t)((nl ? nl : args_end) - p);
        if (n > MAX_ARG || memchr(p, '\0', n)) return 0;
        char a[MAX_ARG + 1];
        memcpy(a, p, n);
        a[n] = '\0';
        p = nl ? nl + 1 : args_end;
        /* a path: after a path flag, or as --flag=value */
        const char *eq = strchr(a, '=');
        const int after_flag = argc > 0 && path_flag(argv[argc - 1], strlen(argv[argc - 1]));
        char *dst = args[argc];
        if (after_flag || (eq && path_flag(a, (size_t)(eq - a)))) {
            const size_t keep = after_flag ? 0 : (size_t)(eq - a) + 1;
            memcpy(dst, a, keep);
            if (!scratch_path(a + keep, dst + keep, sizeof args[0] - keep)) return 0;
            to_out |= !strcmp(a + keep, "@out") && (after_flag ? !strcmp(argv[argc - 1], "--out") : !strncmp(a, "--out=", 6));
        } else {
            if (!arg_allowed(a)) return 0;
            memcpy(dst, a, n + 1);
        }
        argv[argc++] = dst;
    }
    argv[argc] = NULL;
    char out[128];
    in_scratch(out, sizeof out, "out");
    if (mkdir(out, 0777) || write_file("out/keep", (const unsigned char *)marker, sizeof marker - 1)) abort();
    const unsigned char *p = args_end;
    for (int k = 0; k < MAX_FILES && p < end; k++) {
        p += 6;
        const unsigned char *next = memmem(p, (size_t)(end - p), sep, 6);
        if (!next) next = end;
        char name[8];
        snprintf(name, sizeof name, "f%d.npy", k);
        if (write_file(name, p, (size_t)(next - p))) abort();
        p = next;
    }
    const int rc = cmd_compute(argc, argv);
    if (rc < 0 || rc > 2) abort();
    if (to_out && !out_as_expected(rc == 0)) {
        fprintf(stderr, "fuzz_cli: exit %d left --out changed\n", rc);
        abort();
    }
    return 0;
}
