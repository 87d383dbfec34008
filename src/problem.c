/*
 * Problem descriptor: defaults, validation (PyTorch's convolution shape
 * checks and more), output geometry, FLOPs, benchdnn descriptor and
 * reproduction lines. Validation messages name the field and its value.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

nconv_status nconv_problem_init(nconv_problem *p, int ndims) {
    if (!p) return INVALID("problem is NULL");
    if (ndims < 1 || ndims > NCONV_MAX_SPATIAL)
        return INVALID("ndims = %d: must be 1, 2 or 3", ndims);
    memset(p, 0, sizeof *p);
    p->ndims = ndims;
    p->batch = 1;
    p->in_channels = p->out_channels = p->groups = 1;
    for (int i = 0; i < NCONV_MAX_SPATIAL; i++) {
        p->in_size[i] = p->kernel[i] = p->stride[i] = p->dilation[i] = 1;
    }
    p->padding_mode = NCONV_PAD_ZEROS;
    p->dtype = NCONV_F32;
    return NCONV_OK;
}

nconv_status nconv_problem_set_padding_same(nconv_problem *p) {
    if (!p) return INVALID("problem is NULL");
    if (p->ndims < 1 || p->ndims > NCONV_MAX_SPATIAL)
        return INVALID("ndims = %d: must be 1, 2 or 3", p->ndims);
    if (p->transposed) return INVALID("padding = same: not supported for transposed convolution");
    for (int i = 0; i < p->ndims; i++) {
        if (p->stride[i] != 1)
            return INVALID("padding = same: needs stride 1, got stride[%d] = %lld", i,
                           (long long)p->stride[i]);
        int64_t total;
        if (p->kernel[i] < 1 || p->dilation[i] < 1 || !nconv__mul_ok(p->dilation[i], p->kernel[i] - 1, &total))
            return INVALID("padding = same: kernel[%d] = %lld, dilation[%d] = %lld out of range", i,
                           (long long)p->kernel[i], i, (long long)p->dilation[i]);
        p->pad_begin[i] = total / 2;
        p->pad_end[i] = total - total / 2;
    }
    return NCONV_OK;
}

/* Output size along dim i of a problem whose scalar fields were checked. */
static nconv_status output_dim(const nconv_problem *p, int i, int64_t *out) {
    int64_t ext, t;
    if (!nconv__mul_ok(p->dilation[i], p->kernel[i] - 1, &ext))
        return INVALID("dilation[%d] * (kernel[%d] - 1) overflows int64", i, i);
    if (!p->transposed) {
        /* floor((in + pb + pe - ext - 1) / s) + 1 */
        if (!nconv__add_ok(p->in_size[i], p->pad_begin[i], &t) || !nconv__add_ok(t, p->pad_end[i], &t))
            return INVALID("in_size[%d] + pad_begin[%d] + pad_end[%d] = %lld + %lld + %lld overflows int64", i, i, i,
                           (long long)p->in_size[i], (long long)p->pad_begin[i], (long long)p->pad_end[i]);
        t = t - ext - 1;
        if (t < 0)
            return INVALID("output size < 1 along dim %d: in_size[%d] = %lld with pad_begin %lld, "
                           "pad_end %lld is smaller than the dilated kernel %lld",
                           i, i, (long long)p->in_size[i], (long long)p->pad_begin[i],
                           (long long)p->pad_end[i], (long long)(ext + 1));
        *out = t / p->stride[i] + 1;
    } else {
        /* (in - 1) * s - pb - pe + ext + op + 1 */
        if (!nconv__mul_ok(p->in_size[i] - 1, p->stride[i], &t) || !nconv__add_ok(t, ext, &t) ||
            !nconv__add_ok(t, p->output_padding[i] + 1, &t) || __builtin_sub_overflow(t, p->pad_begin[i], &t) ||
            __builtin_sub_overflow(t, p->pad_end[i], &t))
            return INVALID("transposed output size along dim %d overflows int64: (in_size - 1) * stride - pad_begin - "
                           "pad_end + dilation * (kernel - 1) + output_padding + 1 with in_size %lld, stride %lld, "
                           "pad_begin %lld, pad_end %lld",
                           i, (long long)p->in_size[i], (long long)p->stride[i], (long long)p->pad_begin[i],
                           (long long)p->pad_end[i]);
        if (t < 1)
            return INVALID("output size < 1 along dim %d: transposed output (in_size[%d] - 1) * stride - "
                           "pad_begin - pad_end + dilation * (kernel - 1) + output_padding + 1 = %lld",
                           i, i, (long long)t);
        *out = t;
    }
    return NCONV_OK;
}

