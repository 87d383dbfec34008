/* Run-time kernel selection: a decision table, newest ISA first. */
#include "kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nconv_kernels tables[] = {
#if defined(__x86_64__) || defined(_M_X64)
    /* AVX-512: its own 6 x 16 GEMM tiles (and 7 x 16 indirect-B), Winograd tile transforms, channel sums and
     * transpose, the rest AVX2's; AVX2 has no 7 x 16 kernel */
    {NCONV_ISA_AVX512, "avx512",
     nconv_f32_igemm_6x16__avx512, nconv_f32_igemm_6x16_np__avx512, nconv_f32_igemm_6x16_planes__avx512,
     nconv_f32_gemm_ib_6x16__avx512, nconv_f32_gemm_ib_6x16_np__avx512, nconv_f32_gemm_6x16__avx512,
     nconv_f32_gemm_6x16_np__avx512, nconv_f32_transpose__avx512, nconv_f32_chsum__avx512, nconv_f32_dwconv__avx2,
     nconv_f32_vmacc__avx2, nconv_f32_dwrow__avx2, nconv_f32_dwdot__avx2, nconv_f32_gbw__avx2, nconv_f32_gfwd__avx2,
     nconv_f32_wino_in__avx512, nconv_f32_wino_out__avx512, nconv_f32_wino_w__avx2, nconv_f32_wino_dy__avx512,
     nconv_f32_wino_wgrad__avx2, nconv_f32_gemm_ib_7x16_np__avx512},
    {NCONV_ISA_AVX2, "avx2",
     nconv_f32_igemm_6x16__avx2, nconv_f32_igemm_6x16_np__avx2, nconv_f32_igemm_6x16_planes__avx2,
     nconv_f32_gemm_ib_6x16__avx2, nconv_f32_gemm_ib_6x16_np__avx2, nconv_f32_gemm_6x16__avx2,
     nconv_f32_gemm_6x16_np__avx2, nconv_f32_transpose__avx2, nconv_f32_chsum__avx2, nconv_f32_dwconv__avx2,
     nconv_f32_vmacc__avx2, nconv_f32_dwrow__avx2, nconv_f32_dwdot__avx2, nconv_f32_gbw__avx2, nconv_f32_gfwd__avx2,
     nconv_f32_wino_in__avx2, nconv_f32_wino_out__avx2, nconv_f32_wino_w__avx2, nconv_f32_wino_dy__avx2,
     nconv_f32_wino_wgrad__avx2, NULL},
#endif
    {NCONV_ISA_GENERIC, "generic",
     nconv_f32_igemm_6x16__generic, nconv_f32_igemm_6x16_np__generic, nconv_f32_igemm_6x16_planes__generic,
     nconv_f32_gemm_ib_6x16__generic, nconv_f32_gemm_ib_6x16_np__generic, nconv_f32_gemm_6x16__generic,
     nconv_f32_gemm_6x16_np__generic, nconv_f32_transpose__generic, nconv_f32_chsum__generic,
     nconv_f32_dwconv__generic, nconv_f32_vmacc__generic, nconv_f32_dwrow__generic, nconv_f32_dwdot__generic,
     nconv_f32_gbw__generic, nconv_f32_gfwd__generic, nconv_f32_wino_in__generic, nconv_f32_wino_out__generic,
     nconv_f32_wino_w__generic, nconv_f32_wino_dy__generic, nconv_f32_wino_wgrad__generic,
     nconv_f32_gemm_ib_7x16_np__generic},
};

/* The ISA and the cap are found once per process (a thread-safe cache): the
 * environment is read at the first call that needs a kernel. */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static nconv_isa isa_found = NCONV_ISA_GENERIC;
static char isa_cap_bad[64]; /* the environment's string (its start) when it names no ISA */

static void isa_detect(void) {
    nconv_isa cap = NCONV_ISA_AVX512;
    const char *env = getenv("NCONV_MAX_ISA");
    if (env && !strcmp(env, "generic")) cap = NCONV_ISA_GENERIC;
    else if (env && !strcmp(env, "avx2")) cap = NCONV_ISA_AVX2;
    else if (env && *env && strcmp(env, "avx512")) snprintf(isa_cap_bad, sizeof isa_cap_bad, "%s", env);
    isa_found = NCONV_ISA_GENERIC;
#if defined(__x86_64__) && defined(__GNUC__)
    /* libgcc also checks that the OS saves the registers (XCR0). */
    if (cap >= NCONV_ISA_AVX512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        isa_found = NCONV_ISA_AVX512;
    else if (cap >= NCONV_ISA_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isa_found = NCONV_ISA_AVX2;
#endif
}

nconv_isa nconv__detect_isa(void) {
    pthread_once(&isa_once, isa_detect);
    return isa_found;
}

const char *nconv__isa_cap_invalid(void) {
    pthread_once(&isa_once, isa_detect);
    return isa_cap_bad[0] ? isa_cap_bad : NULL;
}

const nconv_kernels *nconv__kernels_for(nconv_isa isa) {
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (tables[i].isa == isa) return &tables[i];
    return NULL;
}

const nconv_kernels *nconv__kernels(void) { return nconv__kernels_for(nconv__detect_isa()); }
