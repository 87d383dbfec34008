/* Thread-local last-error message and checked size arithmetic. */
#include "internal.h"

#include <stdio.h>

static _Thread_local char last_error[1024];

nconv_status nconv__error(nconv_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

void nconv__clear_error(void) { last_error[0] = '\0'; }

const char *nconv_last_error(void) { return last_error; }

const char *nconv_status_string(nconv_status s) {
    switch (s) {
    case NCONV_OK: return "ok";
    case NCONV_INVALID_ARGUMENT: return "invalid argument";
    case NCONV_UNSUPPORTED: return "unsupported";
    case NCONV_OUT_OF_MEMORY: return "out of memory";
    case NCONV_INTERNAL_ERROR: return "internal error";
    }
    return "unknown status";
}

int nconv__mul_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
int nconv__add_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
