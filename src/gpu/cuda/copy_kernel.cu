/*
 * copy_kernel.cu — the CUDA backend's one kernel: a device-to-device copy. Enqueuing a kernel
 * costs the host about a microsecond and a half less than cudaMemcpyAsync on the H200
 * (4.4 against 5.9 µs), which is most of a small device message, so kcopy_cuda.c copies buffers
 * up to 1 MiB between device allocations with it.
 *
 * Each thread moves elements of `width` bytes (16, 8, 4 or 1: the largest that divides both
 * addresses and the size), striding over the grid.
 *
 * With `word` (a stream signal word: mapped host memory, launched as one block only), the
 * block writes `value` there once its copy is done, after a system-wide fence: the copy and
 * the signal that says it completed are then one launch (tess_cuda_memcpy_signal_async).
 *
 * The batch kernel moves up to TESS_CUDA_COPY_BATCH_MAX copies in one launch: copy y of the
 * list by the blocks of grid row y (tess_cuda_memcpy_batch_async), each copy at its own width.
 */
#include <stddef.h>
#include <stdint.h>

#include "copy_batch.h"

template <typename T>
static __device__ void copy_elems(char *dst, const char *src, size_t n)
{
    T       *d      = reinterpret_cast<T *>(dst);
    const T *s      = reinterpret_cast<const T *>(src);
    size_t   count  = n / sizeof(T);
    size_t   stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        d[i] = s[i];
}

extern "C" __global__ void tess_cuda_copy_kernel(char *dst, const char *src, size_t n,
                                                 unsigned width, unsigned *word, unsigned value)
{
    switch (width) {
    case 16: copy_elems<uint4>(dst, src, n); break;
    case 8:  copy_elems<uint64_t>(dst, src, n); break;
    case 4:  copy_elems<uint32_t>(dst, src, n); break;
    default: copy_elems<uint8_t>(dst, src, n); break;
    }
    if (word) {
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence_system();
            *(volatile unsigned *)word = value;
        }
    }
}

extern "C" __global__ void tess_cuda_copy_batch_kernel(tess_cuda_copy_batch_t b)
{
    unsigned j = blockIdx.y;
    if (j >= b.n)
        return;
    char       *dst  = b.dst[j];
    const char *src  = b.src[j];
    size_t      n    = (size_t)b.size[j];
    uintptr_t   bits = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)n;
    if (bits % 16 == 0)
        copy_elems<uint4>(dst, src, n);
    else if (bits % 8 == 0)
        copy_elems<uint64_t>(dst, src, n);
    else if (bits % 4 == 0)
        copy_elems<uint32_t>(dst, src, n);
    else
        copy_elems<uint8_t>(dst, src, n);
}

/* The kernels' host-side handles, for cudaGetFuncBySymbol (called from C). */
extern "C" const void *tess_cuda_copy_kernel_symbol(void)
{
    return (const void *)tess_cuda_copy_kernel;
}

extern "C" const void *tess_cuda_copy_batch_kernel_symbol(void)
{
    return (const void *)tess_cuda_copy_batch_kernel;
}
