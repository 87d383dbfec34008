/* Shared pieces of the nconv command-line tool. */
#ifndef NCONV_CLI_H
#define NCONV_CLI_H

#include "nconv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 a check failed or the library failed, 2 invalid input. */
enum { EXIT_CHECK_FAILED = 1, EXIT_INVALID = 2 };

/* Prints "nconv: <message>" on stderr (one line) and returns EXIT_INVALID. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whole-string parses: no trailing characters, in range. Return 0 on success. */
int parse_i64(const char *s, int64_t *v);
int parse_f64(const char *s, double *v);
/* "3" or "1,2,3": n values (one value repeats); returns 0 on success. */
int parse_i64_list(const char *s, int n, int64_t *out);
int parse_dtype(const char *s, nconv_dtype *dt);
const char *dtype_str(nconv_dtype dt);
int parse_padding_mode(const char *s, nconv_padding_mode *m);

/* Flag scanning: matches "--name" (value in the next argument) or
 * "--name=value". Returns 1 and sets *val when argv[*i] is that flag. */
int flag_value(int argc, char **argv, int *i, const char *name, const char **val);

double now_seconds(void);
/* The bytes any direction of p moves at least: x, w and y (or their gradients) once each, in
 * p's dtype (bias and db, a value per output channel, left out); 0 for an invalid p. */
double problem_bytes(const nconv_problem *p);
/* The header of `nconv bench --csv` (docs/cli.md): a contract other tools read. */
#define BENCH_CSV_HEADER                                                                                 \
    "name,desc,dir,layout,threads,algo,ms,gflops,peak_pct,onednn_ms,onednn_impl,ratio,plan_ms,plan_ratio," \
    "gbs,mem_gbs\n"
/* Median of n > 0 values (sorts them). */
double median(double *v, int n);
/* Measured FMA peak over `threads` threads in GFLOP/s; 0 when unknown. */
double fma_peak_gflops(int threads);
/* The same with a given vector width: 8 (AVX2) or 16 (AVX-512) lanes; 0 when the CPU lacks it. */
double fma_peak_gflops_lanes(int threads, int lanes);
/* Measured memory bandwidth over `threads` threads in GB/s (STREAM's triad, bandwidth.c); 0 when
 * unknown. */
double memory_bandwidth_gbs(int threads);
/* The oneDNN peer (onednn.c): whether it was built in; one problem and
 * direction (0 fwd, 1 bwd_d, 2 bwd_w) as a primitive created once (NULL when
 * oneDNN is absent or refuses it; impl receives its implementation name),
 * one execution of it (0 on success), and its release. */
typedef struct onednn_peer onednn_peer;
int onednn_available(void);
onednn_peer *onednn_create(const nconv_problem *p, int dir, int threads, char *impl, size_t cap);
int onednn_run(onednn_peer *peer);
void onednn_destroy(onednn_peer *peer);
/* Deterministic uniform values in [-1, 1). */
uint64_t rng_next(uint64_t *state);
double rng_uniform(uint64_t *state);

/* benchdnn descriptors. */
typedef struct cli_problem {
    nconv_problem p;
    char name[128];
    char text[512]; /* the descriptor as written */
} cli_problem;

/* Parses one descriptor; transposed selects benchdnn's deconvolution reading
 * (ic/ih are the transposed convolution's input). On failure returns nonzero
 * and writes a message to err. */
int desc_parse(const char *s, int transposed, cli_problem *out, char *err, size_t errcap);

/* A list of problems from descriptors on the command line or a batch file. */
typedef struct problem_list {
    cli_problem *items;
    size_t n, cap;
} problem_list;

int list_add_desc(problem_list *l, const char *desc, int transposed, char *err, size_t errcap);
/* Lines: descriptors separated by blanks, `#` comments, `--transposed` before
 * a descriptor. */
int list_add_batch_text(problem_list *l, const char *text, const char *origin, int transposed, char *err,
                        size_t errcap);
int list_add_batch_file(problem_list *l, const char *path, int transposed, char *err, size_t errcap);
void list_free(problem_list *l);

/* Options shared by check and bench for building the problem list. */
typedef struct suite_opts {
    int dirs[3];        /* fwd, bwd_d, bwd_w selected */
    int64_t mb;         /* > 0 overrides the batch */
    int transposed;     /* global --transposed */
    int dtype_set;
    nconv_dtype dtype;
    nconv_padding_mode mode;
    int threads;
    nconv_layout layout;
    int layout_set;     /* --layout given */
    const char *algo;
    int cuda;           /* --device cuda: CUDA device 0 */
} suite_opts;

/* Parses the options common to check and bench at argv[*i]; returns 1 if one
 * was consumed, 0 if not a common option, -1 on error (message printed). */
int suite_option(int argc, char **argv, int *i, suite_opts *o, problem_list *l);
/* Applies --mb, --dtype, --padding-mode to every problem. */
void suite_apply(const suite_opts *o, problem_list *l);
int parse_dirs(const char *s, int dirs[3]);