nconv_status nconv_problem_validate(const nconv_problem *p) {
    if (!p) return INVALID("problem is NULL");
    if (p->ndims < 1 || p->ndims > NCONV_MAX_SPATIAL)
        return INVALID("ndims = %d: must be 1, 2 or 3", p->ndims);
    if (p->batch < 0) return INVALID("batch = %lld: must be >= 0", (long long)p->batch);
    if (p->in_channels < 1) return INVALID("in_channels = %lld: must be >= 1", (long long)p->in_channels);
    if (p->out_channels < 1) return INVALID("out_channels = %lld: must be >= 1", (long long)p->out_channels);
    if (p->groups < 1) return INVALID("groups = %lld: must be >= 1", (long long)p->groups);
    if (p->in_channels % p->groups)
        return INVALID("in_channels = %lld is not divisible by groups = %lld", (long long)p->in_channels,
                       (long long)p->groups);
    if (p->out_channels % p->groups)
        return INVALID("out_channels = %lld is not divisible by groups = %lld", (long long)p->out_channels,
                       (long long)p->groups);
    if (p->transposed != 0 && p->transposed != 1)
        return INVALID("transposed = %d: must be 0 or 1", p->transposed);
    if ((unsigned)p->padding_mode > NCONV_PAD_CIRCULAR)
        return INVALID("padding_mode = %d: not a padding mode", (int)p->padding_mode);
    if ((unsigned)p->dtype > NCONV_C128) return INVALID("dtype = %d: not a data type", (int)p->dtype);
    if (p->transposed && p->padding_mode != NCONV_PAD_ZEROS)
        return INVALID("padding_mode = %d: only zeros padding is supported for transposed convolution",
                       (int)p->padding_mode);
    static const char *const mode_names[] = {"zeros", "reflect", "replicate", "circular"};
    for (int i = 0; i < p->ndims; i++) {
        if (p->in_size[i] < 1) return INVALID("in_size[%d] = %lld: must be >= 1", i, (long long)p->in_size[i]);
        if (p->kernel[i] < 1) return INVALID("kernel[%d] = %lld: must be >= 1", i, (long long)p->kernel[i]);
        if (p->stride[i] < 1) return INVALID("stride[%d] = %lld: must be >= 1", i, (long long)p->stride[i]);
        if (p->dilation[i] < 1)
            return INVALID("dilation[%d] = %lld: must be >= 1", i, (long long)p->dilation[i]);
        if (p->pad_begin[i] < 0)
            return INVALID("pad_begin[%d] = %lld: must be >= 0", i, (long long)p->pad_begin[i]);
        if (p->transposed) {
            int64_t lim = p->stride[i] > p->dilation[i] ? p->stride[i] : p->dilation[i];
            if (p->output_padding[i] < 0 || p->output_padding[i] >= lim)
                return INVALID("output_padding[%d] = %lld: must be >= 0 and smaller than stride (%lld) or "
                               "dilation (%lld)",
                               i, (long long)p->output_padding[i], (long long)p->stride[i],
                               (long long)p->dilation[i]);
        } else if (p->output_padding[i] != 0) {
            return INVALID("output_padding[%d] = %lld: only a transposed convolution has output padding", i,
                           (long long)p->output_padding[i]);
        }
        int64_t n = p->in_size[i];
        if (p->padding_mode == NCONV_PAD_REFLECT || p->padding_mode == NCONV_PAD_CIRCULAR) {
            int64_t lim = p->padding_mode == NCONV_PAD_REFLECT ? n - 1 : n;
            if (p->pad_begin[i] > lim || p->pad_end[i] > lim)
                return INVALID("pad_begin[%d] = %lld, pad_end[%d] = %lld: %s padding must be %s the input size "
                               "in_size[%d] = %lld",
                               i, (long long)p->pad_begin[i], i, (long long)p->pad_end[i],
                               mode_names[p->padding_mode],
                               p->padding_mode == NCONV_PAD_REFLECT ? "smaller than" : "at most", i, (long long)n);
        }
        int64_t o;
        nconv_status st = output_dim(p, i, &o);
        if (st) return st;
    }
    int64_t xs[NCONV_MAX_DIMS], ws[NCONV_MAX_DIMS], ys[NCONV_MAX_DIMS];
    int64_t out[NCONV_MAX_SPATIAL];
    for (int i = 0; i < p->ndims; i++) output_dim(p, i, &out[i]);
    int64_t wo = p->transposed ? p->in_channels : p->out_channels;
    int64_t wi = (p->transposed ? p->out_channels : p->in_channels) / p->groups;
    xs[0] = p->batch; xs[1] = p->in_channels;
    ws[0] = wo; ws[1] = wi;
    ys[0] = p->batch; ys[1] = p->out_channels;
    for (int i = 0; i < p->ndims; i++) {
        xs[2 + i] = p->in_size[i];
        ws[2 + i] = p->kernel[i];
        ys[2 + i] = out[i];
    }
    /* Bounded so that workspace sizes (sums of a few operands' f64 bytes) fit
     * in size_t with room to spare. */
    const int64_t *shapes[3] = {xs, ws, ys};
    static const char *const names[3] = {"input", "weight", "output"};
    for (int t = 0; t < 3; t++) {
        int64_t n = 1;
        for (int i = 0; i < p->ndims + 2; i++)
            if (!nconv__mul_ok(n, shapes[t][i], &n) || n > NCONV_MAX_ELEMENTS) {
                char dims[128];
                size_t k = 0;
                for (int j = 0; j < p->ndims + 2; j++)
                    k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", j ? ", " : "", (long long)shapes[t][j]);
                return INVALID("%s tensor [%s] has more than NCONV_MAX_ELEMENTS (2^48) elements", names[t], dims);
            }
    }
    /* The input rows the windows sweep, padding included (what an algorithm
     * may copy): same bound. */
    int64_t n = p->batch * (p->transposed ? p->out_channels : p->in_channels);
    for (int i = 0; i < p->ndims; i++) {
        const int64_t o = p->transposed ? p->in_size[i] : out[i];
        int64_t span, ext;
        if (!nconv__mul_ok(o - 1, p->stride[i], &span) || !nconv__mul_ok(p->kernel[i] - 1, p->dilation[i], &ext) ||
            !nconv__add_ok(span, ext + 1, &span) || !nconv__mul_ok(n, span, &n) || n > NCONV_MAX_ELEMENTS)
            return INVALID("padded input along dim %d: more than NCONV_MAX_ELEMENTS (2^48) elements", i);
    }
    return NCONV_OK;
}

