/*
 * app_gpu.c — device selection, allocation, copies and stream synchronization for the example
 * apps' plain MPI + GPU programs (see app_gpu.h). The CUDA calls are compiled with APP_CUDA.
 */
#include "app_gpu.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(OPEN_MPI) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#ifdef APP_CUDA
#include <cuda_runtime_api.h>
#endif

void              *app_stream;
int                app_cuda_aware;
static const char *app_prog = "app";
#ifdef APP_CUDA
static int on_gpu; /* a GPU was selected */
#endif

void app_set_prog(const char *prog)
{
    app_prog = prog;
}

void app_check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "%s: %s failed\n", app_prog, what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

#ifdef APP_CUDA
static int cuda_devices(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}
#endif

int app_select_device(const char *prog, const char *env)
{
    app_set_prog(prog);
#ifdef APP_CUDA
    const char *want = getenv(env);
    int         ndev = cuda_devices();
    if (ndev > 0 && !(want && !strcmp(want, "host"))) {
        MPI_Comm node;
        int      lrank, lsize;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &lrank);
        MPI_Comm_size(node, &lsize);
        MPI_Comm_free(&node);
        app_check(cudaSetDevice((int)((int64_t)lrank * ndev / lsize)) == cudaSuccess,
                  "cudaSetDevice");
        cudaStream_t s;
        app_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess,
                  "cudaStreamCreate");
        app_stream = s;
        on_gpu     = 1;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
        app_cuda_aware = MPIX_Query_cuda_support();
#endif
        return 1;
    }
#else
    (void)env;
#endif
    return 0;
}

void *app_dev_alloc(size_t bytes)
{
    void *p = NULL;
    bytes   = bytes ? bytes : 8;
#ifdef APP_CUDA
    if (on_gpu) {
        app_check(cudaMalloc(&p, bytes) == cudaSuccess, "cudaMalloc");
        return p;
    }
#endif
    p = calloc(1, bytes);
    app_check(p != NULL, "malloc");
    return p;
}

void *app_host_alloc(size_t bytes)
{
    void *p = NULL;
    bytes   = bytes ? bytes : 8;
#ifdef APP_CUDA
    if (on_gpu) {
        app_check(cudaMallocHost(&p, bytes) == cudaSuccess, "cudaMallocHost");
        return p;
    }
#endif
    p = calloc(1, bytes);
    app_check(p != NULL, "malloc");
    return p;
}

void app_dev_free(void *p, int host)
{
#ifdef APP_CUDA
    if (on_gpu) {
        if (host)
            cudaFreeHost(p);
        else
            cudaFree(p);
        return;
    }
#endif
    (void)host;
    free(p);
}

void app_copy(void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
#ifdef APP_CUDA
    if (on_gpu) {
        app_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)app_stream) ==
                      cudaSuccess, "cudaMemcpyAsync");
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

void app_sync_stream(void)
{
#ifdef APP_CUDA
    if (on_gpu)
        app_check(cudaStreamSynchronize((cudaStream_t)app_stream) == cudaSuccess,
                  "cudaStreamSynchronize");
#endif
}