/* .npy files (little-endian f2, f4, f8; C or Fortran order). */
typedef struct npy_array {
    int ndim;
    int64_t shape[8];
    int64_t numel;
    char descr[8]; /* "f2", "f4", "f8", "c8", "c16" */
    int parts;     /* 1 real, 2 complex */
    double *data;  /* C order: numel * parts values, a complex element as (real, imaginary) */
} npy_array;

int npy_read(const char *path, npy_array *a, char *err, size_t errcap);
/* The same from an open stream; path names it in messages. */
int npy_read_stream(FILE *f, const char *path, npy_array *a, char *err, size_t errcap);
/* Writes a C-order array of the given dtype (bf16 data must be given as f32) to an open file;
 * name names it in messages, which carry the system's reason. */
int npy_write_fd(int fd, const char *name, const void *data, const char *descr, int ndim, const int64_t *shape,
                 char *err, size_t errcap);
void npy_free(npy_array *a);
/* A real array as a complex one (imaginary parts zero); 0 on success. */
int npy_make_complex(npy_array *a);
/* Moves dim k to the front (C order), reordering the data. */
int npy_move_axis_front(npy_array *a, int k);

/* The outputs of one run, all or nothing: each is written to a new file in the
 * directory, and only when all are written and flushed do they replace (rename
 * over) the named files, symbolic links replaced and not followed. A failure
 * leaves every file in the directory as it was (outdir.c). */
enum { OUTDIR_MAX = 10 };
typedef struct out_dir {
    const char *dir;
    int created; /* the directory did not exist */
    int n;
    struct out_file {
        const char *name;
        char tmp[4200], dst[4200], bak[4200];
        int fd, has_bak, placed;
    } f[OUTDIR_MAX];
} out_dir;

/* Creates (if missing) the directory and a new file for each name, checking that every name is
 * free or a file (not a directory). 0, or EXIT_INVALID with a message naming flag (--out). */
int outdir_open(out_dir *o, const char *flag, const char *dir, const char *const *names, int n);
/* The open file for output k. */
int outdir_fd(const out_dir *o, int k);
/* Flushes the files and puts them in place; 0, or EXIT_CHECK_FAILED with a message, everything as
 * it was. */
int outdir_commit(out_dir *o);
/* Removes what outdir_open made (no-op after a commit). */
void outdir_abort(out_dir *o);

/* The product of shape[0..rank) into *n: 0, or -1 when it overflows int64 or exceeds
 * NCONV_MAX_ELEMENTS. */
int cli_numel(int rank, const int64_t *shape, int64_t *n);

/* A tensor owned by the CLI. */
typedef struct host_tensor {
    nconv_tensor t;
    void *buf;
    int64_t batch_stride; /* elements between the slices of a batched tensor */
} host_tensor;

/* A C-order f64 array (NULL: zeros) into a new buffer of dtype dt in the given layout. */
int to_tensor(const double *src, int rank, const int64_t *shape, nconv_dtype dt, nconv_layout layout, host_tensor *h);
/* The same for `batch` slices of that shape, one after another (src: batch C-order slices). */
int to_tensor_batch(const double *src, int64_t batch, int rank, const int64_t *shape, nconv_dtype dt,
                    nconv_layout layout, host_tensor *h);

/* Random operands and output buffers for one problem, as check and bench use them. */
typedef struct run_data {
    nconv_problem p;
    int rank;
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    host_tensor x, w, b, dy, y, dx, dw, db;
} run_data;

int run_data_init(run_data *d, const nconv_problem *p, nconv_layout layout, uint64_t seed);
void run_data_free(run_data *d);
/* dir 0: y = conv(x, w) + b; 1: dx; 2: dw and db. */
nconv_status run_dir(nconv_context *ctx, run_data *d, int dir);
/* A plan of direction dir of d for activations in `layout`: forward and dx with d's weights
 * (and bias) given once, dw and db with none; and one execution of it, as run_dir computes. */
nconv_status run_plan_create(nconv_context *ctx, run_data *d, int dir, nconv_layout layout, nconv_plan **plan);
nconv_status run_plan(const nconv_plan *plan, run_data *d, int dir);
/* User direction -> the core direction its algorithms run (transposed swaps fwd and bwd_d). */
nconv_direction core_dir(const nconv_problem *p, int dir);

/* d's operands again in device memory, same strides (cuda_rt.c; 0 on success), and their release. */
int run_data_to_device(const run_data *h, run_data *dv);
void run_data_free_device(run_data *dv);
/* `nconv bench --device cuda` (bench_cuda.c): the problems of l on CUDA device 0. */
int bench_cuda(const problem_list *l, const suite_opts *o, const nconv_layout *layouts, int nlayouts, int csv,
               int progress);

int cmd_compute(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