nconv_status nconv_problem_output_size(const nconv_problem *p, int64_t out_size[NCONV_MAX_SPATIAL]) {
    nconv_status st = nconv_problem_validate(p);
    if (st) return st;
    if (!out_size) return INVALID("out_size is NULL");
    for (int i = 0; i < NCONV_MAX_SPATIAL; i++) out_size[i] = 1;
    for (int i = 0; i < p->ndims; i++) output_dim(p, i, &out_size[i]);
    return NCONV_OK;
}

nconv_status nconv_problem_shapes(const nconv_problem *p, int64_t x_shape[NCONV_MAX_DIMS],
                                  int64_t w_shape[NCONV_MAX_DIMS], int64_t y_shape[NCONV_MAX_DIMS]) {
    int64_t out[NCONV_MAX_SPATIAL];
    nconv_status st = nconv_problem_output_size(p, out);
    if (st) return st;
    int64_t xs[NCONV_MAX_DIMS] = {0}, ws[NCONV_MAX_DIMS] = {0}, ys[NCONV_MAX_DIMS] = {0};
    xs[0] = p->batch; xs[1] = p->in_channels;
    ws[0] = p->transposed ? p->in_channels : p->out_channels;
    ws[1] = (p->transposed ? p->out_channels : p->in_channels) / p->groups;
    ys[0] = p->batch; ys[1] = p->out_channels;
    for (int i = 0; i < p->ndims; i++) {
        xs[2 + i] = p->in_size[i];
        ws[2 + i] = p->kernel[i];
        ys[2 + i] = out[i];
    }
    if (x_shape) memcpy(x_shape, xs, sizeof xs);
    if (w_shape) memcpy(w_shape, ws, sizeof ws);
    if (y_shape) memcpy(y_shape, ys, sizeof ys);
    return NCONV_OK;
}

