/* nconv: command-line front end of the nconv library. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static int cmd_algos(int argc, char **argv) {
    if (argc > 0) return cli_fail("algos: unknown option '%s'", argv[0]);
    for (int i = 0; i < nconv_algorithm_count(); i++) puts(nconv_algorithm_name(i));
    return 0;
}

typedef struct command {
    const char *name;
    const char *summary;
    const char *options; /* the usage after the name, one or more lines */
    int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"compute", "run one convolution on .npy files (PyTorch semantics)",
     "--x X.npy --w W.npy [--b B.npy] --out DIR [--stride S] [--padding P|same|valid]\n"
     "[--pad-end E] [--dilation D] [--groups G] [--transposed] [--output-padding OP]\n"
     "[--padding-mode zeros|reflect|replicate|circular] [--z Z.npy] [--alpha A] [--relu]\n"
     "[--dy DY.npy] [--ggx GGX.npy] [--ggw GGW.npy] [--ggb GGB.npy] [--tx TX.npy] [--tw TW.npy]\n"
     "[--tb TB.npy] [--tz TZ.npy] [--x-bdim K] [--w-bdim K]\n"
     "[--b-bdim K] [--z-bdim K] [--dy-bdim K] [--ggx-bdim K] [--ggw-bdim K] [--ggb-bdim K]\n"
     "[--dtype f32|f64|f16|bf16|c64|c128] [--layout ncx|nxc]\n"
     "[--algo NAME|auto|benchmark] [--threads N]",
     cmd_compute},
    {"check", "compare every applicable algorithm with the reference",
     "[--dir fwd,bwd_d,bwd_w] [--mb N] [--dtype T] [--padding-mode M] [--layout ncx|nxc]\n"
     "[--threads N] [--algo NAME] [--device cpu|cuda] [--transposed] (DESC... | --batch FILE)",
     cmd_check},
    {"bench", "time problems (default: the embedded suite)",
     "[--dir ...] [--threads N] [--mb N] [--csv] [--layout ncx|nxc] [--algo NAME]\n"
     "[--no-onednn] [--per-sample] [--device cpu|cuda] [--transposed] [DESC... | --batch FILE]",
     cmd_bench},
    {"algos", "list the algorithms", "", cmd_algos},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static const char desc_note[] =
    "DESC is a oneDNN benchdnn convolution descriptor, e.g. mb8ic64ih56oc64oh56kh3ph1n\"name\".\n"
    "docs/cli.md describes every option.\n";

/* The options, each line indented under the command. */
static void print_options(FILE *f, const char *options, const char *indent) {
    while (*options) {
        const char *nl = strchr(options, '\n');
        size_t n = nl ? (size_t)(nl - options) : strlen(options);
        fprintf(f, "%s%.*s\n", indent, (int)n, options);
        options += n + (nl != NULL);
    }
}

static void print_usage(FILE *f) {
    fputs("usage: nconv <command> [options]\n       nconv help <command> | nconv <command> --help\n\ncommands:\n", f);
    for (int i = 0; i < NCOMMANDS; i++) {
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
        print_options(f, commands[i].options, "            ");
    }
    fprintf(f, "  %-9s %s\n\n%s", "help", "this text, or one command's", desc_note);
}

static void print_command_usage(const command *c) {
    printf("usage: nconv %s%s\n", c->name, *c->options ? " [options]" : "");
    printf("\n%s.\n", c->summary);
    if (*c->options) {
        puts("\noptions:");
        print_options(stdout, c->options, "  ");
    }
    if (strcmp(c->name, "algos")) printf("\n%s", desc_note);
}

static const command *find_command(const char *name) {
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

static int is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_INVALID;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || is_help(cmd)) {
        if (argc == 2) {
            print_usage(stdout);
            return 0;
        }
        const command *c = find_command(argv[2]);
        if (!c) return cli_fail("help: unknown command '%s' (commands: compute, check, bench, algos)", argv[2]);
        if (argc > 3) return cli_fail("help: takes one command, got '%s' too", argv[3]);
        print_command_usage(c);
        return 0;
    }
    const command *c = find_command(cmd);
    if (!c) {
        print_usage(stderr);
        return cli_fail("unknown command '%s'", cmd);
    }
    for (int i = 2; i < argc; i++)
        if (is_help(argv[i])) {
            print_command_usage(c);
            return 0;
        }
    return c->run(argc - 2, argv + 2);
}
