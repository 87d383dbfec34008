/* All-or-nothing outputs of nconv compute (see out_dir in cli.h). Each output
 * goes to a new file beside its destination (O_EXCL: never through an existing
 * name or link); the commit flushes them, keeps each file it replaces under a
 * second name (a hard link, or where the file system has none, the file moved
 * aside), renames the new files over the destinations, and on a failure puts
 * the kept ones back, so the directory ends as it was. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A name beside dst that no file has: dst's directory, "." + dst's name + "." + tag + a number. */
static int fresh_name(const out_dir *o, const char *name, const char *tag, char *buf, size_t cap, unsigned *seq) {
    struct stat st;
    for (int tries = 0; tries < 1000; tries++, (*seq)++) {
        snprintf(buf, cap, "%s/.%s.%s-%ld-%u", o->dir, name, tag, (long)getpid(), *seq);
        if (lstat(buf, &st) && errno == ENOENT) return 0;
    }
    return -1;
}

int outdir_open(out_dir *o, const char *flag, const char *dir, const char *const *names, int n) {
    memset(o, 0, sizeof *o);
    o->dir = dir;
    for (int k = 0; k < OUTDIR_MAX; k++) o->f[k].fd = -1;
    if (strlen(dir) > 4000) return cli_fail("%s: a path of %zu characters is too long", flag, strlen(dir));
    if (n > OUTDIR_MAX) return cli_fail("%s: %d outputs, at most %d", flag, n, OUTDIR_MAX);
    if (!mkdir(dir, 0777)) o->created = 1;
    else if (errno != EEXIST) return cli_fail("%s = '%s': cannot create the directory: %s", flag, dir, strerror(errno));
    struct stat st;
    const int e = stat(dir, &st) ? errno : 0;
    if (e || !S_ISDIR(st.st_mode)) {
        outdir_abort(o);
        return cli_fail("%s = '%s': not a directory%s%s", flag, dir, e ? ": " : "", e ? strerror(e) : "");
    }
    unsigned seq = 0;
    for (int k = 0; k < n; k++) {
        struct out_file *f = &o->f[k];
        f->name = names[k];
        snprintf(f->dst, sizeof f->dst, "%s/%s", dir, names[k]);
        o->n = k + 1;
        if (!lstat(f->dst, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            outdir_abort(o);
            return cli_fail("%s = '%s': %s exists and is not a file, so it cannot be replaced", flag, dir, names[k]);
        }
        if (fresh_name(o, names[k], "new", f->tmp, sizeof f->tmp, &seq) ||
            (f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666)) < 0) {
            const int why = errno;
            f->tmp[0] = '\0';
            outdir_abort(o);
            return cli_fail("%s = '%s': cannot create a file there: %s", flag, dir, strerror(why));
        }
    }
    return 0;
}

int outdir_fd(const out_dir *o, int k) { return o->f[k].fd; }

/* Undoes the commit so far: each replaced file back in place, each new one removed. */
static void roll_back(out_dir *o) {
    for (int k = 0; k < o->n; k++) {
        struct out_file *f = &o->f[k];
        if (f->placed && !f->has_bak) unlink(f->dst);
        if (f->has_bak) rename(f->bak, f->dst), unlink(f->bak), f->has_bak = 0;
        f->placed = 0;
    }
    outdir_abort(o);
}

int outdir_commit(out_dir *o) {
    for (int k = 0; k < o->n; k++) {
        struct out_file *f = &o->f[k];
        const int bad = fsync(f->fd) && errno != EINVAL && errno != EROFS;
        const int e = errno;
        const int closed = close(f->fd);
        f->fd = -1;
        if (bad || closed) {
            fprintf(stderr, "nconv: %s: cannot write %s: %s\n", o->dir, f->name, strerror(bad ? e : errno));
            outdir_abort(o);
            return EXIT_CHECK_FAILED;
        }
    }
    unsigned seq = 0;
    struct stat st;
    for (int k = 0; k < o->n; k++) {
        struct out_file *f = &o->f[k];
        /* The file it replaces stays reachable until every rename has succeeded: a second
         * link to it, or where the file system has none, the file moved aside. */
        if (!lstat(f->dst, &st)) {
            if (fresh_name(o, f->name, "old", f->bak, sizeof f->bak, &seq) ||
                (link(f->dst, f->bak) && rename(f->dst, f->bak))) {
                const int e = errno;
                roll_back(o);
                fprintf(stderr, "nconv: %s: cannot keep %s while replacing it: %s (no output changed)\n", o->dir,
                        f->name, strerror(e));
                return EXIT_CHECK_FAILED;
            }
            f->has_bak = 1;
        }
        if (rename(f->tmp, f->dst)) {
            const int e = errno;
            roll_back(o);
            fprintf(stderr, "nconv: %s: cannot replace %s: %s (no output changed)\n", o->dir, f->name, strerror(e));
            return EXIT_CHECK_FAILED;
        }
        f->placed = 1, f->tmp[0] = '\0';
    }
    for (int k = 0; k < o->n; k++)
        if (o->f[k].has_bak) unlink(o->f[k].bak), o->f[k].has_bak = 0;
    const int dfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) fsync(dfd), close(dfd); /* the renames themselves, where the file system allows it */
    o->n = 0, o->created = 0;
    return 0;
}

void outdir_abort(out_dir *o) {
    for (int k = 0; k < o->n; k++) {
        struct out_file *f = &o->f[k];
        if (f->fd >= 0) close(f->fd), f->fd = -1;
        if (f->tmp[0]) unlink(f->tmp), f->tmp[0] = '\0';
    }
    o->n = 0;
    if (o->created) rmdir(o->dir), o->created = 0;
}
