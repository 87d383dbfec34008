/* Run-time kernel selection: a decision table, newest ISA first. */
#include "kernels.h"

#include <pthread.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tables, from the kernel lists of kernels.h. */
#define SLOT_GENERIC(slot, type, function, avx2, avx512) .slot = nconv_##function##__generic,
#define SLOT_AVX2(slot, type, function, avx2, avx512) .slot = NCONV_KERNEL_##avx2(function),
#define SLOT_AVX512(slot, type, function, avx2, avx512) .slot = NCONV_KERNEL_##avx512(function),
#define SLOT_AVX512_BF16(slot, type, function, avx2, avx512) .slot = NCONV_KERNEL_BF16_##avx512(function),
static const nconv_kernels tables[] = {
#if defined(__x86_64__) || defined(_M_X64)
    {.isa = NCONV_ISA_AVX512_BF16, .f64_nr = 16, .dw_vl = 16, .name = "avx512_bf16", NCONV_KERNELS(SLOT_AVX512_BF16)},
    {.isa = NCONV_ISA_AVX512, .f64_nr = 16, .dw_vl = 16, .name = "avx512", NCONV_KERNELS(SLOT_AVX512)},
    {.isa = NCONV_ISA_AVX2, .f64_nr = 8, .dw_vl = 8, .name = "avx2", NCONV_KERNELS(SLOT_AVX2)},
#endif
    {.isa = NCONV_ISA_GENERIC, .f64_nr = 8, .dw_vl = 8, .name = "generic", NCONV_KERNELS(SLOT_GENERIC)},
};

/* The ISA and the cap are found once per process (a thread-safe cache): the
 * environment is read at the first call that needs a kernel. */
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static nconv_isa isa_found = NCONV_ISA_GENERIC;
static char isa_cap_bad[64]; /* the environment's string (its start) when it names no ISA */
static int amd_cpu;           /* the vendor is AMD (see nconv__bf16_pairs) */

static void isa_detect(void) {
    nconv_isa cap = NCONV_ISA_AVX512_BF16;
    const char *env = getenv("NCONV_MAX_ISA");
    if (env && !strcmp(env, "generic")) cap = NCONV_ISA_GENERIC;
    else if (env && !strcmp(env, "avx2")) cap = NCONV_ISA_AVX2;
    else if (env && !strcmp(env, "avx512")) cap = NCONV_ISA_AVX512;
    else if (env && *env && strcmp(env, "avx512_bf16")) snprintf(isa_cap_bad, sizeof isa_cap_bad, "%s", env);
    isa_found = NCONV_ISA_GENERIC;
#if defined(__x86_64__) && defined(__GNUC__)
    /* libgcc also checks that the OS saves the registers (XCR0). */
    /* F16C (CPUID leaf 1, ECX bit 29), which not every compiler's __builtin_cpu_supports names */
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    char vendor[13] = "";
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) { /* the vendor string: EBX, EDX, ECX */
        memcpy(vendor, &ebx, 4), memcpy(vendor + 4, &edx, 4), memcpy(vendor + 8, &ecx, 4);
        vendor[12] = 0;
    }
    amd_cpu = !strcmp(vendor, "AuthenticAMD");
    const int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1u);
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    const int avx512 = __builtin_cpu_supports("avx512f") && avx2;
    const int avx512_bf16 = avx512 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512dq") &&
                            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (cap >= NCONV_ISA_AVX512_BF16 && avx512_bf16)
        isa_found = NCONV_ISA_AVX512_BF16;
    else if (cap >= NCONV_ISA_AVX512 && avx512)
        isa_found = NCONV_ISA_AVX512;
    else if (cap >= NCONV_ISA_AVX2 && avx2)
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

int nconv__bf16_pairs(const nconv_kernels *k) {
    pthread_once(&isa_once, isa_detect);
    return k->bf16_igemm_np && (k->isa != NCONV_ISA_AVX512_BF16 || amd_cpu);
}
