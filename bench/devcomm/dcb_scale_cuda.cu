/*
 * dcb_scale_cuda.cu — the CUDA launcher of bench_devcomm's O(n) kernel (built only with CUDA).
 */
#include "dcb_scale.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static __global__ void dcb_scale_kernel(float *x, int64_t n, float a, float b)
{
    TESS_KERNEL_LOOP(i, n)
        dcb_scale_point(x, i, a, b);
}

extern "C" void dcb_scale_cuda(void *stream, float *x, size_t n, float a, float b)
{
    if (n == 0)
        return;
    unsigned blocks = tess_kernel_blocks((int64_t)n, 256, 132 * 16);
    dcb_scale_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>(x, (int64_t)n, a, b);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_devcomm: the scale kernel did not launch: %s\n",
                cudaGetErrorString(e));
        exit(1);
    }
}
