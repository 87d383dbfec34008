/*
 * Operand checks shared by every entry point, done before anything is
 * allocated or written: each tensor's strides address memory without int64
 * overflow, no output maps two indices onto one element, and no output's
 * address range meets another operand's.
 */
#include "internal.h"

#include <stdlib.h>

#define INVALID(...) nconv__error(NCONV_INVALID_ARGUMENT, "nconv: " __VA_ARGS__)

typedef struct span {
    uintptr_t lo, hi; /* bytes [lo, hi); lo == hi: no elements */
} span;

/* The dims of an operand: its own, then the batch dim (if any). */
static int dims_of(const nconv_operand_check *o, int64_t *shape, int64_t *stride) {
    int n = 0;
    for (int i = 0; i < o->rank; i++) shape[n] = o->shape[i], stride[n++] = o->t->stride[i];
    if (o->batch) shape[n] = o->batch, stride[n++] = o->batch_stride;
    return n;
}

static nconv_status operand_span(const nconv_operand_check *o, size_t esize, span *sp) {
    int64_t shape[NCONV_MAX_DIMS + 1], stride[NCONV_MAX_DIMS + 1];
    const int n = dims_of(o, shape, stride);
    int64_t lo = 0, hi = 0, numel = 1;
    for (int i = 0; i < n; i++) {
        if (!nconv__mul_ok(numel, shape[i], &numel)) return INVALID("%s has more elements than int64 holds", o->name);
        int64_t reach;
        if (shape[i] == 0) continue;
        if (stride[i] == INT64_MIN || !nconv__mul_ok(shape[i] - 1, stride[i] < 0 ? -stride[i] : stride[i], &reach))
            return INVALID("%s stride[%d] = %lld: offsets overflow int64", o->name, i, (long long)stride[i]);
        if (stride[i] < 0 ? __builtin_sub_overflow(lo, reach, &lo) : !nconv__add_ok(hi, reach, &hi))
            return INVALID("%s strides: offsets overflow int64", o->name);
    }
    sp->lo = sp->hi = 0;
    if (numel == 0) return NCONV_OK;
    int64_t blo, bhi;
    if (__builtin_mul_overflow(lo, (int64_t)esize, &blo) || __builtin_mul_overflow(hi + 1, (int64_t)esize, &bhi))
        return INVALID("%s strides: byte offsets overflow int64", o->name);
    const uintptr_t base = (uintptr_t)o->t->data;
    if ((blo < 0 && base < (uintptr_t)-blo) || (uintptr_t)bhi > UINTPTR_MAX - base)
        return INVALID("%s: data pointer plus its strides wraps around the address space", o->name);
    sp->lo = base - (uintptr_t)(-blo);
    sp->hi = base + (uintptr_t)bhi;
    return NCONV_OK;
}

/* Sufficient condition for distinct elements: sorted by |stride|, each
 * non-trivial dim steps over everything the smaller ones reach. */
static int overlaps_itself(const nconv_operand_check *o) {
    int64_t shape[NCONV_MAX_DIMS + 1], stride[NCONV_MAX_DIMS + 1];
    int n = dims_of(o, shape, stride), m = 0;
    int64_t sz[NCONV_MAX_DIMS + 1], st[NCONV_MAX_DIMS + 1];
    for (int i = 0; i < n; i++) {
        if (shape[i] == 0) return 0;
        if (shape[i] == 1) continue;
        int64_t s = stride[i] < 0 ? -stride[i] : stride[i];
        int j = m++;
        for (; j > 0 && st[j - 1] > s; j--) st[j] = st[j - 1], sz[j] = sz[j - 1];
        st[j] = s, sz[j] = shape[i];
    }
    int64_t reach = 0; /* largest offset the smaller dims reach (no overflow: spans were checked) */
    for (int i = 0; i < m; i++) {
        if (st[i] <= reach) return 1;
        reach += (sz[i] - 1) * st[i];
    }
    return 0;
}

nconv_status nconv__check_operands(nconv_dtype dt, const nconv_operand_check *ops, int n) {
    span sp[16];
    if (n > 16) return nconv__error(NCONV_INTERNAL_ERROR, "nconv: too many operands to check");
    for (int i = 0; i < n; i++) {
        sp[i].lo = sp[i].hi = 0;
        if (!ops[i].t) continue;
        nconv_status st = operand_span(&ops[i], nconv_dtype_size(dt), &sp[i]);
        if (st) return st;
        if (sp[i].lo == sp[i].hi) continue;
        if (!ops[i].t->data) return INVALID("%s->data is NULL for a non-empty tensor", ops[i].name);
        if (ops[i].output && overlaps_itself(&ops[i]))
            return INVALID("%s strides map two indices onto one element: an output must not overlap itself",
                           ops[i].name);
    }
    for (int i = 0; i < n; i++) {
        if (!ops[i].output || sp[i].lo == sp[i].hi) continue;
        for (int j = 0; j < n; j++)
            if (j != i && sp[j].lo < sp[i].hi && sp[i].lo < sp[j].hi && (j > i || !ops[j].output))
                return INVALID("%s overlaps %s in memory: outputs may not alias other operands", ops[i].name,
                               ops[j].name);
    }
    return NCONV_OK;
}
