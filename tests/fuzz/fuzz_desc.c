/*
 * Fuzz target: benchdnn descriptors and batch files (tools/nconv/desc.c).
 * Any text must parse or be refused with a message; every problem parsed
 * must validate, and its rendering (nconv_problem_to_desc) must parse back
 * to the same problem.
 */
#include "../../tools/nconv/cli.h"

#include <stdlib.h>
#include <string.h>

static int same_problem(const nconv_problem *a, const nconv_problem *b) {
    if (a->ndims != b->ndims || a->batch != b->batch || a->in_channels != b->in_channels ||
        a->out_channels != b->out_channels || a->groups != b->groups || a->transposed != b->transposed)
        return 0;
    for (int i = 0; i < a->ndims; i++)
        if (a->in_size[i] != b->in_size[i] || a->kernel[i] != b->kernel[i] || a->stride[i] != b->stride[i] ||
            a->dilation[i] != b->dilation[i] || a->pad_begin[i] != b->pad_begin[i] || a->pad_end[i] != b->pad_end[i] ||
            a->output_padding[i] != b->output_padding[i])
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size > 1 << 16) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const int transposed = size > 0 && (data[0] & 1);
    problem_list l = {0};
    char err[1024];
    err[0] = '\0';
    if (list_add_batch_text(&l, text, "fuzz", transposed, err, sizeof err)) {
        if (!err[0]) abort(); /* a refusal always says why */
    }
    for (size_t i = 0; i < l.n; i++) {
        const nconv_problem *p = &l.items[i].p;
        if (nconv_problem_validate(p) != NCONV_OK) abort(); /* the parser only returns valid problems */
        char desc[1024];
        if (nconv_problem_to_desc(p, desc, sizeof desc) != NCONV_OK) abort();
        const char *d = desc;
        int tr = 0;
        if (!strncmp(d, "--transposed ", 13)) d += 13, tr = 1;
        cli_problem back;
        if (desc_parse(d, tr, &back, err, sizeof err) || !same_problem(p, &back.p)) abort();
        char repro[2048];
        nconv_problem_repro(p, NCONV_REPRO_CLI, repro, sizeof repro);
        nconv_problem_repro(p, NCONV_REPRO_PYTORCH, repro, sizeof repro);
    }
    list_free(&l);
    free(text);
    return 0;
}
