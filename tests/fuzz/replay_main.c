/*
 * A main for fuzz targets built without libFuzzer: runs the target once on
 * every file named on the command line (directories: every file in them),
 * so the corpus is a regression test in any build.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "cannot open %s\n", path), 1;
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            unsigned char *g = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!g) return free(buf), fclose(f), 1;
            buf = g;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got) break;
        n += got;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) return fprintf(stderr, "cannot stat %s\n", argv[i]), 1;
        if (!S_ISDIR(st.st_mode)) {
            bad += run_file(argv[i]), files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            bad += run_file(path), files++;
        }
        if (d) closedir(d);
    }
    printf("%d inputs replayed, %d unreadable\n", files, bad);
    return bad || files == 0;
}
