/*
 * copy_batch.h — the argument of the CUDA backend's batch copy kernel (copy_kernel.cu), shared
 * by the kernel and its launcher (kcopy_cuda.c): passed by value, so the launch carries the whole
 * list and needs no memory of its own.
 */
#ifndef TESS_CUDA_COPY_BATCH_H
#define TESS_CUDA_COPY_BATCH_H

#include <stdint.h>

#define TESS_CUDA_COPY_BATCH_MAX 64 /* = TESS_GPU_COPY_BATCH_MAX; 1544 bytes of parameters */

typedef struct tess_cuda_copy_batch {
    char       *dst[TESS_CUDA_COPY_BATCH_MAX];
    const char *src[TESS_CUDA_COPY_BATCH_MAX];
    uint64_t    size[TESS_CUDA_COPY_BATCH_MAX];
    uint32_t    n;
} tess_cuda_copy_batch_t;

#endif /* TESS_CUDA_COPY_BATCH_H */