nconv_status nconv_problem_flops(const nconv_problem *p, double *flops) {
    int64_t out[NCONV_MAX_SPATIAL];
    nconv_status st = nconv_problem_output_size(p, out);
    if (st) return st;
    if (!flops) return INVALID("flops is NULL");
    /* Count the direct convolution: its output is the transposed input. */
    double f = 2.0 * (double)p->batch * (double)(p->transposed ? p->in_channels : p->out_channels) *
               (double)((p->transposed ? p->out_channels : p->in_channels) / p->groups);
    for (int i = 0; i < p->ndims; i++) f *= (double)p->kernel[i] * (double)(p->transposed ? p->in_size[i] : out[i]);
    *flops = nconv__is_complex(p->dtype) ? 4 * f : f; /* a complex multiply-add is four real ones */
    return NCONV_OK;
}

void nconv__core_from_problem(const nconv_problem *p, nconv_core *c) {
    int64_t out[NCONV_MAX_SPATIAL];
    for (int i = 0; i < p->ndims; i++) output_dim(p, i, &out[i]);
    memset(c, 0, sizeof *c);
    c->nd = p->ndims;
    c->N = p->batch;
    c->G = p->groups;
    c->C = p->transposed ? p->out_channels : p->in_channels;
    c->O = p->transposed ? p->in_channels : p->out_channels;
    c->mode = p->padding_mode;
    c->dt = p->dtype;
    int off = 3 - p->ndims;
    for (int i = 0; i < 3; i++) {
        c->in[i] = c->out[i] = c->k[i] = c->s[i] = c->d[i] = 1;
        c->pb[i] = 0;
    }
    for (int i = 0; i < p->ndims; i++) {
        c->in[off + i] = p->transposed ? out[i] : p->in_size[i];
        c->out[off + i] = p->transposed ? p->in_size[i] : out[i];
        c->k[off + i] = p->kernel[i];
        c->s[off + i] = p->stride[i];
        c->d[off + i] = p->dilation[i];
        c->pb[off + i] = p->pad_begin[i];
    }
}

int64_t nconv__core_in_spatial(const nconv_core *c) { return c->in[0] * c->in[1] * c->in[2]; }
int64_t nconv__core_out_spatial(const nconv_core *c) { return c->out[0] * c->out[1] * c->out[2]; }
int64_t nconv__core_kernel_spatial(const nconv_core *c) { return c->k[0] * c->k[1] * c->k[2]; }
int64_t nconv__core_output_numel(const nconv_core *c, nconv_direction dir) {
    return dir == NCONV_DIR_FWD     ? c->N * c->O * nconv__core_out_spatial(c)
           : dir == NCONV_DIR_BWD_D ? c->N * c->C * nconv__core_in_spatial(c)
                                    : c->O * (c->C / c->G) * nconv__core_kernel_spatial(c);
}

/* ------------------------------------------------------ text renderings */

typedef struct sbuf {
    char *p;
    size_t cap, len;
    int overflow;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) b->overflow = 1;
    if (n > 0) b->len += (size_t)n;
}

static const char *dtype_name(nconv_dtype dt) {
    switch (dt) {
    case NCONV_F32: return "f32";
    case NCONV_F64: return "f64";
    case NCONV_F16: return "f16";
    case NCONV_BF16: return "bf16";
    case NCONV_C64: return "c64";
    case NCONV_C128: return "c128";
    }
    return "?";
}

static const char *const pad_mode_names[] = {"zeros", "reflect", "replicate", "circular"};

