/* nconv: command-line front end of the nconv library. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: nconv <command> [options]\n"
    "\n"
    "commands:\n"
    "  compute   run one convolution on .npy files (PyTorch semantics)\n"
    "            --x X.npy --w W.npy [--b B.npy] --out DIR [--stride S] [--padding P|same|valid]\n"
    "            [--pad-end E] [--dilation D] [--groups G] [--transposed] [--output-padding OP]\n"
    "            [--padding-mode zeros|reflect|replicate|circular] [--z Z.npy] [--alpha A] [--relu]\n"
    "            [--dy DY.npy] [--ggx GGX.npy] [--ggw GGW.npy] [--ggb GGB.npy] [--x-bdim K] [--w-bdim K]\n"
    "            [--b-bdim K] [--z-bdim K] [--dy-bdim K] [--dtype f32|f64|f16|bf16] [--layout ncx|nxc]\n"
    "            [--algo NAME|auto|benchmark] [--threads N]\n"
    "  check     compare every applicable algorithm with the reference\n"
    "            [--dir fwd,bwd_d,bwd_w] [--mb N] [--dtype T] [--padding-mode M] [--layout ncx|nxc]\n"
    "            [--threads N] [--algo NAME] [--transposed] (DESC... | --batch FILE)\n"
    "  bench     time problems (default: the embedded suite)\n"
    "            [--dir ...] [--threads N] [--mb N] [--csv] [--layout ncx|nxc] [--algo NAME]\n"
    "            [--no-onednn] [--per-sample] [--transposed] [DESC... | --batch FILE]\n"
    "  algos     list the algorithms\n"
    "  help      this text\n"
    "\n"
    "DESC is a oneDNN benchdnn convolution descriptor, e.g. mb8ic64ih56oc64oh56kh3ph1n\"name\".\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_INVALID;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "compute")) return cmd_compute(argc - 2, argv + 2);
    if (!strcmp(cmd, "check")) return cmd_check(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(cmd, "algos")) {
        for (int i = 0; i < nconv_algorithm_count(); i++) puts(nconv_algorithm_name(i));
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage, stdout);
        return 0;
    }
    fputs(usage, stderr);
    return cli_fail("unknown command '%s'", cmd);
}
