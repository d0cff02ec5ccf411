/*
 * tessera/kernel.h — write kernel math once for CUDA, HIP and the host backend.
 *
 * Put the per-point math of a kernel in `static inline TESS_HD` functions of one header; then
 * write a thin launcher per backend: a __global__ wrapper in a .cu/.hip file, and a host loop
 * enqueued with tess_gpu_launch_host(). TESS_HD expands to `__host__ __device__` under nvcc and
 * hipcc and to nothing in C.
 *
 *     static inline TESS_HD double stencil5(const double *t, int64_t i, int64_t ld) {…}
 *
 * TESS_KERNEL_LOOP(i, n) iterates i over [0, n) in a grid-stride loop on a device and a plain
 * loop on the host.
 */
#ifndef TESSERA_KERNEL_H
#define TESSERA_KERNEL_H

#include <stdint.h>

/* TESS_RESTRICT: the pointer is the only way to its data (lets device code use the read-only
 * cache for inputs). */
#define TESS_RESTRICT __restrict__

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TESS_HD     __host__ __device__
#define TESS_DEVICE_CODE 1
#define TESS_KERNEL_LOOP(i, n)                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n);       \
         i += (int64_t)blockDim.x * gridDim.x)
#else
#define TESS_HD
#define TESS_DEVICE_CODE 0
#define TESS_KERNEL_LOOP(i, n) for (int64_t i = 0; i < (int64_t)(n); i++)
#endif

/** Blocks for a 1-D launch of n threads with `block` threads per block, capped at `max`. */
static inline TESS_HD unsigned tess_kernel_blocks(int64_t n, unsigned block, unsigned max)
{
    int64_t b = (n + block - 1) / block;
    if (b < 1)
        b = 1;
    return b > (int64_t)max ? max : (unsigned)b;
}

#endif /* TESSERA_KERNEL_H */