/* benchdnn descriptor (needs a validated problem). The end padding benchdnn
 * derives from the output size equals ours up to window leftovers no tap
 * reads, so the descriptor describes the same computation. */
static void render_desc(const nconv_problem *p, sbuf *b) {
    static const char dn[3] = {'d', 'h', 'w'};
    int64_t out[NCONV_MAX_SPATIAL];
    for (int i = 0; i < p->ndims; i++) output_dim(p, i, &out[i]);
    int off = 3 - p->ndims;
    if (p->transposed) sb_printf(b, "--transposed ");
    sb_printf(b, "g%lldmb%lld_ic%lld", (long long)p->groups, (long long)p->batch, (long long)p->in_channels);
    for (int i = 0; i < p->ndims; i++) sb_printf(b, "i%c%lld", dn[off + i], (long long)p->in_size[i]);
    sb_printf(b, "_oc%lld", (long long)p->out_channels);
    for (int i = 0; i < p->ndims; i++) sb_printf(b, "o%c%lld", dn[off + i], (long long)out[i]);
    sb_printf(b, "_");
    for (int i = 0; i < p->ndims; i++) sb_printf(b, "k%c%lld", dn[off + i], (long long)p->kernel[i]);
    sb_printf(b, "_");
    for (int i = 0; i < p->ndims; i++) sb_printf(b, "s%c%lld", dn[off + i], (long long)p->stride[i]);
    sb_printf(b, "_");
    for (int i = 0; i < p->ndims; i++) sb_printf(b, "p%c%lld", dn[off + i], (long long)p->pad_begin[i]);
    sb_printf(b, "_");
    for (int i = 0; i < p->ndims; i++) sb_printf(b, "d%c%lld", dn[off + i], (long long)p->dilation[i] - 1);
}

nconv_status nconv_problem_to_desc(const nconv_problem *p, char *buf, size_t cap) {
    nconv_status st = nconv_problem_validate(p);
    if (st) return st;
    if (!buf || cap == 0) return INVALID("buf is NULL or cap = 0");
    sbuf b = {buf, cap, 0, 0};
    render_desc(p, &b);
    if (b.overflow) return INVALID("cap = %zu: too small for the descriptor (%zu bytes)", cap, b.len + 1);
    return NCONV_OK;
}

static void sb_tuple(sbuf *b, const int64_t *v, int n) {
    sb_printf(b, "(");
    for (int i = 0; i < n; i++) sb_printf(b, "%lld%s", (long long)v[i], n == 1 ? "," : (i + 1 < n ? ", " : ""));
    sb_printf(b, ")");
}

/* F.pad takes (last dim begin, last dim end, previous dim begin, ...). */
static void sb_fpad(sbuf *b, const int64_t *begin, const int64_t *end, int n, int negate) {
    sb_printf(b, "(");
    for (int i = n - 1; i >= 0; i--)
        sb_printf(b, "%lld, %lld%s", (long long)(negate ? -begin[i] : begin[i]),
                  (long long)(negate ? -end[i] : end[i]), i ? ", " : "");
    sb_printf(b, ")");
}

