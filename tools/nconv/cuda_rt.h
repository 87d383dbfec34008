/* The CUDA runtime calls of the command-line tool and the GPU tests (device buffers,
 * copies, events), loaded at run time as the library loads its own, so that neither
 * links CUDA. */
#ifndef NCONV_CUDA_RT_H
#define NCONV_CUDA_RT_H

#include <stddef.h>

/* 0 when libcudart.so.13 (or NCONV_CUDART_LIBRARY) is loaded; else -1 and the reason in why. */
int cuda_rt_load(char *why, size_t cap);
void *cuda_rt_malloc(size_t bytes);                   /* NULL on failure */
void cuda_rt_free(void *p);
int cuda_rt_to_device(void *dst, const void *src, size_t bytes);   /* 0 on success */
int cuda_rt_to_host(void *dst, const void *src, size_t bytes);
int cuda_rt_memset(void *dst, int value, size_t bytes);
int cuda_rt_synchronize(void);
/* Milliseconds of `reps` runs of fn(arg) on the default stream, between two events
 * (-1 on failure). */
double cuda_rt_time(int (*fn)(void *), void *arg, int reps);
const char *cuda_rt_error(void); /* the last failed call's error name */

#endif