static void render_pytorch(const nconv_problem *p, sbuf *b) {
    static const char *const tnames[] = {"torch.float32", "torch.float64",   "torch.float16",
                                         "torch.bfloat16", "torch.complex64", "torch.complex128"};
    int nd = p->ndims;
    const char *tn = (unsigned)p->dtype <= NCONV_C128 ? tnames[p->dtype] : "torch.float32";
    int64_t g = p->groups > 0 ? p->groups : 1;
    sb_printf(b, "import torch, torch.nn.functional as F\n");
    sb_printf(b, "x = torch.randn(%lld, %lld, *", (long long)p->batch, (long long)p->in_channels);
    sb_tuple(b, p->in_size, nd);
    sb_printf(b, ", dtype=%s)\n", tn);
    if (!p->transposed) {
        sb_printf(b, "w = torch.randn(%lld, %lld, *", (long long)p->out_channels, (long long)(p->in_channels / g));
        sb_tuple(b, p->kernel, nd);
        sb_printf(b, ", dtype=%s)\n", tn);
        int sym = p->padding_mode == NCONV_PAD_ZEROS;
        for (int i = 0; i < nd; i++) sym = sym && p->pad_begin[i] == p->pad_end[i];
        if (sym) {
            sb_printf(b, "y = F.conv%dd(x, w, stride=", nd);
            sb_tuple(b, p->stride, nd);
            sb_printf(b, ", padding=");
            sb_tuple(b, p->pad_begin, nd);
        } else {
            /* F.pad handles per-side, negative (cropping) and non-zero modes. */
            sb_printf(b, "y = F.conv%dd(F.pad(x, ", nd);
            sb_fpad(b, p->pad_begin, p->pad_end, nd, 0);
            sb_printf(b, ", mode='%s'), w, stride=",
                      p->padding_mode == NCONV_PAD_ZEROS || (unsigned)p->padding_mode > NCONV_PAD_CIRCULAR
                          ? "constant"
                          : pad_mode_names[p->padding_mode]);
            sb_tuple(b, p->stride, nd);
        }
        sb_printf(b, ", dilation=");
        sb_tuple(b, p->dilation, nd);
        sb_printf(b, ", groups=%lld)\n", (long long)p->groups);
    } else {
        sb_printf(b, "w = torch.randn(%lld, %lld, *", (long long)p->in_channels, (long long)(p->out_channels / g));
        sb_tuple(b, p->kernel, nd);
        sb_printf(b, ", dtype=%s)\n", tn);
        int sym = 1;
        for (int i = 0; i < nd; i++) sym = sym && p->pad_begin[i] == p->pad_end[i];
        sb_printf(b, "y = F.conv_transpose%dd(x, w, stride=", nd);
        sb_tuple(b, p->stride, nd);
        if (sym) {
            sb_printf(b, ", padding=");
            sb_tuple(b, p->pad_begin, nd);
            sb_printf(b, ", output_padding=");
            sb_tuple(b, p->output_padding, nd);
            sb_printf(b, ", groups=%lld, dilation=", (long long)p->groups);
            sb_tuple(b, p->dilation, nd);
            sb_printf(b, ")\n");
        } else {
            /* Unpadded transposed conv, then crop pad_begin and pad_end - output_padding. */
            int64_t endc[NCONV_MAX_SPATIAL];
            for (int i = 0; i < nd; i++) endc[i] = p->pad_end[i] - p->output_padding[i];
            sb_printf(b, ", groups=%lld, dilation=", (long long)p->groups);
            sb_tuple(b, p->dilation, nd);
            sb_printf(b, ")\ny = F.pad(y, ");
            sb_fpad(b, p->pad_begin, endc, nd, 1);
            sb_printf(b, ")\n");
        }
    }
}

nconv_status nconv_problem_repro(const nconv_problem *p, nconv_repro_kind kind, char *buf, size_t cap) {
    if (!p) return INVALID("problem is NULL");
    if (!buf || cap == 0) return INVALID("buf is NULL or cap = 0");
    if (p->ndims < 1 || p->ndims > NCONV_MAX_SPATIAL) return INVALID("ndims = %d: must be 1, 2 or 3", p->ndims);
    sbuf b = {buf, cap, 0, 0};
    if (kind == NCONV_REPRO_CLI) {
        if (nconv_problem_validate(p) != NCONV_OK) {
            /* A rejected problem has no benchdnn descriptor; say what it is. */
            sb_printf(&b, "# invalid problem, not representable as a descriptor: %s", nconv_last_error());
        } else {
            sb_printf(&b, "nconv check --dtype %s", dtype_name(p->dtype));
            if (p->padding_mode != NCONV_PAD_ZEROS)
                sb_printf(&b, " --padding-mode %s", pad_mode_names[p->padding_mode]);
            sb_printf(&b, " ");
            render_desc(p, &b);
        }
    } else if (kind == NCONV_REPRO_PYTORCH) {
        render_pytorch(p, &b);
    } else {
        return INVALID("kind = %d: not a repro kind", (int)kind);
    }
    if (b.overflow) return INVALID("cap = %zu: too small for the reproduction (%zu bytes)", cap, b.len + 1);
    return NCONV_OK;
}
